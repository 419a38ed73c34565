"""Model families: one record per encoder architecture, keyed by config.json's `model_type`.

What differs between XLM-R (BGE-M3, multilingual-e5) and BERT (all-MiniLM, bge-small) is
listed here once and read by the loader (weight prefixes, config rules, tokenizer files), the
Keras builder (position scheme), the builder (tokenizer kind, default lengths) and the harness
(which reference computes the truth). Adding a family is one record here plus, where it has a
new position scheme or tokenizer kind, that one branch where the scheme or kind is read.

How a checkpoint's embeddings come out is its `Outputs` layout, chosen by the files it holds:
BGE-M3's three heads (`colbert_linear.pt`, `sparse_linear.pt`; FlagEmbedding is the
reference), or a sentence-transformers pipeline (`modules.json`: Pooling, optional Normalize;
sentence-transformers is the reference), dense only. Standard library only: the runtime
install reads nothing here, the builder and harness do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge_m3.errors import EdgeM3Error
from edge_m3.spec import (
    BYTE_LEVEL_BPE,
    HEADS,
    SENTENCEPIECE,
    WORDPIECE,
    WORDPIECE_VOCAB,
    XLMR_SENTENCEPIECE,
)

# How position ids are made from the input ids (read by edge_m3.modeling):
# XLM-R counts real tokens from pad_token_id + 1 and gives <pad> the row pad_token_id;
# BERT uses rows 0..L-1 whatever the ids; ModernBERT rotates queries and keys (RoPE) by 0..L-1.
AFTER_PADDING, ABSOLUTE, ROTARY = "after-padding", "absolute", "rotary"
# Which Keras encoder implements a family (edge_m3.modeling): BERT's post-LayerNorm layers
# (XLM-R, BERT), or ModernBERT's pre-norm layers with GeGLU and local/global attention.
POST_LN, MODERNBERT = "post-ln", "modernbert"

M3_HEAD_FILES = ("colbert_linear.pt", "sparse_linear.pt")
ST_MODULES = "modules.json"
ST_CONFIG = "sentence_bert_config.json"
ST_POOLING_MODES = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean"}
ST_TRANSFORMER = "sentence_transformers.models.Transformer"
ST_POOLING = "sentence_transformers.models.Pooling"
ST_NORMALIZE = "sentence_transformers.models.Normalize"


@dataclass(frozen=True)
class Pooling:
    """How the dense vector is made from the last hidden state: the first token's row (`cls`)
    or the mean over the real tokens (`mean`), then L2-normalised or not."""

    mode: str
    normalize: bool

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "normalize": self.normalize}


@dataclass(frozen=True)
class Outputs:
    """A checkpoint's output layout: the heads it can export and the reference that defines them."""

    name: str
    marker: tuple[str, ...]  # the files whose presence selects this layout (all of them)
    heads: tuple[str, ...]
    reference: str  # REFERENCES key


M3 = Outputs("bge-m3", M3_HEAD_FILES, HEADS, "flagembedding")
SENTENCE_TRANSFORMERS = Outputs("sentence-transformers", (ST_MODULES,), ("dense",), "sentence-transformers")
# A plain transformers snapshot (a ModernBERT from the hub, no sentence-transformers modules):
# the dense vector is the config's `classifier_pooling` of the last hidden state, unnormalised.
TRANSFORMERS = Outputs("transformers", ("config.json",), ("dense",), "transformers")
OUTPUTS = (M3, SENTENCE_TRANSFORMERS, TRANSFORMERS)
# The reference implementations `verify` can run, by Outputs.reference.
REFERENCES = {"flagembedding": "FlagEmbedding's BGEM3FlagModel",
              "sentence-transformers": "sentence-transformers' SentenceTransformer.encode",
              "transformers": "transformers' AutoModel, its last hidden state pooled"}


@dataclass(frozen=True)
class Family:
    """One encoder architecture: everything edge-m3 does differently for it."""

    name: str
    model_types: tuple[str, ...]  # config.json `model_type` values it handles
    about: str
    weight_prefixes: tuple[str, ...]  # stored names may carry one of these before `embeddings.`
    activations: tuple[str, ...]  # config.json `hidden_act` values the Keras layers implement
    positions: str  # AFTER_PADDING or ABSOLUTE
    tokenizer_kind: str  # spec.TOKENIZER_KINDS
    tokenizer_files: tuple[str, ...]  # the checkpoint files the tokenizer is read from (any one)
    outputs: tuple[Outputs, ...]  # the output layouts it supports, the first present wins
    keras_name: str  # the Keras model's name (the scope of every op in the exported graphs)
    encoder: str = POST_LN  # POST_LN or MODERNBERT (edge_m3.modeling)
    segments: bool = True  # has token-type embeddings (`type_vocab_size`; type 0 is folded in)
    # ModelConfig field -> the config.json key, where the family spells it otherwise
    config_names: Mapping[str, str] = field(default_factory=dict)

    def expected_shapes(self, config: Any) -> dict[str, tuple[int, ...]]:
        """Every encoder tensor the family's model needs, with the shape config.json implies."""
        return (_post_ln_shapes if self.encoder == POST_LN else _modernbert_shapes)(config)

    def read_extra(self, raw: Mapping[str, Any], where: str) -> dict[str, Any]:
        """The family's own config.json settings, checked (one line naming the key)."""
        return read_modernbert_config(raw, where) if self.encoder == MODERNBERT else {}

    def max_seq_len(self, config: Any) -> int:
        """Longest input, specials included, that the positions allow."""
        if self.positions == AFTER_PADDING:
            return int(config.max_position_embeddings) - int(config.pad_token_id) - 1
        return int(config.max_position_embeddings)

    def position_rows(self, config: Any, seq_lens: Sequence[int]) -> int:
        """Position rows the fixed lengths can reach (the rest is never read and is cut):
        XLM-R counts from pad_token_id + 1 (BGE-M3 at 512: 514 of its 8,194 rows)."""
        if self.positions == ROTARY:
            return 0  # no position table
        start = int(config.pad_token_id) + 1 if self.positions == AFTER_PADDING else 0
        return min(int(config.max_position_embeddings), max(seq_lens) + start)

    def check_config(self, config: Any, where: str) -> None:
        """The family's own rules on config.json's values (one line naming the key)."""
        if config.hidden_act not in self.activations:
            key = self.config_names.get("hidden_act", "hidden_act")
            raise EdgeM3Error(f"{where}: '{key}' {config.hidden_act!r} unsupported ({self.name} "
                              f"here implements {', '.join(map(repr, self.activations))})")
        if self.positions == AFTER_PADDING and config.max_position_embeddings <= config.pad_token_id + 2:
            raise EdgeM3Error(f"{where}: 'max_position_embeddings' {config.max_position_embeddings} "
                              f"leaves no positions after 'pad_token_id' {config.pad_token_id}")


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("xlm-roberta", ("xlm-roberta",), "XLM-RoBERTa (BGE-M3, multilingual-e5): SentencePiece "
           "unigram with fairseq ids, positions after the padding id", ("roberta.",), ("gelu",),
           AFTER_PADDING, XLMR_SENTENCEPIECE, (SENTENCEPIECE,), (M3,), "bge_m3"),
    Family("bert", ("bert",), "BERT (all-MiniLM, bge-small, the multilingual MiniLMs): WordPiece, "
           "absolute positions, segment embeddings (type 0)", ("bert.",), ("gelu",), ABSOLUTE,
           WORDPIECE, ("tokenizer.json", WORDPIECE_VOCAB), (SENTENCE_TRANSFORMERS,), "bert"),
    Family("modernbert", ("modernbert",), "ModernBERT (modernbert-embed, gte-modernbert, Granite "
           "R2, mmBERT): pre-norm, rotary positions with a local and a global base, GeGLU, a "
           "sliding window every layer but each global_attn_every_n_layers-th, no biases",
           ("model.",), ("gelu",), ROTARY, BYTE_LEVEL_BPE, ("tokenizer.json",),
           (SENTENCE_TRANSFORMERS, TRANSFORMERS), "modernbert", encoder=MODERNBERT, segments=False,
           config_names={"layer_norm_eps": "norm_eps", "hidden_act": "hidden_activation"}),
)}
_BY_MODEL_TYPE = {t: f for f in FAMILIES.values() for t in f.model_types}


def family_for(model_type: Any, where: str) -> Family:
    """The family of config.json's `model_type`, or one line naming it and the known ones."""
    family = _BY_MODEL_TYPE.get(model_type) if isinstance(model_type, str) else None
    if family is None:
        known = ", ".join(sorted(_BY_MODEL_TYPE))
        raise EdgeM3Error(f"{where}: 'model_type' {model_type!r} is not a family edge-m3 builds "
                          f"(known: {known})")
    return family


def outputs_for(family: Family, folder: Path) -> Outputs:
    """The checkpoint's output layout: the first of the family's whose files it holds; a family
    with one layout gets it anyway, so that its reader names the file that is missing."""
    for layout in family.outputs:
        if all((folder / f).is_file() for f in layout.marker):
            return layout
    if len(family.outputs) == 1:
        return family.outputs[0]
    wanted = " or ".join(f"{' + '.join(o.marker)} ({o.name})" for o in family.outputs)
    raise EdgeM3Error(f"{folder}: no output layout: needs {wanted}")


def read_json(path: Path) -> Any:
    """A checkpoint's JSON file, or one line naming it (missing, unreadable, not JSON, nested too deep)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EdgeM3Error(f"{path}: missing") from None
    except OSError as exc:
        raise EdgeM3Error(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (ValueError, RecursionError) as exc:
        raise EdgeM3Error(f"{path}: not valid JSON ({exc})") from None


@dataclass(frozen=True)
class SentenceTransformersLayout:
    """What a sentence-transformers checkpoint declares about its embedding."""

    pooling: Pooling
    max_seq_length: int | None  # sentence_bert_config.json's, None when absent


def read_sentence_transformers(folder: Path) -> SentenceTransformersLayout:
    """modules.json (Transformer, Pooling, optional Normalize) and the Pooling config; anything
    edge-m3 does not reproduce is one line naming the file and the field."""
    modules_path = folder / ST_MODULES
    modules = read_json(modules_path)
    if not isinstance(modules, list) or not all(isinstance(m, Mapping) for m in modules):
        raise EdgeM3Error(f"{modules_path}: expected a JSON array of modules")
    types = [str(m.get("type", "")) for m in modules]
    if not types or types[0] != ST_TRANSFORMER:
        raise EdgeM3Error(f"{modules_path}: the first module must be {ST_TRANSFORMER}, got {types[:1]}")
    rest = types[1:]
    if not rest or rest[0] != ST_POOLING or any(t != ST_NORMALIZE for t in rest[1:]) or len(rest) > 2:
        raise EdgeM3Error(f"{modules_path}: modules {rest} unsupported (edge-m3 reproduces "
                          f"Transformer, Pooling and an optional Normalize)")
    sub = modules[1].get("path", "")  # a folder of the checkpoint: never outside it, never a line break
    if not isinstance(sub, str) or Path(sub).name != sub or sub in ("", ".", "..") or not sub.isprintable():
        raise EdgeM3Error(f"{modules_path}: the Pooling module's path {sub!r:.80} is not a folder name")
    pool_dir = folder / sub
    pool_path = pool_dir / "config.json"
    cfg = read_json(pool_path)
    if not isinstance(cfg, Mapping):
        raise EdgeM3Error(f"{pool_path}: expected a JSON object")
    on = [k for k, v in cfg.items() if k.startswith("pooling_mode_") and v is True]
    if len(on) != 1 or on[0] not in ST_POOLING_MODES:
        raise EdgeM3Error(f"{pool_path}: pooling {on or 'none'} unsupported (one of "
                          f"{', '.join(ST_POOLING_MODES)})")
    max_len: int | None = None
    st_config = folder / ST_CONFIG
    if st_config.is_file():
        value = read_json(st_config)
        raw = value.get("max_seq_length") if isinstance(value, Mapping) else None
        if raw is not None and (not isinstance(raw, int) or isinstance(raw, bool) or raw < 2):
            raise EdgeM3Error(f"{st_config}: 'max_seq_length' must be an integer of at least 2, got {raw!r}")
        max_len = raw
    return SentenceTransformersLayout(Pooling(ST_POOLING_MODES[on[0]], len(rest) == 2), max_len)


M3_POOLING = Pooling("cls", True)  # BGEM3FlagModel's dense: the normalised <s> row


def _post_ln_shapes(config: Any) -> dict[str, tuple[int, ...]]:
    """BERT / XLM-R: embeddings (word, position, token type, LayerNorm) and post-LN layers."""
    h, f = config.hidden_size, config.intermediate_size
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word_embeddings.weight": (config.vocab_size, h),
        "embeddings.position_embeddings.weight": (config.max_position_embeddings, h),
        "embeddings.token_type_embeddings.weight": (config.type_vocab_size, h),
        "embeddings.LayerNorm.weight": (h,),
        "embeddings.LayerNorm.bias": (h,),
    }
    for i in range(config.num_hidden_layers):
        p = f"encoder.layer.{i}."
        for name, (out_dim, in_dim) in {
            "attention.self.query": (h, h), "attention.self.key": (h, h),
            "attention.self.value": (h, h), "attention.output.dense": (h, h),
            "intermediate.dense": (f, h), "output.dense": (h, f),
        }.items():
            shapes[p + name + ".weight"] = (out_dim, in_dim)
            shapes[p + name + ".bias"] = (out_dim,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[p + norm + ".weight"] = (h,)
            shapes[p + norm + ".bias"] = (h,)
    return shapes


def _modernbert_shapes(config: Any) -> dict[str, tuple[int, ...]]:
    """ModernBERT: token embeddings + norm, per layer Wqkv/Wo and GeGLU Wi (2 x intermediate)/Wo
    with their norms (layer 0 has no attention norm), a final norm; biases where the config has them."""
    h, f, x = config.hidden_size, config.intermediate_size, config.extra
    shapes: dict[str, tuple[int, ...]] = {"embeddings.tok_embeddings.weight": (config.vocab_size, h)}

    def norm(name: str) -> None:
        shapes[name + ".weight"] = (h,)
        if x["norm_bias"]:
            shapes[name + ".bias"] = (h,)

    def linear(name: str, out_dim: int, in_dim: int, bias: bool) -> None:
        shapes[name + ".weight"] = (out_dim, in_dim)
        if bias:
            shapes[name + ".bias"] = (out_dim,)

    norm("embeddings.norm")
    for i in range(config.num_hidden_layers):
        p = f"layers.{i}."
        if i:
            norm(p + "attn_norm")
        linear(p + "attn.Wqkv", 3 * h, h, x["attention_bias"])
        linear(p + "attn.Wo", h, h, x["attention_bias"])
        norm(p + "mlp_norm")
        linear(p + "mlp.Wi", 2 * f, h, x["mlp_bias"])
        linear(p + "mlp.Wo", h, f, x["mlp_bias"])
    norm("final_norm")
    return shapes


FULL_ATTENTION, SLIDING_ATTENTION = "full_attention", "sliding_attention"
# Keys a ModernBERT config.json may hold that change what the model computes and that this port
# does not reproduce: refused by name rather than ignored.
_MODERNBERT_UNSUPPORTED = {"head_dim": "a head size other than hidden_size / num_attention_heads",
                           "is_causal": "causal attention", "causal": "causal attention"}


def read_modernbert_config(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    """ModernBERT's settings from config.json, in transformers 4's spelling
    (`global_attn_every_n_layers`, `global_rope_theta`, `local_rope_theta`) or 5's (`layer_types`,
    `rope_parameters`); whatever the port does not compute is one line naming the key."""
    def bad(key: str, why: str) -> EdgeM3Error:
        return EdgeM3Error(f"{where}: '{key}' {why}")

    layers = raw.get("num_hidden_layers")
    head_dim = raw.get("hidden_size", 0) // max(1, raw.get("num_attention_heads", 1))
    for key, why in _MODERNBERT_UNSUPPORTED.items():
        value = raw.get(key)
        if (key == "head_dim" and value in (None, head_dim)) or (key != "head_dim" and not value):
            continue
        raise bad(key, f"{value!r}: {why} is not what edge-m3's ModernBERT computes")
    out: dict[str, Any] = {}
    for key in ("norm_bias", "attention_bias", "mlp_bias"):
        value = raw.get(key, False)
        if not isinstance(value, bool):
            raise bad(key, f"must be true or false, got {value!r}")
        out[key] = value
    window = raw.get("local_attention", 128)
    if not isinstance(window, int) or isinstance(window, bool) or window < 2 or window % 2:
        raise bad("local_attention", f"must be an even integer >= 2 (the whole window), got {window!r}")
    out["local_attention"] = window
    types = raw.get("layer_types")
    if types is None:
        every = raw.get("global_attn_every_n_layers", 1)
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise bad("global_attn_every_n_layers", f"must be a positive integer, got {every!r}")
        types = [FULL_ATTENTION if i % every == 0 else SLIDING_ATTENTION for i in range(int(layers or 0))]
    if not isinstance(types, list) or len(types) != layers or \
            any(t not in (FULL_ATTENTION, SLIDING_ATTENTION) for t in types):
        raise bad("layer_types", f"must list {layers} of {FULL_ATTENTION!r} / {SLIDING_ATTENTION!r}, got "
                                 f"{str(types)[:80]}")
    out["layer_types"] = list(types)
    rope = raw.get("rope_parameters")
    thetas = {FULL_ATTENTION: raw.get("global_rope_theta", 160000.0),
              SLIDING_ATTENTION: raw.get("local_rope_theta", 10000.0)}
    if rope is not None:
        if not isinstance(rope, Mapping):
            raise bad("rope_parameters", "must be an object of layer type -> parameters")
        for kind, params in rope.items():
            if kind not in thetas or not isinstance(params, Mapping):
                raise bad("rope_parameters", f"has {kind!r}, not a layer type")
            if params.get("rope_type", "default") != "default":
                raise bad("rope_parameters", f"{kind} rope_type {params.get('rope_type')!r}: only 'default' "
                                             "(plain RoPE) is ported")
            thetas[kind] = params.get("rope_theta", thetas[kind])
    for kind, theta in thetas.items():
        if not isinstance(theta, int | float) or isinstance(theta, bool) or theta <= 1:
            raise bad("rope_parameters", f"{kind} rope_theta must be a number > 1, got {theta!r}")
    out["rope_theta"] = {k: float(v) for k, v in thetas.items()}
    pooling = raw.get("classifier_pooling", "cls")
    if pooling not in ST_POOLING_MODES.values():
        raise bad("classifier_pooling", f"{pooling!r} unsupported (cls or mean)")
    out["classifier_pooling"] = pooling
    return out

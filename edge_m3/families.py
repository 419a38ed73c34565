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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_m3.contract import HEADS, SENTENCEPIECE, WORDPIECE, WORDPIECE_VOCAB, XLMR_SENTENCEPIECE
from edge_m3.errors import EdgeM3Error

# How position ids are made from the input ids (read by edge_m3.modeling):
# XLM-R counts real tokens from pad_token_id + 1 and gives <pad> the row pad_token_id;
# BERT uses rows 0..L-1 whatever the ids.
AFTER_PADDING, ABSOLUTE = "after-padding", "absolute"

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
OUTPUTS = (M3, SENTENCE_TRANSFORMERS)  # the first whose markers are all present wins
# The reference implementations `verify` can run, by Outputs.reference.
REFERENCES = {"flagembedding": "FlagEmbedding's BGEM3FlagModel",
              "sentence-transformers": "sentence-transformers' SentenceTransformer.encode"}


@dataclass(frozen=True)
class Family:
    """One encoder architecture: everything edge-m3 does differently for it."""

    name: str
    model_types: tuple[str, ...]  # config.json `model_type` values it handles
    about: str
    weight_prefixes: tuple[str, ...]  # stored names may carry one of these before `embeddings.`
    activations: tuple[str, ...]  # config.json `hidden_act` values the Keras layers implement
    positions: str  # AFTER_PADDING or ABSOLUTE
    tokenizer_kind: str  # contract.TOKENIZER_KINDS
    tokenizer_files: tuple[str, ...]  # the checkpoint files the tokenizer is read from (any one)
    outputs: tuple[Outputs, ...]  # the output layouts it supports
    keras_name: str  # the Keras model's name (the scope of every op in the exported graphs)

    def max_seq_len(self, config: Any) -> int:
        """Longest input, specials included, that the position table allows."""
        if self.positions == AFTER_PADDING:
            return int(config.max_position_embeddings) - int(config.pad_token_id) - 1
        return int(config.max_position_embeddings)

    def position_rows(self, config: Any, seq_lens: Sequence[int]) -> int:
        """Position rows the fixed lengths can reach (the rest is never read and is cut):
        XLM-R counts from pad_token_id + 1 (BGE-M3 at 512: 514 of its 8,194 rows)."""
        start = int(config.pad_token_id) + 1 if self.positions == AFTER_PADDING else 0
        return min(int(config.max_position_embeddings), max(seq_lens) + start)

    def check_config(self, config: Any, where: str) -> None:
        """The family's own rules on config.json's values (one line naming the key)."""
        if config.hidden_act not in self.activations:
            raise EdgeM3Error(f"{where}: 'hidden_act' {config.hidden_act!r} unsupported ({self.name} "
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
    """The checkpoint's output layout, from the files it holds; one line when none fits."""
    for layout in OUTPUTS:
        if all((folder / f).is_file() for f in layout.marker):
            if layout not in family.outputs:
                raise EdgeM3Error(f"{folder}: a {family.name} checkpoint in the {layout.name} layout "
                                  f"is not supported (supported: "
                                  f"{', '.join(o.name for o in family.outputs)})")
            return layout
    if len(family.outputs) == 1:  # its reader names the file that is missing
        return family.outputs[0]
    wanted = " or ".join(f"{' + '.join(o.marker)} ({o.name})" for o in family.outputs)
    raise EdgeM3Error(f"{folder}: no output layout: needs {wanted}")


def _read_json(path: Path) -> Any:
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
    modules = _read_json(modules_path)
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
    cfg = _read_json(pool_path)
    if not isinstance(cfg, Mapping):
        raise EdgeM3Error(f"{pool_path}: expected a JSON object")
    on = [k for k, v in cfg.items() if k.startswith("pooling_mode_") and v is True]
    if len(on) != 1 or on[0] not in ST_POOLING_MODES:
        raise EdgeM3Error(f"{pool_path}: pooling {on or 'none'} unsupported (one of "
                          f"{', '.join(ST_POOLING_MODES)})")
    max_len: int | None = None
    st_config = folder / ST_CONFIG
    if st_config.is_file():
        value = _read_json(st_config)
        raw = value.get("max_seq_length") if isinstance(value, Mapping) else None
        if raw is not None and (not isinstance(raw, int) or isinstance(raw, bool) or raw < 2):
            raise EdgeM3Error(f"{st_config}: 'max_seq_length' must be an integer of at least 2, got {raw!r}")
        max_len = raw
    return SentenceTransformersLayout(Pooling(ST_POOLING_MODES[on[0]], len(rest) == 2), max_len)


M3_POOLING = Pooling("cls", True)  # BGEM3FlagModel's dense: the normalised <s> row

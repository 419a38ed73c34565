"""Find a checkpoint (hub id or local snapshot) of a known family and load it safely, without torch.

Everything is checked against `config.json` before any weight is materialised: a missing
file, a truncated safetensors file or a tensor of the wrong shape or dtype is reported by file
and tensor name, once. What differs between families (BGE-M3's XLM-R, BERT) is read from
edge_m3.families, by config.json's `model_type`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.checkpoint.safeload import FLOAT_DTYPES, SafetensorsFile, TorchArchive, read_torch_archive
from edge_m3.common.files import sha256_file
from edge_m3.errors import EdgeM3Error, OptionError
from edge_m3.families import (
    M3,
    M3_HEAD_FILES,
    M3_POOLING,
    ST_CONFIG,
    ST_MODULES,
    TRANSFORMERS,
    Family,
    Outputs,
    Pooling,
    family_for,
    outputs_for,
    read_json,
    read_sentence_transformers,
)

# What a download fetches, in this order, of the files the repository has: every family's
# tokenizer files and every output layout's files (a snapshot holds one of each).
HUB_FILES = [
    "config.json", "model.safetensors", "pytorch_model.bin", *M3_HEAD_FILES,
    "sentencepiece.bpe.model", "tokenizer.json", "tokenizer_config.json",
    "special_tokens_map.json", "vocab.txt", ST_MODULES, ST_CONFIG, "1_Pooling/config.json",
]
HEAD_FILES = M3_HEAD_FILES
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")  # first one present wins
TOKENIZER_FILES = ("sentencepiece.bpe.model", "tokenizer.json", "vocab.txt")  # any family's
_INT_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "intermediate_size", "max_position_embeddings", "type_vocab_size", "pad_token_id")
# Upper bounds of config.json's integers: a dimension past int32 fits no TFLite shape nor the
# kits' int32 ids, and a layer count is looped over before any weight is read (issue 38).
_INT_MAX = 2**31 - 1
_MAX_LAYERS = 1024
# Integer fields whose bounds differ from (1, _INT_MAX): (the least value, the largest).
_INT_RULES = {"pad_token_id": (0, _INT_MAX), "num_hidden_layers": (1, _MAX_LAYERS)}
_HINT = "pass a local snapshot directory with {} DIR"  # {}: the option, as the CLI spells it


def _config_int(v: Any, name: str, spelled: str, path: Path) -> int:
    """A ModelConfig integer field by its rule (_INT_RULES: the least value, the largest), or one
    line naming the file and `spelled`, the family's key for it."""
    low, top = _INT_RULES.get(name, (1, _INT_MAX))
    if not isinstance(v, int) or isinstance(v, bool) or v < low:
        kind = "a non-negative" if low == 0 else "a positive"
        raise EdgeM3Error(f"{path}: '{spelled}' must be {kind} integer, got {v!r}")
    if v > top:
        raise EdgeM3Error(f"{path}: '{spelled}' {v} is implausibly large (at most {top})")
    return v


@dataclass(frozen=True)
class ModelConfig:
    """The dimensions of the encoder: every shape in edge-m3 comes from here."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    pad_token_id: int
    hidden_act: str
    model_type: str = "xlm-roberta"
    extra: Mapping[str, Any] = field(default_factory=dict)  # the family's own settings (Family.read_extra)

    @classmethod
    def from_json(cls, path: Path | str) -> ModelConfig:
        """Read and check config.json; the error names the file and the offending key."""
        path = Path(path)
        raw = read_json(path)
        if not isinstance(raw, dict):
            raise EdgeM3Error(f"{path}: expected a JSON object")
        if "model_type" not in raw:
            raise EdgeM3Error(f"{path}: missing key 'model_type'")
        family = family_for(raw["model_type"], str(path))

        def key(name: str) -> str:  # the family's spelling of a ModelConfig field in config.json
            return family.config_names.get(name, name)

        int_keys = [k for k in _INT_KEYS if family.segments or k != "type_vocab_size"]
        for name in (*int_keys, "layer_norm_eps", "hidden_act"):
            if key(name) not in raw:
                raise EdgeM3Error(f"{path}: missing key '{key(name)}'")
        values: dict[str, Any] = {"type_vocab_size": 0}
        values |= {name: _config_int(raw[key(name)], name, key(name), path) for name in int_keys}
        eps = raw[key("layer_norm_eps")]
        if not isinstance(eps, int | float) or isinstance(eps, bool) or not 0 < eps < 1:
            raise EdgeM3Error(f"{path}: '{key('layer_norm_eps')}' must be a small positive number, got {eps!r}")
        if values["hidden_size"] % values["num_attention_heads"]:
            raise EdgeM3Error(f"{path}: 'hidden_size' {values['hidden_size']} is not divisible by "
                              f"'num_attention_heads' {values['num_attention_heads']}")
        if values["pad_token_id"] >= values["vocab_size"]:
            raise EdgeM3Error(f"{path}: 'pad_token_id' {values['pad_token_id']} is outside "
                              f"'vocab_size' {values['vocab_size']}")
        config = cls(layer_norm_eps=float(eps), hidden_act=raw[key("hidden_act")],
                     model_type=raw["model_type"], extra=family.read_extra(raw, str(path)), **values)
        family.check_config(config, str(path))
        return config

    @property
    def family(self) -> Family:
        """The architecture's record (edge_m3.families), by `model_type`."""
        return family_for(self.model_type, "config.json")

    @property
    def max_seq_len(self) -> int:
        """Longest input, specials included, that the family's position scheme allows."""
        return self.family.max_seq_len(self)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every encoder tensor the model needs, with the shape config.json implies (the family's)."""
    return config.family.expected_shapes(config)


class _Tensors(Mapping[str, np.ndarray]):
    """Encoder tensors (lazy, `roberta.` prefix stripped) plus the two small heads."""

    def __init__(self, encoder: Mapping[str, np.ndarray], rename: dict[str, str],
                 heads: dict[str, np.ndarray]) -> None:
        self._encoder, self._rename, self._heads = encoder, rename, heads

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self._heads:
            return self._heads[name]
        return self._encoder[self._rename[name]]

    def __iter__(self) -> Iterator[str]:
        yield from self._rename
        yield from self._heads

    def __len__(self) -> int:
        return len(self._rename) + len(self._heads)

    def __contains__(self, name: object) -> bool:
        return name in self._heads or name in self._rename


@dataclass
class Checkpoint:
    """A validated checkpoint: config, lazily read tensors, tokenizer file, output layout,
    provenance."""

    path: Path
    config: ModelConfig
    tensors: Mapping[str, np.ndarray]
    tokenizer_path: Path  # the file the family's tokenizer is read from
    source: dict[str, Any] = field(default_factory=dict)
    outputs: Outputs = M3
    pooling: Pooling = M3_POOLING
    max_seq_length: int | None = None  # the checkpoint's own bound (sentence-transformers'), if any

    @property
    def family(self) -> Family:
        return self.config.family

    @property
    def colbert_dim(self) -> int:
        """Output width of the ColBERT head (equals hidden_size for BGE-M3; 0 without one)."""
        if "colbert_linear.weight" not in self.tensors:
            return 0
        return int(self.tensors["colbert_linear.weight"].shape[0])

    @property
    def default_max_length(self) -> int:
        """The longest input the checkpoint is meant for: its own bound, else the family's."""
        return min(self.config.max_seq_len, self.max_seq_length or self.config.max_seq_len)


# --- locating the snapshot -------------------------------------------------------------------

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def resolve_checkpoint(spec: str, revision: str | None = None,
                       field: str = "checkpoint") -> tuple[Path, dict[str, Any]]:
    """A local snapshot directory, or a hub id downloaded (only the needed files) to the cache.

    `field` is the option the user gave it as (build's checkpoint, verify's and bench's
    reference): the one-line errors name it.
    """
    path = Path(spec).expanduser()
    if path.is_dir():
        return path, {"id": str(spec), "revision": revision}
    if path.exists():
        raise OptionError(field, spec, "not a directory (pass the snapshot directory)")
    if not _HUB_ID.match(spec) or spec.startswith(".") or ".." in spec or spec.endswith(".git"):
        raise OptionError(field, spec, "no such directory")
    return _download(spec, revision, field)


def _head_gap(has: Any) -> str | None:
    """The BGE-M3 head file a snapshot lacks when it holds only part of them (None otherwise:
    both heads, or none, as in a sentence-transformers or plain transformers snapshot, whose
    family the loader then checks against config.json)."""
    missing = [f for f in M3_HEAD_FILES if not has(f)]
    return missing[0] if 0 < len(missing) < len(M3_HEAD_FILES) else None


def _has_layout(folder: Path) -> bool:
    """config.json, weights, a tokenizer file and no half of BGE-M3's heads."""
    def has(f: str) -> bool:
        return (folder / f).is_file()

    return has("config.json") and any(map(has, WEIGHT_FILES)) and any(map(has, TOKENIZER_FILES)) \
        and _head_gap(has) is None


def _lacking(files: set[str]) -> str | None:
    """The first file a repository lacks for any layout edge-m3 builds (None: it has one)."""
    if "config.json" not in files:
        return "config.json"
    if not any(f in files for f in WEIGHT_FILES):
        return "model.safetensors"
    if not any(f in files for f in TOKENIZER_FILES):
        return " or ".join(TOKENIZER_FILES)
    return _head_gap(files.__contains__)


def _download(repo_id: str, revision: str | None,
              field: str = "checkpoint") -> tuple[Path, dict[str, Any]]:
    """snapshot_download with safetensors preferred; any failure is one line with the hint to
    pass a directory as the option `field`."""
    # Read by huggingface_hub at import time; only effective if it is not imported yet.
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "10")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "30")
    try:
        from huggingface_hub import HfApi, snapshot_download
    except ImportError:
        raise _hub_error(f"cannot download '{repo_id}': huggingface_hub is not installed", field) from None
    local: Path | None = None
    for skip in WEIGHT_FILES[::-1]:  # already cached (either weights file): no network at all
        try:
            # Patterns name only what a download below fetches: newer huggingface_hub refuses a
            # cached snapshot that lacks a file the patterns match in the repository.
            cached = Path(snapshot_download(repo_id, revision=revision, local_files_only=True,
                                            allow_patterns=[f for f in HUB_FILES if f != skip]))
        except Exception:
            continue
        if _has_layout(cached):
            local = cached
            break
    if local is None:
        try:
            _probe_hub()
            info = HfApi().model_info(repo_id, revision=revision, timeout=15)
            files = {s.rfilename for s in info.siblings or []}
            lacking = _lacking(files)
            if lacking:
                raise _hub_error(f"'{repo_id}' is not in the BGE-M3 or sentence-transformers layout "
                                 f"(no {lacking} in the repository)", field)
            skip = {"pytorch_model.bin"} if "model.safetensors" in files else set()  # no 2 GB pickle
            wanted = [f for f in HUB_FILES if f in files and f not in skip]
            local = Path(snapshot_download(repo_id, revision=revision, allow_patterns=wanted,
                                           etag_timeout=10))
        except EdgeM3Error:
            raise
        except Exception as exc:
            raise _hub_error(f"cannot download '{repo_id}' from the Hugging Face hub "
                             f"({_reason(exc, revision)})", field) from None
    commit = local.name if re.fullmatch(r"[0-9a-f]{40}", local.name) else revision
    return local, {"id": repo_id, "revision": commit}


def _hub_error(what: str, field: str) -> OptionError:
    """`what` went wrong, and the hint to pass a snapshot directory as the option `field`."""
    escaped = what.replace("{", "{{").replace("}", "}}")
    return OptionError(None, None, f"{escaped}; {_HINT}", mentions=(field,))


def _reason(exc: BaseException, revision: str | None) -> str:
    """A short, one-line reason for a huggingface_hub failure (its messages span lines)."""
    kind = type(exc).__name__
    known = {
        "RepositoryNotFoundError": "repository not found, or private without a token",
        "GatedRepoError": "gated repository: accept its terms and log in with `hf auth login`",
        "RevisionNotFoundError": f"revision {revision!r} not found",
        "OfflineModeIsEnabled": "HF_HUB_OFFLINE is set",
        "LocalEntryNotFoundError": "not in the local cache and the hub is unreachable",
    }
    if kind in known:
        return known[kind]
    text = " ".join(str(exc).split())
    return (text[:160] + ("..." if len(text) > 160 else "")) or kind


def _probe_hub(timeout: float = 5.0) -> None:
    """One quick TCP connect, so an offline machine fails in seconds instead of after retries."""
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "0").strip().lower() in ("1", "true", "yes", "on"):
        raise ConnectionError("HF_HUB_OFFLINE is set")
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return  # the proxy decides what is reachable; let the hub client try
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=timeout).close()
    except OSError as exc:
        raise ConnectionError(f"{url.hostname} unreachable: {exc.strerror or exc}") from None


# --- validating and opening ------------------------------------------------------------------

def _load_heads(path: Path, hidden: int) -> dict[str, np.ndarray]:
    """The ColBERT [D, H] and sparse [1, H] heads from their torch.save files (restricted)."""
    heads: dict[str, np.ndarray] = {}
    for fname in HEAD_FILES:
        fpath = path / fname
        if not fpath.is_file():
            raise EdgeM3Error(f"{fpath}: missing (BGE-M3's {fname.split('_')[0]} head)")
        sd = read_torch_archive(fpath)
        prefix = fname[: -len(".pt")]
        for key in ("weight", "bias"):
            if key not in sd:
                raise EdgeM3Error(f"{fpath}: tensor '{key}' missing")
            if not np.issubdtype(sd[key].dtype, np.floating):
                raise EdgeM3Error(f"{fpath}: tensor '{key}' has dtype {sd[key].dtype}, "
                                  "expected a float type")
            heads[f"{prefix}.{key}"] = np.asarray(sd[key], dtype=np.float32)
    cw, cb = heads["colbert_linear.weight"], heads["colbert_linear.bias"]
    cfile, sfile = path / "colbert_linear.pt", path / "sparse_linear.pt"
    if cw.ndim != 2 or cw.shape[0] < 1 or cw.shape[1] != hidden:
        raise EdgeM3Error(f"{cfile}: tensor 'weight' has shape {cw.shape}, expected "
                          f"(D, {hidden}) from config.json")
    if cb.shape != (cw.shape[0],):
        raise EdgeM3Error(f"{cfile}: tensor 'bias' has shape {cb.shape}, expected ({cw.shape[0]},)")
    if heads["sparse_linear.weight"].shape != (1, hidden):
        raise EdgeM3Error(f"{sfile}: tensor 'weight' has shape {heads['sparse_linear.weight'].shape}, "
                          f"expected (1, {hidden}) from config.json")
    if heads["sparse_linear.bias"].shape != (1,):
        raise EdgeM3Error(f"{sfile}: tensor 'bias' has shape {heads['sparse_linear.bias'].shape}, "
                          "expected (1,)")
    return heads


def checkpoint_outputs(path: Path) -> Outputs:
    """A snapshot's output layout from its config.json and files alone (no weight read)."""
    config = ModelConfig.from_json(Path(path) / "config.json")
    return outputs_for(config.family, Path(path))


def load_checkpoint(path: Path | str, source: dict[str, Any] | None = None) -> Checkpoint:
    """Validate a snapshot of a known family (headers and shapes only) and open its weights lazily."""
    path = Path(path)
    if not path.is_dir():
        raise OptionError("checkpoint", path, "no such directory")
    config = ModelConfig.from_json(path / "config.json")
    family = config.family
    tokenizer = next((path / f for f in family.tokenizer_files if (path / f).is_file()), None)
    if tokenizer is None:
        names = " or ".join(family.tokenizer_files)
        raise EdgeM3Error(f"{path / family.tokenizer_files[0]}: missing (the {family.name} tokenizer "
                          f"the bundle ships{'' if len(family.tokenizer_files) == 1 else ': ' + names})")
    outputs = outputs_for(family, path)
    weights_file, encoder, rename = _open_encoder(path, config)
    heads, pooling, max_len, output_files = _read_outputs(path, config, outputs)
    used = ["config.json", weights_file.name, *output_files, tokenizer.name]
    info = dict(source or {"id": str(path), "revision": None})
    info["files"] = {name: sha256_file(path / name) for name in used}
    return Checkpoint(path=path, config=config, tensors=_Tensors(encoder, rename, heads),
                      tokenizer_path=tokenizer, source=info, outputs=outputs, pooling=pooling,
                      max_seq_length=max_len)


def _open_encoder(path: Path, config: ModelConfig
                  ) -> tuple[Path, SafetensorsFile | TorchArchive, dict[str, str]]:
    """The weights file, opened lazily, and each expected tensor's stored name, every one checked
    for presence, shape and a float dtype against config.json."""
    weights_file = next((path / f for f in WEIGHT_FILES if (path / f).is_file()), None)
    if weights_file is None:
        raise EdgeM3Error(f"{path}: no model.safetensors or pytorch_model.bin")
    encoder: SafetensorsFile | TorchArchive = (
        SafetensorsFile(weights_file) if weights_file.suffix == ".safetensors"
        else TorchArchive(weights_file))
    rename: dict[str, str] = {}
    prefixes = config.family.weight_prefixes
    for name, want in expected_shapes(config).items():
        stored = next((k for k in (name, *(p + name for p in prefixes)) if k in encoder), None)
        if stored is None:
            raise EdgeM3Error(f"{weights_file}: tensor '{name}' missing")
        got = encoder.shape(stored)
        if got != want:
            raise EdgeM3Error(f"{weights_file}: tensor '{name}' has shape {got}, expected "
                              f"{want} from config.json")
        if encoder.dtype(stored) not in FLOAT_DTYPES:
            raise EdgeM3Error(f"{weights_file}: tensor '{name}' has dtype {encoder.dtype(stored)}, "
                              "expected float32, float16 or bfloat16")
        rename[name] = stored
    return weights_file, encoder, rename


def _read_outputs(path: Path, config: ModelConfig, outputs: Outputs
                  ) -> tuple[dict[str, np.ndarray], Pooling, int | None, list[str]]:
    """The output layout's heads, pooling and max length, and the files it read (their sha256
    goes into the source record)."""
    if outputs is M3:
        return _load_heads(path, config.hidden_size), M3_POOLING, None, list(HEAD_FILES)
    if outputs is TRANSFORMERS:
        return {}, Pooling(config.extra["classifier_pooling"], False), None, []
    st = read_sentence_transformers(path)
    return {}, st.pooling, st.max_seq_length, [f for f in (ST_MODULES, ST_CONFIG) if (path / f).is_file()]

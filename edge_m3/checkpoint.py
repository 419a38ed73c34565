"""Find a BGE-M3 checkpoint (hub id or local snapshot) and load it safely, without torch.

Everything is checked against `config.json` before any weight is materialised: a missing
file, a truncated safetensors file or a tensor of the wrong shape is reported by file and
tensor name, once.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.bundle import sha256_file
from edge_m3.errors import EdgeM3Error
from edge_m3.safeload import SafetensorsFile, check_safetensors_complete, read_torch_archive

HUB_FILES = [
    "config.json", "model.safetensors", "pytorch_model.bin", "colbert_linear.pt",
    "sparse_linear.pt", "sentencepiece.bpe.model", "tokenizer.json", "tokenizer_config.json",
    "special_tokens_map.json",
]
HEAD_FILES = ("colbert_linear.pt", "sparse_linear.pt")
_INT_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "intermediate_size", "max_position_embeddings", "type_vocab_size", "pad_token_id")


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

    @classmethod
    def from_json(cls, path: Path) -> ModelConfig:
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise EdgeM3Error(f"{path}: missing") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise EdgeM3Error(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(raw, dict):
            raise EdgeM3Error(f"{path}: expected a JSON object")
        values: dict[str, Any] = {}
        for key in _INT_KEYS:
            if key not in raw:
                raise EdgeM3Error(f"{path}: missing key '{key}'")
            v = raw[key]
            if not isinstance(v, int) or isinstance(v, bool) or v < (0 if key == "pad_token_id" else 1):
                raise EdgeM3Error(f"{path}: '{key}' must be a positive integer, got {v!r}")
            values[key] = v
        eps = raw.get("layer_norm_eps", 1e-5)
        if not isinstance(eps, int | float) or not 0 < eps < 1:
            raise EdgeM3Error(f"{path}: 'layer_norm_eps' must be a small positive number")
        act = raw.get("hidden_act", "gelu")
        if act != "gelu":
            raise EdgeM3Error(f"{path}: hidden_act '{act}' unsupported (XLM-R uses exact 'gelu')")
        if values["hidden_size"] % values["num_attention_heads"]:
            raise EdgeM3Error(f"{path}: hidden_size {values['hidden_size']} is not divisible by "
                              f"num_attention_heads {values['num_attention_heads']}")
        if values["max_position_embeddings"] <= values["pad_token_id"] + 2:
            raise EdgeM3Error(f"{path}: max_position_embeddings too small")
        return cls(layer_norm_eps=float(eps), hidden_act=act, **values)

    @property
    def max_seq_len(self) -> int:
        """Longest input, `<s>` and `</s>` included: positions start after padding_idx."""
        return self.max_position_embeddings - self.pad_token_id - 1

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every encoder tensor the model needs, with the shape config.json implies."""
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


@dataclass
class Checkpoint:
    """A validated checkpoint: config, lazily read tensors, tokenizer model, provenance."""

    path: Path
    config: ModelConfig
    tensors: Mapping[str, np.ndarray]
    sentencepiece_path: Path
    source: dict[str, Any] = field(default_factory=dict)

    @property
    def colbert_dim(self) -> int:
        return int(self.tensors["colbert_linear.weight"].shape[0])


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def resolve_checkpoint(spec: str, revision: str | None = None) -> tuple[Path, dict[str, Any]]:
    """A local snapshot directory, or a hub id downloaded (only the needed files) to the cache."""
    path = Path(spec).expanduser()
    if path.is_dir():
        return path, {"id": str(spec), "revision": revision}
    if not _HUB_ID.match(spec) or spec.startswith("."):
        raise EdgeM3Error(f"--checkpoint {spec}: no such directory")
    return _download(spec, revision)


def _download(repo_id: str, revision: str | None) -> tuple[Path, dict[str, Any]]:
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "10")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "30")
    try:
        from huggingface_hub import HfApi, snapshot_download
    except ImportError as exc:
        raise EdgeM3Error(f"--checkpoint {repo_id}: huggingface_hub is not installed") from exc
    hint = "pass a local snapshot directory with --checkpoint DIR"
    try:
        try:  # already cached: no network at all
            local = snapshot_download(repo_id, revision=revision, allow_patterns=HUB_FILES,
                                      local_files_only=True)
        except Exception:
            _probe_hub()
            files = set(HfApi().list_repo_files(repo_id, revision=revision))
            wanted = [f for f in HUB_FILES if f in files]
            if "model.safetensors" in files:  # prefer safetensors: skip the pickle
                wanted = [f for f in wanted if f != "pytorch_model.bin"]
            local = snapshot_download(repo_id, revision=revision, allow_patterns=wanted)
    except Exception as exc:
        reason = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise EdgeM3Error(f"cannot download '{repo_id}' from the Hugging Face hub ({reason}); "
                          f"{hint}") from None
    local_path = Path(local)
    return local_path, {"id": repo_id, "revision": local_path.name if revision is None
                        else revision}


def _probe_hub(timeout: float = 5.0) -> None:
    """One quick TCP connect, so an offline machine fails in seconds instead of after retries."""
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        raise ConnectionError("HF_HUB_OFFLINE is set")
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=timeout).close()
    except OSError as exc:
        raise ConnectionError(f"{url.hostname} unreachable: {exc.strerror or exc}") from None


def _load_heads(path: Path, hidden: int) -> dict[str, np.ndarray]:
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
            heads[f"{prefix}.{key}"] = np.asarray(sd[key], dtype=np.float32)
    cw, cb = heads["colbert_linear.weight"], heads["colbert_linear.bias"]
    if cw.ndim != 2 or cw.shape[1] != hidden or cb.shape != (cw.shape[0],):
        raise EdgeM3Error(f"{path / 'colbert_linear.pt'}: tensor 'weight' has shape "
                          f"{cw.shape}, expected (D, {hidden}) from config.json")
    if heads["sparse_linear.weight"].shape != (1, hidden):
        raise EdgeM3Error(f"{path / 'sparse_linear.pt'}: tensor 'weight' has shape "
                          f"{heads['sparse_linear.weight'].shape}, expected (1, {hidden}) "
                          "from config.json")
    if heads["sparse_linear.bias"].shape != (1,):
        raise EdgeM3Error(f"{path / 'sparse_linear.pt'}: tensor 'bias' has shape "
                          f"{heads['sparse_linear.bias'].shape}, expected (1,)")
    return heads


def load_checkpoint(path: Path | str, source: dict[str, Any] | None = None) -> Checkpoint:
    """Validate a BGE-M3-layout directory and open its weights lazily."""
    path = Path(path)
    if not path.is_dir():
        raise EdgeM3Error(f"--checkpoint {path}: no such directory")
    config = ModelConfig.from_json(path / "config.json")
    sp = path / "sentencepiece.bpe.model"
    if not sp.is_file():
        raise EdgeM3Error(f"{sp}: missing (the SentencePiece model the bundle ships)")
    st, binf = path / "model.safetensors", path / "pytorch_model.bin"
    if st.is_file():
        weights_file = st
        check_safetensors_complete(st)
        encoder: Mapping[str, np.ndarray] = SafetensorsFile(st)

        def shape_of(name: str) -> tuple[int, ...]:
            return encoder.shape(name)  # type: ignore[attr-defined]
    elif binf.is_file():
        weights_file = binf
        encoder = read_torch_archive(binf)

        def shape_of(name: str) -> tuple[int, ...]:
            return tuple(encoder[name].shape)
    else:
        raise EdgeM3Error(f"{path}: no model.safetensors or pytorch_model.bin")
    rename: dict[str, str] = {}
    for name, want in expected_shapes(config).items():
        stored = next((k for k in (name, "roberta." + name) if k in encoder), None)
        if stored is None:
            raise EdgeM3Error(f"{weights_file}: tensor '{name}' missing")
        got = shape_of(stored)
        if got != want:
            raise EdgeM3Error(f"{weights_file}: tensor '{name}' has shape {got}, expected "
                              f"{want} from config.json")
        rename[name] = stored
    heads = _load_heads(path, config.hidden_size)
    used = ["config.json", weights_file.name, *HEAD_FILES, sp.name]
    info = dict(source or {"id": str(path), "revision": None})
    info["files"] = {name: sha256_file(path / name) for name in used}
    return Checkpoint(path=path, config=config, tensors=_Tensors(encoder, rename, heads),
                      sentencepiece_path=sp, source=info)

"""The references a bundle is verified against, computed in child processes and cached.

FlagEmbedding's BGEM3FlagModel itself (torch fp32) when installed, the primary one; and always
the fp32 Keras model the bundle was converted from, so a failure can be placed (conversion or
quantization vs. the re-implementation). Reference outputs depend only on the checkpoint,
texts, length and reference code, so they are cached: verifying the fp32, fp16 and int8
variants of one checkpoint computes them once.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from edge_m3.common.files import copy_atomic
from edge_m3.errors import EdgeM3Error
from edge_m3.harness.workers import load_outputs, run_workers, worker

REFERENCE_NAMES = {"flag": "flagembedding", "st": "sentence-transformers", "hf": "transformers",
                   "keras": "keras"}
# The worker step of each primary reference (edge_m3.families: Outputs.reference), and the
# distributions whose versions decide its outputs (part of the cache key).
PRIMARY_STEPS = {"flagembedding": "flag", "sentence-transformers": "st", "transformers": "hf"}
REFERENCE_DEPS = {"flag": ("FlagEmbedding", "torch", "transformers", "tokenizers"),
                  "st": ("sentence-transformers", "torch", "transformers", "tokenizers"),
                  "hf": ("torch", "transformers", "tokenizers")}
# The code that decides the Keras reference's outputs: every .py file of these modules and
# packages is part of its cache key (by module name, so a move cannot silently drop one).
KERAS_REFERENCE_CODE = ("edge_m3.spec", "edge_m3.families", "edge_m3.checkpoint", "edge_m3.modeling",
                        "edge_m3.tokenizer", "edge_m3.runtime.postprocess",
                        "edge_m3.harness.workers")


def reference_sources() -> list[Path]:
    """The source files behind KERAS_REFERENCE_CODE; a name that no longer resolves is an error."""
    files: list[Path] = []
    for name in KERAS_REFERENCE_CODE:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"reference cache key: module {name} not found")
        origin = Path(spec.origin)
        files += sorted(origin.parent.rglob("*.py")) if origin.name == "__init__.py" else [origin]
    return files


def flagembedding_installed() -> bool:
    return importlib.util.find_spec("FlagEmbedding") is not None


def reference_installed(step: str) -> bool:
    """Whether the primary reference of worker step `step` can be run here."""
    if step == "flag":
        return flagembedding_installed()
    module = "sentence_transformers" if step == "st" else "transformers"
    return importlib.util.find_spec(module) is not None


# --------------------------------------------------------------------------- reference cache


def default_cache_dir() -> Path:
    return Path(os.environ.get("EDGE_M3_CACHE") or Path.home() / ".cache" / "edge-m3")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "-"


def reference_key(kind: str, checkpoint_dir: Path, texts: Sequence[str], max_length: int,
                  pairs: Mapping[str, Sequence[int]] | None = None) -> str:
    """Checkpoint files (name, size, mtime), texts, length, and the reference's own code."""
    h = hashlib.sha256()
    h.update(json.dumps([kind, list(texts), max_length, pairs]).encode())
    for f in sorted(checkpoint_dir.iterdir()):
        if f.is_file():
            st = f.stat()
            h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns};".encode())
    if kind in REFERENCE_DEPS:
        deps = REFERENCE_DEPS[kind]
    else:
        deps = ("tensorflow-cpu", "tensorflow", "keras", "sentencepiece")
        for path in reference_sources():
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    h.update(json.dumps([_version(d) for d in deps]).encode())
    return f"{kind}-{h.hexdigest()[:20]}"


def _cache_get(cache: Path | None, key: str, dest: Path) -> bool:
    if cache is None:
        return False
    src = cache / "reference" / key
    if not (src.with_suffix(".json").is_file() and src.with_suffix(".npz").is_file()):
        return False
    for ext in (".npz", ".json"):
        copy_atomic(src.with_suffix(ext), dest.with_suffix(ext))
    return True


def _cache_put(cache: Path | None, key: str, src: Path) -> None:
    """Copy in, .npz before .json: the .json's presence marks a complete entry."""
    if cache is None:
        return
    try:
        (cache / "reference").mkdir(parents=True, exist_ok=True)
        for ext in (".npz", ".json"):
            copy_atomic(src.with_suffix(ext), (cache / "reference" / key).with_suffix(ext))
    except OSError:
        pass  # a cache that cannot be written only costs time next run


def compute_references(checkpoint_dir: Path, texts: Sequence[str], max_length: int, work: Path,
                       cache: Path | None, pairs: Mapping[str, Sequence[int]]
                       ) -> dict[str, tuple[list[dict[str, Any]], dict[str, Any]]]:
    """Keras always, the checkpoint's primary reference (FlagEmbedding for BGE-M3's layout,
    sentence-transformers for theirs: edge_m3.families) when installed; the missing ones run
    side by side.

    `pairs` (query and passage indexes) are scored by FlagEmbedding's own functions too.
    """
    from edge_m3.checkpoint.loader import checkpoint_outputs

    primary = PRIMARY_STEPS[checkpoint_outputs(checkpoint_dir).reference]
    kinds = [primary, "keras"] if reference_installed(primary) else ["keras"]
    jobs, cached = [], {}
    for kind in kinds:
        key = reference_key(kind, checkpoint_dir, texts, max_length,
                            dict(pairs) if kind == "flag" else None)
        cached[kind] = _cache_get(cache, key, work / kind)
        if not cached[kind]:
            jobs.append((kind, key))
    errors = run_workers([worker(kind, {"checkpoint": str(checkpoint_dir), "texts": list(texts),
                                        "max_length": max_length, "out": str(work / kind),
                                        **({"pairs": dict(pairs)} if kind == "flag" else {})},
                                 f"reference {REFERENCE_NAMES[kind]}")
                          for kind, _ in jobs], parallel=True)
    for (kind, key), error in zip(jobs, errors, strict=True):
        if error:
            raise EdgeM3Error(error)
        _cache_put(cache, key, work / kind)
    out = {}
    for kind in kinds:
        outs, meta = load_outputs(work / kind)
        meta["cached"] = cached[kind]
        out[REFERENCE_NAMES[kind]] = (outs, meta)
    return out



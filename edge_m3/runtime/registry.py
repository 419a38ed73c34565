"""The runtimes a bundle runs on, each defined once, and where XNNPACK keeps packed weights.

Every question the rest of the code asks about a runtime (what to import, what to install,
which model format it runs, how old a variant's kernels may be for it, which options it takes)
is answered by its `Runtime` entry, so adding a runtime is one entry here plus its runner
(edge_m3.runtime.runners). Nothing here imports a runtime: the CLI and the choice of runtimes
read it before any model is opened.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

from edge_m3.spec import IN_MEMORY_WEIGHT_CACHE, QuantRecipe, weight_cache_name


@dataclass(frozen=True)
class Runtime:
    """One runtime: where it comes from, what it runs, and which of the harness's options apply."""

    name: str
    module: str  # imported to run a model (`attribute` of it holds the Interpreter when set)
    packages: tuple[str, ...]  # distributions that install it; the first is the one to install
    format: str  # the model format it runs (spec.FORMATS)
    # The oldest kernels of a variant it runs correctly: the recipe's bound for this runtime.
    oldest: Callable[[QuantRecipe], str] | None = None
    attribute: str = ""  # tensorflow.lite is an attribute of `tensorflow`, not a module
    on_device: bool = True  # a runtime apps ship (TensorFlow's interpreter is the builder's)
    # Refused before opening a model its kernels are too old for: its interpreter would fail
    # deep inside with a traceback ("Didn't find op for builtin opcode ... version 12").
    refuse_older: bool = False
    weight_cache: bool = False  # takes an XNNPACK weight cache (LiteRT's CompiledModel only)
    # Its Interpreter hands ops to XNNPACK by itself: the self-check counts what it took.
    xnnpack: bool = False
    # verify bounds the model's memory (model_rss_ratio): the TFLite runtimes apps ship, both
    # mapping the file; onnxruntime reads it into its own memory and pre-packs (reported only).
    memory_gated: bool = False
    preference: int = 9  # among its format's runtimes, lower first (golden vectors, advice)

    @property
    def package(self) -> str:
        """The distribution to install for it."""
        return self.packages[0]

    def version(self) -> str | None:
        """Installed version of its package, or None when it is not installed."""
        return installed_version(self)


def _tflite_kernels(r: QuantRecipe) -> str:
    return r.oldest_tflite


def _litert_kernels(r: QuantRecipe) -> str:
    return r.oldest_litert


# In report order: the oldest device runtime first.
RUNTIMES: Mapping[str, Runtime] = {r.name: r for r in (
    Runtime("tflite-runtime", "tflite_runtime.interpreter", ("tflite-runtime",), "tflite",
            _tflite_kernels, refuse_older=True, memory_gated=True, preference=1),
    Runtime("litert", "ai_edge_litert.interpreter", ("ai-edge-litert",), "tflite", _litert_kernels,
            weight_cache=True, xnnpack=True, memory_gated=True, preference=0),
    Runtime("tf", "tensorflow", ("tensorflow-cpu", "tensorflow"), "tflite", _tflite_kernels,
            attribute="lite", on_device=False, preference=2),
    Runtime("onnxruntime", "onnxruntime", ("onnxruntime",), "onnx", preference=0),
)}


def installed_version(runtime: Runtime) -> str | None:
    """The first of its packages that is installed, its version (one place to stub in tests)."""
    for package in runtime.packages:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return None


def available_runtimes() -> list[Runtime]:
    """The runtimes that are installed here, in RUNTIMES order."""
    return [r for r in RUNTIMES.values() if r.version() is not None]


def of_format(fmt: str) -> list[Runtime]:
    """The runtimes that run `fmt` models, preferred first."""
    return sorted((r for r in RUNTIMES.values() if r.format == fmt), key=lambda r: r.preference)


def device_runtimes(fmt: str) -> list[Runtime]:
    """The runtimes apps ship for `fmt` models, in RUNTIMES order (what the build self-checks)."""
    return [r for r in RUNTIMES.values() if r.format == fmt and r.on_device]


@dataclass(frozen=True)
class WeightCache:
    """Where XNNPACK keeps a model's packed weights (the kits' sealed class WeightCache).

    XNNPACK packs a model's weights for its kernels; without a cache each signature's subgraph
    packs its own copy (OFF: LiteRT's Interpreter). With one, the packed weights are keyed by the
    model's buffer, so every signature shares one copy (MEMORY), and a file (`in_file`) lets a
    second start map them instead of packing again (docs/benchmarks.md, "Memory on the device").
    """

    kind: str  # "off", "memory" or "file"
    path: Path | None = None

    OFF: ClassVar[WeightCache]
    MEMORY: ClassVar[WeightCache]

    @staticmethod
    def in_file(path: Path) -> WeightCache:
        """Packed once into `path`, mapped by every later start."""
        return WeightCache("file", Path(path))

    @property
    def xnnpack_path(self) -> str:
        """What XNNPACK's `weight_cache_path` option takes (OFF is no cache: no such option)."""
        if self.kind == "off":
            raise ValueError("WeightCache.OFF has no XNNPACK cache path")
        return str(self.path) if self.path is not None else IN_MEMORY_WEIGHT_CACHE

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": None if self.path is None else str(self.path)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> WeightCache:
        return cls(str(d["kind"]), None if d.get("path") is None else Path(d["path"]))


WeightCache.OFF = WeightCache("off")
WeightCache.MEMORY = WeightCache("memory")


def weight_cache_file(cache_dir: Path, model_sha256: str, runtime: Runtime) -> Path:
    """Where a model's packed weights are kept between runs: one file per model content and
    runtime version, because XNNPACK finds packed weights by buffer index, not by content,
    and would reuse a stale file for a changed model."""
    version = runtime.version() or "unknown"
    return Path(cache_dir) / weight_cache_name(model_sha256, f"{runtime.name}-{version}")

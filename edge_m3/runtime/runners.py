"""Run a bundled model file under the runtimes apps ship: tflite-runtime, LiteRT, TF, ORT.

Each runner takes padded int32 `[1, L]` inputs for one of the fixed lengths and returns the
raw named outputs, exactly what an app's interpreter call returns.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from edge_m3.contract import (
    ATTENTION_MASK,
    IN_MEMORY_WEIGHT_CACHE,
    INPUT_IDS,
    Signature,
    weight_cache_name,
)
from edge_m3.errors import EdgeM3Error

TFLITE_RUNTIMES = ("tflite-runtime", "litert", "tf")
RUNTIMES = (*TFLITE_RUNTIMES, "onnxruntime")
# The module each runtime is imported from (tensorflow.lite is an attribute, not a module).
RUNTIME_MODULES = {
    "tflite-runtime": "tflite_runtime.interpreter",
    "litert": "ai_edge_litert.interpreter",
    "tf": "tensorflow",
    "onnxruntime": "onnxruntime",
}
# The distribution that installs each runtime.
RUNTIME_PACKAGES = {"tflite-runtime": "tflite-runtime", "litert": "ai-edge-litert",
                    "tf": "tensorflow-cpu", "onnxruntime": "onnxruntime"}

# XNNPACK weight cache settings (docs/benchmarks.md, "Memory on the device"). XNNPACK packs a
# model's weights for its kernels; without a cache each signature's subgraph packs its own
# copy. With one, the packed weights are keyed by the model's buffer, so every signature
# shares one copy, and a cache file lets a second start map them instead of packing again.
NO_CACHE = "off"  # LiteRT's Interpreter as before: one packed copy per signature
# Only LiteRT's CompiledModel API takes a cache (CpuOptions.xnnpack_weight_cache_path); the
# Interpreter APIs (LiteRT's, TF's, tflite-runtime's) create XNNPACK with default options.
WEIGHT_CACHE_RUNTIMES = ("litert",)
# Where the ship gate bounds the model's memory (`model_rss_ratio`): the TFLite runtimes apps
# ship, both running the memory-mapped file. TF's interpreter is no device runtime; onnxruntime
# reads the file into its own memory and pre-packs (reported, not gated).
MEMORY_GATED_RUNTIMES = ("litert", "tflite-runtime")


def format_of(runtime: str) -> str:
    """The model format a runtime runs."""
    return "onnx" if runtime == "onnxruntime" else "tflite"


def import_runtime(runtime: str) -> float:
    """Import the runtime's package; returns the seconds it took (load time is then the
    model's, not the import's)."""
    import time

    t0 = time.perf_counter()
    importlib.import_module(RUNTIME_MODULES[runtime])
    if runtime == "litert":
        has_compiled_model()
    return time.perf_counter() - t0


def has_compiled_model() -> bool:
    """Whether the installed LiteRT has CompiledModel with an XNNPACK weight cache option
    (ai-edge-litert 2.3 has; 1.x has the Interpreter only, which open_runner then uses)."""
    import dataclasses

    try:
        from ai_edge_litert.environment import EnvironmentOptions  # noqa: F401 (LiteRTRunner's)
        from ai_edge_litert.options import CpuOptions
    except ImportError:
        return False
    return "xnnpack_weight_cache_path" in {f.name for f in dataclasses.fields(CpuOptions)}


def weight_cache_file(cache_dir: Path, model_sha256: str, runtime: str) -> Path:
    """Where a model's packed weights are kept between runs: one file per model content and
    runtime version, because XNNPACK finds packed weights by buffer index, not by content,
    and would reuse a stale file for a changed model."""
    version = runtime_version(runtime) or "unknown"
    return Path(cache_dir) / weight_cache_name(model_sha256, f"{runtime}-{version}")


class Runner(Protocol):
    """What the harness needs from a runtime: fixed lengths in, raw named outputs out."""

    runtime: str
    seq_lens: list[int]
    weight_cache: str  # what holds the packed weights: off, memory, a file, or none

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> dict[str, np.ndarray]:
        """Run the signature whose length equals `input_ids.shape[1]`."""
        ...


def runtime_version(runtime: str) -> str | None:
    """Installed version of a runtime's package, or None when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(RUNTIME_PACKAGES[runtime])
    except metadata.PackageNotFoundError:
        if runtime == "tf":
            try:
                return metadata.version("tensorflow")
            except metadata.PackageNotFoundError:
                return None
        return None


def available_runtimes() -> list[str]:
    """The runtimes that are installed here, in RUNTIMES order."""
    return [r for r in RUNTIMES if runtime_version(r) is not None]


class TFLiteRunner:
    """One interpreter, one signature runner per fixed length (the file mapped once; XNNPACK,
    where the runtime applies it, packs the weights again for every signature)."""

    def __init__(self, model_path: Path, signatures: Sequence[Signature],
                 runtime: str = "litert", threads: int | None = None) -> None:
        if runtime not in TFLITE_RUNTIMES:
            raise EdgeM3Error(f"--runtime {runtime}: not a TFLite runtime ({', '.join(TFLITE_RUNTIMES)})")
        try:
            mod = importlib.import_module(RUNTIME_MODULES[runtime])
            if runtime == "tf":  # tensorflow.lite is a lazy attribute, not an importable module
                mod = mod.lite
        except ImportError as exc:
            raise EdgeM3Error(f"--runtime {runtime}: not installed (pip install "
                              f"{RUNTIME_PACKAGES[runtime]}; {exc})") from exc
        self.runtime = runtime
        kwargs: dict[str, Any] = {"model_path": str(model_path)}
        if threads:
            kwargs["num_threads"] = int(threads)
        self.interpreter = mod.Interpreter(**kwargs)
        self._names = {s.seq_len: s.name for s in signatures}
        self.seq_lens = sorted(self._names)
        self._runners: dict[int, Any] = {}
        self.weight_cache = NO_CACHE if runtime == "litert" else "none"

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> dict[str, np.ndarray]:
        length = int(input_ids.shape[1])
        if length not in self._names:
            raise EdgeM3Error(f"no signature for length {length} (have {self.seq_lens})")
        runner = self._runners.get(length)
        if runner is None:
            runner = self.interpreter.get_signature_runner(self._names[length])
            self._runners[length] = runner
        out = runner(**{INPUT_IDS: np.ascontiguousarray(input_ids, dtype=np.int32),
                        ATTENTION_MASK: np.ascontiguousarray(attention_mask, dtype=np.int32)})
        return {k: np.array(v) for k, v in out.items()}


class LiteRTRunner:
    """LiteRT's CompiledModel on the CPU (XNNPACK) with a weight cache: the weights every
    signature shares are packed once, into memory or into a file a later start maps."""

    runtime = "litert"

    def __init__(self, model_path: Path, signatures: Sequence[Signature],
                 threads: int | None = None, weight_cache: str | Path = IN_MEMORY_WEIGHT_CACHE) -> None:
        from ai_edge_litert.compiled_model import CompiledModel
        from ai_edge_litert.environment import Environment, EnvironmentOptions
        from ai_edge_litert.hardware_accelerator import HardwareAccelerator
        from ai_edge_litert.options import CpuOptions, Options

        cache = str(weight_cache)
        if cache != IN_MEMORY_WEIGHT_CACHE:
            Path(cache).parent.mkdir(parents=True, exist_ok=True)
        # CPU only: pointing the plugin folders at the model's own folder (no vendor libraries
        # there) keeps LiteRT from trying the NPU compiler plugins its wheel bundles.
        here = str(Path(model_path).resolve().parent)
        env = Environment.create(options=EnvironmentOptions(compiler_plugin_path=here,
                                                            dispatch_library_path=here))
        opts = Options(hardware_accelerators=HardwareAccelerator.CPU,
                       cpu_options=CpuOptions(num_threads=int(threads or 1),
                                              xnnpack_weight_cache_path=cache))
        self.model = CompiledModel.from_file(str(model_path), environment=env, options=opts)
        self.weight_cache = "memory" if cache == IN_MEMORY_WEIGHT_CACHE else cache
        self._names = {s.seq_len: s.name for s in signatures}
        self.seq_lens = sorted(self._names)
        self._io: dict[int, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}

    def _buffers(self, length: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """One signature's input and output buffers, made on its first call and reused."""
        if length not in self._io:
            name = self._names[length]
            sig = self.model.get_signature_list()[name]
            ins = {k: self.model.create_input_buffer_by_name(name, k) for k in sig["inputs"]}
            outs = {k: self.model.create_output_buffer_by_name(name, k) for k in sig["outputs"]}
            self._io[length] = ins, outs, self.model.get_output_tensor_details(name)
        return self._io[length]

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> dict[str, np.ndarray]:
        length = int(input_ids.shape[1])
        if length not in self._names:
            raise EdgeM3Error(f"no signature for length {length} (have {self.seq_lens})")
        ins, outs, details = self._buffers(length)
        ins[INPUT_IDS].write(np.ascontiguousarray(input_ids, dtype=np.int32))
        ins[ATTENTION_MASK].write(np.ascontiguousarray(attention_mask, dtype=np.int32))
        self.model.run_by_name(self._names[length], ins, outs)
        result = {}
        for k, buf in outs.items():
            shape = [int(d) for d in details[k]["shape"]]
            result[k] = buf.read(int(np.prod(shape)), np.dtype(details[k]["dtype"])).reshape(shape)
        return result


class OnnxRunner:
    """onnxruntime session over the bundle's ONNX file (sequence axis: the declared lengths)."""

    def __init__(self, model_path: Path, signatures: Sequence[Signature],
                 threads: int | None = None) -> None:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise EdgeM3Error(f"--runtime onnxruntime: not installed (pip install onnxruntime; "
                              f"{exc})") from exc
        self.runtime = "onnxruntime"
        self.weight_cache = "none"
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = int(threads)
            opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(model_path), opts,
                                            providers=["CPUExecutionProvider"])
        self.seq_lens = sorted(s.seq_len for s in signatures)
        self._outputs = [o.name for o in self.session.get_outputs()]

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> dict[str, np.ndarray]:
        length = int(input_ids.shape[1])
        if length not in self.seq_lens:
            raise EdgeM3Error(f"no signature for length {length} (have {self.seq_lens})")
        feeds = {INPUT_IDS: np.ascontiguousarray(input_ids, dtype=np.int32),
                 ATTENTION_MASK: np.ascontiguousarray(attention_mask, dtype=np.int32)}
        values = self.session.run(self._outputs, feeds)
        return dict(zip(self._outputs, values, strict=True))


def open_runner(model_path: Path, signatures: Sequence[Signature], runtime: str,
                threads: int | None = None, weight_cache: str | Path | None = None) -> Runner:
    """The runner for `runtime` over one model file of a bundle.

    `weight_cache` (LiteRT only; others have no such option and ignore it): None or
    IN_MEMORY_WEIGHT_CACHE packs the weights once per process, a path also keeps them in that file
    for the next start, NO_CACHE is LiteRT's Interpreter (one packed copy per signature).
    """
    if runtime == "onnxruntime":
        return OnnxRunner(model_path, signatures, threads)
    if runtime == "litert" and str(weight_cache) != NO_CACHE and has_compiled_model():
        return LiteRTRunner(model_path, signatures, threads, weight_cache or IN_MEMORY_WEIGHT_CACHE)
    if runtime in TFLITE_RUNTIMES:
        return TFLiteRunner(model_path, signatures, runtime, threads)
    raise EdgeM3Error(f"--runtime {runtime}: unknown (choose from {', '.join(RUNTIMES)})")

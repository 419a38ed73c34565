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

from edge_m3.contract import ATTENTION_MASK, INPUT_IDS, Signature
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


def format_of(runtime: str) -> str:
    """The model format a runtime runs."""
    return "onnx" if runtime == "onnxruntime" else "tflite"


def import_runtime(runtime: str) -> float:
    """Import the runtime's package; returns the seconds it took (load time is then the
    model's, not the import's)."""
    import time

    t0 = time.perf_counter()
    importlib.import_module(RUNTIME_MODULES[runtime])
    return time.perf_counter() - t0


class Runner(Protocol):
    """What the harness needs from a runtime: fixed lengths in, raw named outputs out."""

    runtime: str
    seq_lens: list[int]

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
    """One interpreter, one signature runner per fixed length (weights loaded once)."""

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
                threads: int | None = None) -> Runner:
    """The runner for `runtime` over one model file of a bundle."""
    if runtime == "onnxruntime":
        return OnnxRunner(model_path, signatures, threads)
    if runtime in TFLITE_RUNTIMES:
        return TFLiteRunner(model_path, signatures, runtime, threads)
    raise EdgeM3Error(f"--runtime {runtime}: unknown (choose from {', '.join(RUNTIMES)})")

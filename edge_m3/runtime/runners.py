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

from edge_m3.errors import EdgeM3Error, OptionError
from edge_m3.runtime.native_logs import ort_log_level, quiet_native
from edge_m3.runtime.registry import Runtime, WeightCache
from edge_m3.spec import ATTENTION_MASK, INPUT_IDS, Signature


def import_runtime(runtime: Runtime) -> float:
    """Import the runtime's package; returns the seconds it took (load time is then the
    model's, not the import's)."""
    import time

    t0 = time.perf_counter()
    with quiet_native(runtime.name):
        importlib.import_module(runtime.module)
        if runtime.weight_cache:
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


class Runner(Protocol):
    """What the harness needs from a runtime: fixed lengths in, raw named outputs out."""

    runtime: Runtime
    seq_lens: list[int]
    weight_cache: WeightCache | None  # what holds the packed weights (None: no such option)

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> dict[str, np.ndarray]:
        """Run the signature whose length equals `input_ids.shape[1]`."""
        ...


class TFLiteRunner:
    """One interpreter, one signature runner per fixed length (the file mapped once; XNNPACK,
    where the runtime applies it, packs the weights again for every signature)."""

    def __init__(self, model_path: Path, signatures: Sequence[Signature], runtime: Runtime,
                 threads: int | None = None) -> None:
        if runtime.format != "tflite":
            raise OptionError("runtime", runtime.name, "not a TFLite runtime")
        try:
            mod = importlib.import_module(runtime.module)
            if runtime.attribute:  # tensorflow.lite is a lazy attribute, not an importable module
                mod = getattr(mod, runtime.attribute)
        except ImportError as exc:
            raise OptionError("runtime", runtime.name,
                              f"not installed (pip install {runtime.package}; {exc})") from exc
        self.runtime = runtime
        kwargs: dict[str, Any] = {"model_path": str(model_path)}
        if threads:
            kwargs["num_threads"] = int(threads)
        with quiet_native(runtime.name):  # LiteRT's Interpreter: "Created ... XNNPACK delegate"
            self.interpreter = mod.Interpreter(**kwargs)
        self._names = {s.seq_len: s.name for s in signatures}
        self.seq_lens = sorted(self._names)
        self._runners: dict[int, Any] = {}
        self.weight_cache = WeightCache.OFF if runtime.weight_cache else None

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> dict[str, np.ndarray]:
        length = int(input_ids.shape[1])
        if length not in self._names:
            raise EdgeM3Error(f"no signature for length {length} (have {self.seq_lens})")
        runner = self._runners.get(length)
        if runner is None:
            with quiet_native(self.runtime.name):
                runner = self.interpreter.get_signature_runner(self._names[length])
            self._runners[length] = runner
        out = runner(**{INPUT_IDS: np.ascontiguousarray(input_ids, dtype=np.int32),
                        ATTENTION_MASK: np.ascontiguousarray(attention_mask, dtype=np.int32)})
        return {k: np.array(v) for k, v in out.items()}


class LiteRTRunner:
    """LiteRT's CompiledModel on the CPU (XNNPACK) with a weight cache: the weights every
    signature shares are packed once, into memory or into a file a later start maps."""

    def __init__(self, model_path: Path, signatures: Sequence[Signature], runtime: Runtime,
                 threads: int | None = None, weight_cache: WeightCache = WeightCache.MEMORY) -> None:
        from ai_edge_litert.compiled_model import CompiledModel
        from ai_edge_litert.environment import Environment, EnvironmentOptions
        from ai_edge_litert.hardware_accelerator import HardwareAccelerator
        from ai_edge_litert.options import CpuOptions, Options

        if weight_cache.path is not None:
            weight_cache.path.parent.mkdir(parents=True, exist_ok=True)
        # CPU only: pointing the plugin folders at the model's own folder (no vendor libraries
        # there) keeps LiteRT from trying the NPU compiler plugins its wheel bundles.
        here = str(Path(model_path).resolve().parent)
        self.runtime = runtime
        self._io: dict[int, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}
        with quiet_native(runtime.name):  # a dozen INFO lines about accelerators (native_logs)
            self._env = Environment.create(options=EnvironmentOptions(compiler_plugin_path=here,
                                                                      dispatch_library_path=here))
            opts = Options(hardware_accelerators=HardwareAccelerator.CPU,
                           cpu_options=CpuOptions(num_threads=int(threads or 1),
                                                  xnnpack_weight_cache_path=weight_cache.xnnpack_path))
            self.model = CompiledModel.from_file(str(model_path), environment=self._env, options=opts)
        self.weight_cache: WeightCache | None = weight_cache
        self._names = {s.seq_len: s.name for s in signatures}
        self.seq_lens = sorted(self._names)

    def close(self) -> None:
        """Free the buffers, the model and its environment now, their log lines caught."""
        if getattr(self, "model", None) is None:
            return
        with quiet_native(self.runtime.name):
            self._io.clear()
            self.model = None
            self._env = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: os or the lock may be gone already
            pass

    def _buffers(self, length: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """One signature's input and output buffers, made on its first call and reused."""
        if length not in self._io:
            name = self._names[length]
            sig = self.model.get_signature_list()[name]
            # The first write to a buffer makes LiteRT's own process-wide environment (its log
            # lines): made here, with the zeros every run overwrites, not in the timed run.
            with quiet_native(self.runtime.name):
                ins = {k: self.model.create_input_buffer_by_name(name, k) for k in sig["inputs"]}
                outs = {k: self.model.create_output_buffer_by_name(name, k) for k in sig["outputs"]}
                ins[INPUT_IDS].write(np.zeros((1, length), dtype=np.int32))
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

    def __init__(self, model_path: Path, signatures: Sequence[Signature], runtime: Runtime,
                 threads: int | None = None) -> None:
        try:
            ort = importlib.import_module(runtime.module)
        except ImportError as exc:
            raise OptionError("runtime", runtime.name,
                              f"not installed (pip install {runtime.package}; {exc})") from exc
        self.runtime = runtime
        self.weight_cache = None
        opts = ort.SessionOptions()
        opts.log_severity_level = ort_log_level()  # onnxruntime's own switch (native_logs)
        if threads:
            opts.intra_op_num_threads = int(threads)
            opts.inter_op_num_threads = 1
        with quiet_native(runtime.name):
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


def open_runner(model_path: Path, signatures: Sequence[Signature], runtime: Runtime,
                threads: int | None = None, weight_cache: WeightCache | None = None) -> Runner:
    """The runner for `runtime` over one model file of a bundle.

    `weight_cache` applies where the runtime takes one (LiteRT; others ignore it): None or
    MEMORY packs the weights once per process, a file also keeps them for the next start, OFF is
    LiteRT's Interpreter (one packed copy per signature).
    """
    if runtime.format == "onnx":
        return OnnxRunner(model_path, signatures, runtime, threads)
    if runtime.weight_cache and weight_cache != WeightCache.OFF and has_compiled_model():
        return LiteRTRunner(model_path, signatures, runtime, threads, weight_cache or WeightCache.MEMORY)
    return TFLiteRunner(model_path, signatures, runtime, threads)

"""Memory on the device (issue 17): fp16 tables gathered before they are dequantized, the peak
RSS reset that keeps the tokenizer out of the model's figure, the weight cache's file name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

LENGTHS = (8, 16)


def _fp16_file(tmp: Path) -> bytes:
    """A two-signature fp16 file with the converter's DEQUANTIZE -> GATHER on a 600 x 16 table."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    table = tf.constant(rng.normal(size=(600, 16)).astype(np.float32))
    w = tf.constant(rng.normal(size=(16, 8)).astype(np.float32))

    class Tiny(tf.Module):
        def run(self, ids: tf.Tensor) -> dict[str, tf.Tensor]:
            return {"out": tf.matmul(tf.gather(table, ids)[0], w)}

    m = Tiny()
    sigs = {f"embed_{n}": tf.function(m.run, input_signature=[tf.TensorSpec([1, n], tf.int32)])
            for n in LENGTHS}
    tf.saved_model.save(m, str(tmp / "sm"), signatures=sigs)
    conv = tf.lite.TFLiteConverter.from_saved_model(str(tmp / "sm"), signature_keys=list(sigs))
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.target_spec.supported_types = [tf.float16]
    return conv.convert()


_RUN = r"""
import json, sys, numpy as np
mod = __import__(sys.argv[2], fromlist=["Interpreter"])
it = mod.Interpreter(model_path=sys.argv[1])
out = {}
for name in sorted(it.get_signature_list()):
    n = int(name.split("_")[1])
    ids = (np.arange(n, dtype=np.int32) * 37 % 600)[None]
    out[name] = it.get_signature_runner(name)(ids=ids)["out"].tolist()
print(json.dumps(out))
"""


def _run(path: Path, module: str) -> dict[str, np.ndarray]:
    """Each signature once, in a child (tflite-runtime cannot share a process with TF)."""
    done = subprocess.run([sys.executable, "-c", _RUN, str(path), module], capture_output=True,
                          text=True, check=True)
    return {k: np.asarray(v, np.float32) for k, v in json.loads(done.stdout.splitlines()[-1]).items()}


def _ops(data: bytes) -> list[list[tuple[str, str]]]:
    """Per subgraph: (operator, type of its first input)."""
    from tensorflow.lite.python import schema_py_generated as schema

    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    types = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    model = schema.Model.GetRootAsModel(data, 0)
    out = []
    for g in range(model.SubgraphsLength()):
        graph = model.Subgraphs(g)
        ops = []
        for k in range(graph.OperatorsLength()):
            op = graph.Operators(k)
            code = model.OperatorCodes(op.OpcodeIndex())
            ops.append((names[max(code.BuiltinCode(), code.DeprecatedBuiltinCode())],
                        types[graph.Tensors(op.Inputs(0)).Type()]))
        out.append(ops)
    return out


@pytest.mark.models
def test_fp16_tables_are_gathered_then_dequantized(tmp_path: Path) -> None:
    from edge_m3.common.options import version_tuple
    from edge_m3.export.tflite import BUFFER_ALIGNMENT, audit, gather_half_tables

    raw = _fp16_file(tmp_path)
    assert all(("DEQUANTIZE", "FLOAT16") in ops for ops in _ops(raw))  # the converter's layout
    new, n = gather_half_tables(raw)
    assert n == len(LENGTHS)  # one table per signature's subgraph
    for ops in _ops(new):
        at = ops.index(("GATHER", "INT16"))  # then the gathered rows only are dequantized
        assert ops[at:at + 3] == [("GATHER", "INT16"), ("BITCAST", "INT16"),
                                  ("DEQUANTIZE", "FLOAT16")]
        assert ("GATHER", "FLOAT32") not in ops
    assert gather_half_tables(new) == (new, 0)  # nothing left to rewrite
    (tmp_path / "raw.tflite").write_bytes(raw)
    (tmp_path / "new.tflite").write_bytes(new)
    info = audit(tmp_path / "new.tflite")
    assert info["ops"]["GATHER"] >= 4 and info["ops"]["BITCAST"] == 1
    assert version_tuple(info["min_runtime_version"]) >= (2, 13, 0)

    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.Model.GetRootAsModel(new, 0)
    for i in range(model.BuffersLength()):  # weights stay aligned as the converter wrote them
        buf = model.Buffers(i)
        if buf.DataLength():
            assert buf._tab.Vector(buf._tab.Offset(4)) % BUFFER_ALIGNMENT == 0
    # exact: fp16 -> fp32 is the same conversion before or after the gather
    want = _run(tmp_path / "raw.tflite", "ai_edge_litert.interpreter")
    got = _run(tmp_path / "new.tflite", "ai_edge_litert.interpreter")
    assert all(np.array_equal(got[name], value) for name, value in want.items())
    old = _run(tmp_path / "new.tflite", "tflite_runtime.interpreter")  # 2.14: BITCAST, int16 GATHER
    assert all(np.abs(old[name] - value).max() <= 1e-5 for name, value in want.items())


_PEAK = r"""
import numpy as np
from edge_m3.common.proc import peak_rss, reset_peak_rss
if not reset_peak_rss():
    print("unsupported")
    raise SystemExit(0)
block = np.ones(256 * 2**20, np.uint8)  # 256 MiB touched, then freed
del block
before = peak_rss()
assert reset_peak_rss()
print(before, peak_rss())
"""


def test_reset_peak_rss_forgets_an_earlier_peak() -> None:
    """In a child of its own (one thread, nothing else allocating): the peak read after the reset
    no longer holds the 256 MiB freed before it; the 128 MiB margin is half the block."""
    done = subprocess.run([sys.executable, "-c", _PEAK], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1])
    if done.stdout.strip() == "unsupported":
        pytest.skip("no /proc/self/clear_refs here")
    before, after = map(int, done.stdout.split())
    assert before >= 256 * 2**20 and after < before - 128 * 2**20, (before, after)


def test_weight_cache_file_names_the_model_and_runtime(tmp_path: Path) -> None:
    from edge_m3.runtime.registry import RUNTIMES, weight_cache_file
    from edge_m3.spec import WEIGHT_CACHE_SUFFIX

    litert = RUNTIMES["litert"]
    path = weight_cache_file(tmp_path, "ab" * 32, litert)
    assert path.parent == tmp_path and path.name.startswith("ab" * 8 + "-litert_")
    assert path.name.endswith(WEIGHT_CACHE_SUFFIX) and str(litert.version()) in path.name

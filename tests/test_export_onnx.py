"""ONNX variants from the traced SavedModel: names, shapes, checker, external data, parity."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from edge_m3.checkpoint import load_checkpoint
from edge_m3.errors import EdgeM3Error
from edge_m3.export.onnx import (
    EXTERNAL_DATA_THRESHOLD,
    ROW_INT8_MIN_ELEMENTS,
    SEQ_AXIS,
    SEQ_AXIS_MINUS_1,
    SMOOTHED_PROJECTIONS,
    OnnxCalibration,
    fix_io,
    save,
    signatures,
    smooth_projections,
)
from edge_m3.export.onnx_lift import (
    LIFT_MIN_ELEMENTS,
    is_lifted_weight,
    lift_weights,
    lifted_graph,
    run_tf2onnx,
)
from edge_m3.export.trace import write_saved_model
from edge_m3.export.worker import export_onnx
from edge_m3.modeling import build_model
from edge_m3.runtime import RUNTIMES, OnnxRunner, open_runner
from edge_m3.spec import HEADS, RECIPES, CheckResult, ModelEntry, Signature
from tests.support.spread import OUTPUTS, TOLERANCES, cpu_kind, onnx_bounds, onnx_inputs, onnx_vs_keras

pytestmark = pytest.mark.models  # builds Keras models, bundles or references

LENS = [8, 16, 32]
ORT = RUNTIMES["onnxruntime"]


def _sigs(entry: dict[str, Any]) -> list[Signature]:
    """The typed signatures of an exported entry (what the runners take)."""
    return ModelEntry.from_json(entry, "entry").signatures
QUANTS = ("fp32", "fp16", "int8")
MIN_DENSE_COSINE = TOLERANCES["onnx_dense_cosine_min"]


@pytest.fixture(scope="module")
def keras_model(tiny_ckpt: Path) -> Any:
    return build_model(load_checkpoint(tiny_ckpt))


@pytest.fixture(scope="module")
def saved_model(keras_model: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    saved = tmp_path_factory.mktemp("onnx_saved") / "saved_model"
    write_saved_model(keras_model, LENS, HEADS, saved, dynamic=True)
    return saved


@pytest.fixture(scope="module")
def calibration(tiny_ckpt: Path) -> Any:
    """The golden texts as the build tokenizes calibration texts (int8's ONNX file smooths)."""
    from edge_m3.builder.golden import golden_texts
    from edge_m3.builder.orchestrate import calibration_ids

    return calibration_ids(load_checkpoint(tiny_ckpt), None, golden_texts(), LENS)


@pytest.fixture(scope="module")
def variants(keras_model: Any, saved_model: Path, calibration: Any,
             tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    """All three variants; fp32 is forced to external data, as the full-size fp32 is."""
    saved = saved_model
    out = {}
    for quant in QUANTS:
        folder = tmp_path_factory.mktemp(f"onnx_{quant}")
        threshold = 0 if quant == "fp32" else EXTERNAL_DATA_THRESHOLD
        entry = export_onnx(saved, folder, RECIPES[quant], LENS, list(HEADS),
                            keras_model.parameter_count(), external_threshold=threshold,
                            calibration=calibration if RECIPES[quant].calibrated else None)
        out[quant] = (folder, entry)
    return out


def test_int8_onnx_needs_calibration_texts(saved_model: Path, keras_model: Any, tmp_path: Path) -> None:
    """A calibrated recipe without texts is a plain error, never a file smoothed on nothing."""
    with pytest.raises(RuntimeError, match="needs calibration texts"):
        export_onnx(saved_model, tmp_path, RECIPES["int8"], LENS, list(HEADS),
                    keras_model.parameter_count())


def test_smoothing_is_exact_in_float(saved_model: Path, calibration: Any, tmp_path: Path) -> None:
    """SmoothQuant's Mul by 1/s and weight rows times s leave the float model's outputs as they
    were (to float rounding), put one Mul before each LayerNorm-fed projection, and scale the
    channels by the calibration texts' activations (not all 1)."""
    import onnxruntime as ort

    model = run_tf2onnx(saved_model, tmp_path)
    fix_io(model, HEADS)
    before = model.SerializeToString()
    projections = [n for n in model.graph.node if n.op_type == "MatMul" and any(
        f"/{p}" in n.name for p in SMOOTHED_PROJECTIONS)]
    ids = sorted({tuple(r) for rows in calibration.ids.values() for r in rows})
    assert smooth_projections(model, OnnxCalibration(ids, tmp_path)) == len(projections) > 0
    assert not list(tmp_path.glob("calibration.onnx*"))  # its float copy is gone
    muls = [n for n in model.graph.node if n.op_type == "Mul" and n.name.endswith("/smoothed")]
    assert len(muls) == len(projections)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert all(not np.allclose(inits[m.input[1]], 1.0) for m in muls)
    a = np.asarray([list(ids[-1])], np.int32)
    feed = {"input_ids": a, "attention_mask": np.ones_like(a)}
    cpu = ["CPUExecutionProvider"]
    plain = ort.InferenceSession(before, providers=cpu).run(None, feed)
    smoothed = ort.InferenceSession(model.SerializeToString(), providers=cpu).run(None, feed)
    for x, y in zip(plain, smoothed, strict=True):
        np.testing.assert_allclose(y, x, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("quant", QUANTS)
def test_manifest_entry(variants: dict[str, tuple[Path, dict[str, Any]]], quant: str) -> None:
    folder, entry = variants[quant]
    assert entry["format"] == "onnx" and entry["quant"] == quant
    assert entry["file"] == f"model_{quant}.onnx" and (folder / entry["file"]).is_file()
    assert entry["opset"] == 17
    assert entry["sequence_axis"] == "symbolic, declared lengths only"
    assert entry["oldest_runtime"]["onnxruntime"] == "1.12.0"
    assert CheckResult.parse(entry["self_check"]["onnxruntime"]).ok
    assert "Erfc" not in entry["ops"] and "Erf" in entry["ops"]
    assert [s["name"] for s in entry["signatures"]] == [f"embed_{n}" for n in LENS]
    for sig in entry["signatures"]:
        n = sig["seq_len"]
        assert sig["inputs"] == [{"name": k, "shape": [1, n], "dtype": "int32"}
                                 for k in ("input_ids", "attention_mask")]
        assert [(o["name"], o["shape"], o["dtype"]) for o in sig["outputs"]] == [
            ("dense_vecs", [1, 32], "float32"), ("sparse_weights", [1, n], "float32"),
            ("colbert_vecs", [1, n - 1, 32], "float32")]
    files = sorted(p.name for p in folder.iterdir())
    assert files == sorted([entry["file"], *entry["extra_files"]])
    assert entry["extra_files"] == (["model_fp32.onnx.data"] if quant == "fp32" else [])


@pytest.mark.parametrize("quant", QUANTS)
def test_graph_passes_checker_with_contract_io(
        variants: dict[str, tuple[Path, dict[str, Any]]], quant: str) -> None:
    folder, entry = variants[quant]
    path = folder / entry["file"]
    onnx.checker.check_model(str(path), full_check=True)  # path form: follows external data
    model = onnx.load(str(path), load_external_data=False)
    ops = {n.op_type for n in model.graph.node}
    assert "Erfc" not in ops
    assert {o.domain for o in model.opset_import} == {""}

    def io(vis: Any) -> list[tuple[str, int, list[Any]]]:
        return [(v.name, v.type.tensor_type.elem_type,
                 [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim])
                for v in vis]

    int32, f32 = onnx.TensorProto.INT32, onnx.TensorProto.FLOAT
    assert io(model.graph.input) == [("input_ids", int32, [1, SEQ_AXIS]),
                                     ("attention_mask", int32, [1, SEQ_AXIS])]
    assert io(model.graph.output) == [("dense_vecs", f32, [1, 32]),
                                      ("sparse_weights", f32, [1, SEQ_AXIS]),
                                      ("colbert_vecs", f32, [1, SEQ_AXIS_MINUS_1, 32])]
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["edge_m3.seq_lens"] == "8,16,32" and meta["edge_m3.quant"] == quant
    weights = [t for t in model.graph.initializer if len(t.dims) == 2]
    kinds = {t.data_type for t in weights}
    if quant == "fp16":
        assert kinds == {onnx.TensorProto.FLOAT16}
    if quant == "int8":  # per-row activations, per-column weights: standard ops only
        assert {"MatMulInteger", "ReduceMax", "ReduceMin", "Round"} <= ops
        assert "DynamicQuantizeLinear" not in ops and all(":" not in o for o in ops)
        inits = {t.name: t for t in model.graph.initializer}
        tables = [inits[n.input[0]] for n in model.graph.node
                  if n.op_type == "Gather" and n.input[0] in inits and len(inits[n.input[0]].dims) == 2]
        assert len(tables) == 2 and {t.data_type for t in tables} == {onnx.TensorProto.INT8}
        # MatMul weights: int8 codes stored as uint8 + 128 (u8 x u8 never saturates on AVX2);
        # the last layers stay float
        uint8 = [t for t in weights if t.data_type == onnx.TensorProto.UINT8
                 and np.prod(t.dims) >= ROW_INT8_MIN_ELEMENTS]
        assert uint8 and all(numpy_helper.to_array(t).min() >= 1 for t in uint8)
        mms = [n for n in model.graph.node if n.op_type == "MatMulInteger"]
        assert len(mms) >= len(uint8) and all(n.input[3] == mms[0].input[3] for n in mms)
        assert numpy_helper.to_array(inits[mms[0].input[3]]).tolist() == 128


@pytest.mark.parametrize("quant", QUANTS)
def test_every_length_matches_keras(variants: dict[str, tuple[Path, dict[str, Any]]],
                                    keras_model: Any, quant: str) -> None:
    folder, entry = variants[quant]
    runner = open_runner(folder / entry["file"], _sigs(entry), ORT, 1)
    assert isinstance(runner, OnnxRunner) and runner.seq_lens == LENS
    for sig in entry["signatures"]:  # the declared output shapes
        n = sig["seq_len"]
        ids, mask = onnx_inputs(n, n, seed=n)
        got = runner.run(ids, mask)
        assert [(k, list(v.shape)) for k, v in got.items()] == [
            (o["name"], o["shape"]) for o in sig["outputs"]]
    figures = onnx_vs_keras(runner, keras_model, LENS)
    bounds = onnx_bounds(quant)  # set from measured spread, per kind of CPU (tests/support/spread.py)
    for key in OUTPUTS:
        assert figures[key] <= bounds[key], (quant, cpu_kind(), key, figures)
    assert figures["dense_cosine"] >= MIN_DENSE_COSINE[quant], (quant, figures)


def test_external_data_travels_with_the_model(
        variants: dict[str, tuple[Path, dict[str, Any]]], tmp_path: Path) -> None:
    folder, entry = variants["fp32"]
    data = folder / entry["extra_files"][0]
    model = onnx.load(str(folder / entry["file"]), load_external_data=False)
    big = [t for t in model.graph.initializer
           if t.data_type == onnx.TensorProto.FLOAT and 4 * np.prod(t.dims) >= 1024]
    assert big and all(t.data_location == onnx.TensorProto.EXTERNAL for t in big)
    assert data.stat().st_size >= sum(4 * int(np.prod(t.dims)) for t in big)
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in [entry["file"], *entry["extra_files"]]:
        shutil.copy(folder / name, moved / name)
    ids, mask = onnx_inputs(5, 8, seed=1)
    sigs = _sigs(entry)
    a = OnnxRunner(folder / entry["file"], sigs, ORT).run(ids, mask)
    b = OnnxRunner(moved / entry["file"], sigs, ORT).run(ids, mask)
    for key in OUTPUTS:
        np.testing.assert_array_equal(a[key], b[key])
    (moved / data.name).unlink()
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime raises its own Fail type
        OnnxRunner(moved / entry["file"], sigs, ORT)


def _matmul_model(width: int) -> onnx.ModelProto:
    from onnx import helper, numpy_helper

    weight = np.arange(width * width, dtype=np.float32).reshape(width, width) / width**2
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, width])],
        [numpy_helper.from_array(weight, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("threshold, external", [(0, True), (EXTERNAL_DATA_THRESHOLD, False)])
def test_save_threshold(tmp_path: Path, threshold: int, external: bool) -> None:
    import onnxruntime as ort

    path = tmp_path / "m.onnx"
    (tmp_path / "m.onnx.data").write_bytes(b"stale")  # must be replaced, not appended to
    extra = save(_matmul_model(64), path, threshold)
    assert extra == (["m.onnx.data"] if external else [])
    assert (tmp_path / "m.onnx.data").exists() == external
    if external:
        assert (tmp_path / "m.onnx.data").stat().st_size == 64 * 64 * 4
    onnx.checker.check_model(str(path))
    x = np.ones((1, 64), np.float32)
    y = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(y, x @ (np.arange(64 * 64).reshape(64, 64) / 64**2), rtol=1e-6)


def test_signatures_follow_heads() -> None:
    sigs = signatures([16, 8], ["dense"], {"dense_vecs": 1024})
    assert [s["name"] for s in sigs] == ["embed_8", "embed_16"]
    assert sigs[0]["outputs"] == [{"name": "dense_vecs", "shape": [1, 1024], "dtype": "float32"}]


def test_onnx_runner_rejects_undeclared_length(
        variants: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    folder, entry = variants["int8"]
    runner = OnnxRunner(folder / entry["file"], _sigs(entry), ORT, threads=1)
    assert runner.runtime is ORT and runner.seq_lens == LENS
    ids, mask = onnx_inputs(4, 12, seed=2)  # the graph would run it; the bundle does not declare it
    with pytest.raises(EdgeM3Error, match="no signature for length 12"):
        runner.run(ids, mask)
    out = runner.run(*onnx_inputs(4, 16, seed=3))
    assert {k: v.shape for k, v in out.items()} == {
        "dense_vecs": (1, 32), "sparse_weights": (1, 16), "colbert_vecs": (1, 15, 32)}


def _is_matrix(shape: Any) -> bool:
    return len(shape) >= 2 and int(np.prod(shape)) >= LIFT_MIN_ELEMENTS


def test_graph_for_tf2onnx_holds_no_weights(saved_model: Path, keras_model: Any,
                                            tmp_path: Path) -> None:
    """What tf2onnx converts is weight-free: every matrix is a Placeholder whose value is on
    disk, and only small or 1-D constants (LayerNorm gamma/beta, biases) stay inline."""
    lifted = lifted_graph(saved_model, tmp_path)
    consts = [n for n in lifted.graph_def.node if n.op == "Const"]
    assert consts and not any(is_lifted_weight(n) for n in consts)
    assert max(int(np.prod([d.size for d in n.attr["value"].tensor.tensor_shape.dim]))
               for n in consts) < LIFT_MIN_ELEMENTS
    assert lifted.graph_def.ByteSize() < 1_000_000
    placeholders = {n.name + ":0": n for n in lifted.graph_def.node if n.op == "Placeholder"}
    assert set(placeholders) == {"input_ids:0", "attention_mask:0", *lifted.weights}
    assert sorted(lifted.inputs) == ["attention_mask:0", "input_ids:0"]
    assert sorted(lifted.outputs.values()) == sorted(OUTPUTS)

    values = {name: np.load(path) for name, path in lifted.weights.items()}
    for name, value in values.items():  # each Placeholder declares its weight's dtype and shape
        shape = placeholders[name].attr["shape"].shape
        assert [d.size for d in shape.dim] == list(value.shape) and value.dtype == np.float32
    matrices = [w.numpy() for w in keras_model.weights if _is_matrix(w.shape)]
    inline = sum(int(np.prod(w.shape)) for w in keras_model.weights if not _is_matrix(w.shape))
    assert inline > 0 and len(values) == len(matrices) == 15  # 2 x 6 Dense, 2 tables, ColBERT
    assert (sum(v.size for v in values.values())
            == keras_model.parameter_count() - inline)
    for value in values.values():  # the very values of the Keras variables, bit for bit
        assert any(m.shape == value.shape and np.array_equal(m, value) for m in matrices)


def test_weights_feed_matmul_and_gather_directly(saved_model: Path, tmp_path: Path) -> None:
    """Each restored weight is MatMul's B or Gather's data itself, as in a frozen-graph
    conversion, so the int8 quantizer still finds every MatMul and both tables."""
    model = run_tf2onnx(saved_model, tmp_path)
    graph = model.graph
    assert sorted(vi.name for vi in graph.input) == ["attention_mask", "input_ids"]
    inits = {t.name: t for t in graph.initializer}
    lifted = {name for name, t in inits.items()
              if t.data_type == onnx.TensorProto.FLOAT and _is_matrix(list(t.dims))}
    assert len(lifted) == 15 and not any(name.startswith("unknown") for name in lifted)
    uses = [(n.op_type, i) for n in graph.node for i, x in enumerate(n.input) if x in lifted]
    assert sorted(uses) == [("Gather", 0)] * 2 + [("MatMul", 1)] * 13
    matmuls = [n for n in graph.node if n.op_type == "MatMul" and n.input[1] in inits]
    assert len(matmuls) == 14  # + the sparse head's [32, 1], small enough to stay inline


def test_lift_weights_takes_any_big_float_const(tmp_path: Path) -> None:
    import tensorflow as tf

    big = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [1, 64], name="x")
        y = tf.matmul(x, tf.constant(big, name="w")) + tf.constant(np.ones(32, np.float32))
        tf.identity(y * tf.constant(np.full((2, 2), 3.0, np.float32))[0, 0], name="y")
    graph_def, weights = lift_weights(g.as_graph_def(), tmp_path)
    assert list(weights) == ["w:0"]
    np.testing.assert_array_equal(np.load(weights["w:0"]), big)
    nodes = {n.name: n for n in graph_def.node}
    assert nodes["w"].op == "Placeholder" and "value" not in nodes["w"].attr
    assert [d.size for d in nodes["w"].attr["shape"].shape.dim] == [64, 32]
    assert sum(n.op == "Const" for n in graph_def.node) >= 2  # bias and the 2 x 2 stay


def test_ort_copy_runs_like_the_onnx_file(saved_model: Path, keras_model: Any,
                                          tmp_path: Path) -> None:
    """`--ort`: an ORT-format copy with its operator config; same outputs, fp16 kept half-size."""
    entry = export_onnx(saved_model, tmp_path, RECIPES["fp16"], LENS, list(HEADS),
                        keras_model.parameter_count(), ort=True)
    ort_entry = entry["ort"]
    onnx_file, ort_file = tmp_path / entry["file"], tmp_path / ort_entry["file"]
    assert ort_file.suffix == ".ort" and CheckResult.parse(ort_entry["self_check"]["onnxruntime"]).ok
    # Constant folding off: folding the fp16 weights' Casts stores them in fp32 again, which
    # adds 2 bytes per parameter over our copy.
    import onnxruntime as ort

    folded = tmp_path / "folded.ort"
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.optimized_model_filepath = str(folded)
    opts.add_session_config_entry("session.save_model_format", "ORT")
    ort.InferenceSession(str(onnx_file), opts, providers=["CPUExecutionProvider"])
    saved = folded.stat().st_size - ort_file.stat().st_size
    assert saved > 1.5 * keras_model.parameter_count(), saved
    config = (tmp_path / ort_entry["ops_config"]).read_text()
    assert "ai.onnx;" in config and "MatMul" in config and str(tmp_path) not in config
    a = open_runner(onnx_file, _sigs(entry), ORT, 1)
    b = open_runner(ort_file, _sigs(entry), ORT, 1)
    ids, mask = onnx_inputs(10, 16, seed=3)
    got_a, got_b = a.run(ids, mask), b.run(ids, mask)
    for key in OUTPUTS:
        np.testing.assert_allclose(got_b[key], got_a[key], atol=1e-6)


def test_build_bundles_and_hashes_the_ort_copy(tiny_ckpt: Path, tmp_path: Path, capsys) -> None:
    from edge_m3.bundle import load_bundle
    from edge_m3.cli import main

    assert main(["build", "--checkpoint", str(tiny_ckpt), "--ort", "--out", str(tmp_path / "b"),
                 "--kits", "none", "-q"]) == 2  # tflite only: nothing to copy from
    assert "--ort" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
    assert main(["build", "--checkpoint", str(tiny_ckpt), "--ort", "--formats", "onnx",
                 "--quant", "int8", "--seq-lens", "8,16", "--out", str(tmp_path / "b"),
                 "--kits", "none", "--no-self-check", "-q"]) == 0
    bundle = load_bundle(tmp_path / "b")  # checks every hash in the manifest
    entry = bundle.model_entry("onnx").ort
    assert {entry["file"], entry["ops_config"]} <= set(bundle.manifest.files)

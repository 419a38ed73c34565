"""`edge-m3 build` on tiny checkpoints: variants, runtimes, parity, sizes, atomicity, options."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from edge_m3.builder import BuildOptions, build, param_count_from_config, validate_against_config
from edge_m3.bundle import load_bundle
from edge_m3.checkpoint import load_checkpoint
from edge_m3.cli import main
from edge_m3.common.files import sha256_file
from edge_m3.errors import EdgeM3Error
from edge_m3.modeling import build_model
from edge_m3.runtime import RUNTIMES, open_runner
from edge_m3.spec import recipes
from tests.support.spread import TOLERANCES, run_in_child, runtimes_diff

pytestmark = pytest.mark.models  # builds Keras models, bundles or references

LENS = [8, 16, 32]


@pytest.fixture(scope="module")
def bundles(tiny_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("bundles")
    opts = BuildOptions(checkpoint=str(tiny_ckpt), quants=recipes("fp32", "fp16", "int8-tflite214"),
                        seq_lens=LENS, out=str(out / "bge-m3-{quant}"))
    dirs = build(opts, quiet=True)
    return {d.name.removeprefix("bge-m3-"): d for d in dirs}


def _inputs(n_real: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    ids = np.ones((1, length), np.int32)
    ids[0, :n_real] = [0, *range(5, 5 + n_real - 2), 2]
    mask = (np.arange(length) < n_real).astype(np.int32)[None]
    return ids, mask


@pytest.mark.parametrize("quant", ["fp32", "fp16", "int8-tflite214"])
def test_every_signature_runs_on_both_runtimes(bundles: dict[str, Path], quant: str,
                                               tmp_path: Path) -> None:
    bundle = load_bundle(bundles[quant])
    entry = bundle.model_entry("tflite")
    assert [s.name for s in entry.signatures] == [f"embed_{n}" for n in LENS]
    loaded = entry.self_check["tflite-runtime"]
    assert loaded.ok and loaded.version is not None and loaded.version.startswith("2.14")
    assert entry.self_check["litert"].ok
    assert entry.oldest_runtime["tflite-runtime"] == "2.14.0"
    assert entry.ops["FULLY_CONNECTED"] <= 9
    if quant == "fp16":  # embedding rows gathered as int16 bits, then dequantized (issue 17)
        assert entry.ops["BITCAST"] == 1 and entry.ops["GATHER"] >= 4
    outs = {rt: run_in_child(bundle.path / entry.file, entry.signatures, rt, tmp_path)
            for rt in ("tflite-runtime", "litert")}
    for sig in entry.signatures:
        n = sig.seq_len
        for o in sig.outputs:
            a, b = outs["tflite-runtime"][f"{n}/{o.name}"], outs["litert"][f"{n}/{o.name}"]
            assert a.shape == b.shape == tuple(o.shape)
        assert tuple(sig.outputs[2].shape) == (1, n - 1, 32)
    assert runtimes_diff(outs) <= TOLERANCES["tflite_runtimes"][quant]  # set from measured spread


def test_fp32_equals_keras(bundles: dict[str, Path], tiny_ckpt: Path) -> None:
    model = build_model(load_checkpoint(tiny_ckpt))
    bundle = load_bundle(bundles["fp32"])
    entry = bundle.model_entry("tflite")
    runner = open_runner(bundle.path / entry.file, entry.signatures, RUNTIMES["litert"], 1)
    for n in LENS:
        for real in (2, n // 2, n):
            ids, mask = _inputs(real, n)
            want = model(ids, mask)
            got = runner.run(ids, mask)
            for key in ("dense_vecs", "sparse_weights", "colbert_vecs"):
                assert np.abs(got[key] - want[key].numpy()).max() <= 1e-5, (n, real, key)


def test_manifest_hashes_and_contents(bundles: dict[str, Path], tiny_ckpt: Path) -> None:
    for quant, path in bundles.items():
        manifest = json.loads((path / "manifest.json").read_text())
        assert manifest["quant"] == quant and manifest["schema_version"] == 1
        assert manifest["hidden_size"] == 32 and manifest["max_length"] == 32
        tok = manifest["tokenizer"]
        assert tok["special_ids"]["bos"] == 0 and tok["special_ids"]["pad"] == 1
        assert tok["id_offset"] == 1
        assert set(manifest["source"]["files"]) >= {"model.safetensors", "colbert_linear.pt",
                                                    "sparse_linear.pt", "config.json"}
        assert manifest["source"]["files"]["model.safetensors"] == sha256_file(
            tiny_ckpt / "model.safetensors")
        listed = set(manifest["files"])
        assert listed == {f"model_{quant}.tflite", "sentencepiece.bpe.model", "golden.json"}
        for name, entry in manifest["files"].items():
            assert sha256_file(path / name) == entry["sha256"]
            assert (path / name).stat().st_size == entry["size"]
        assert sorted(os.listdir(path)) == sorted([*listed, "manifest.json"])


def test_golden_is_consistent(bundles: dict[str, Path]) -> None:
    from edge_m3.runtime.postprocess import postprocess

    golden = json.loads((bundles["int8-tflite214"] / "golden.json").read_text())
    assert len(golden["cases"]) >= 12
    lengths = [c["seq_len"] for c in golden["cases"]]
    assert min(lengths) == 8 and max(lengths) == 32  # short texts pick small signatures
    specials = {"bos": 0, "pad": 1, "eos": 2, "unk": 3}
    for case in golden["cases"]:
        assert len(case["input_ids"]) <= case["seq_len"]
        assert case["input_ids"][0] == 0 and case["input_ids"][-1] == 2
        raw = {k: np.asarray(v, np.float32) for k, v in case["raw"].items()}
        again = postprocess(raw, case["input_ids"], specials)
        assert again["lexical_weights"].keys() == case["lexical_weights"].keys()
        assert len(case["colbert_vecs"]) == len(case["input_ids"]) - 1


def _sized_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.support.synthetic import make_checkpoint

    return make_checkpoint(tmp_path_factory.mktemp("sized"), seed=5, vocab_size=30000,
                           hidden_size=64, intermediate_size=128)


@pytest.mark.slow
def test_shared_weights_and_int8_size(tmp_path_factory: pytest.TempPathFactory) -> None:
    """3 signatures cost at most 2% over 1; int8 is at most 27% of fp32."""
    ckpt = _sized_ckpt(tmp_path_factory)
    out = tmp_path_factory.mktemp("sized_out")
    three = build(BuildOptions(checkpoint=str(ckpt), quants=recipes("fp32", "int8"), seq_lens=LENS,
                               out=str(out / "three-{quant}"), self_check=False), quiet=True)
    one = build(BuildOptions(checkpoint=str(ckpt), quants=recipes("fp32"), seq_lens=[32],
                             out=str(out / "one-{quant}"), self_check=False), quiet=True)
    size = {p.name: (p / f"model_{p.name.split('-')[1]}.tflite").stat().st_size
            for p in [*three, *one]}
    assert size["three-fp32"] <= 1.02 * size["one-fp32"], size
    assert size["three-int8"] <= 0.27 * size["three-fp32"], size


def test_failed_build_keeps_previous_bundle(bundles: dict[str, Path], tiny_ckpt: Path,
                                            tmp_path: Path, monkeypatch) -> None:
    import shutil

    import edge_m3.builder.orchestrate as b

    target = tmp_path / "bundle"
    shutil.copytree(bundles["fp32"], target)
    before = {p.name: sha256_file(p) for p in target.iterdir()}

    def boom(*args, **kwargs):
        raise RuntimeError("simulated failure mid-write")

    monkeypatch.setattr(b, "make_golden", boom)  # after the model file is written
    with pytest.raises(RuntimeError, match="simulated"):
        build(BuildOptions(checkpoint=str(tiny_ckpt), quants=recipes("fp32"), seq_lens=LENS,
                           out=str(target), self_check=False), quiet=True)
    assert {p.name: sha256_file(p) for p in target.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]  # no partial dirs


def test_full_disk_is_one_line_and_keeps_previous_bundle(bundles: dict[str, Path], tiny_ckpt: Path,
                                                         tmp_path: Path) -> None:
    """A real full disk: the CLI builds with TMPDIR on a 256 KB tmpfs (mounted in a mount
    namespace of the child's own, `unshare -rm`), so TensorFlow's SavedModel writer fails with
    ENOSPC in the trace child (ResourceExhaustedError, not an OSError). The user gets exit 2 and
    one line naming the file and the free space, no traceback, and the bundle at --out as it was.
    Root (CI) can always make the namespace; elsewhere the test skips when the kernel refuses."""
    import shutil
    import subprocess
    import sys

    target = tmp_path / "bundle"
    shutil.copytree(bundles["fp32"], target)
    before = {p.name: sha256_file(p) for p in target.iterdir()}
    small = tmp_path / "small"
    small.mkdir()
    mount = f'mount -t tmpfs -o size=256k tmpfs "{small}"'
    if subprocess.run(["unshare", "-rm", "sh", "-c", mount], capture_output=True).returncode != 0:
        if os.geteuid() == 0:
            pytest.fail("unshare -rm + mount tmpfs failed as root")
        pytest.skip("this kernel refuses a user's mount namespace (unshare -rm)")
    build_args = ["-m", "edge_m3.cli", "build", "--checkpoint", str(tiny_ckpt), "--quant", "fp32",
                  "--seq-lens", "8", "--out", str(target), "--kits", "none", "--no-self-check", "-q"]
    done = subprocess.run(["unshare", "-rm", "sh", "-c", f'{mount} && exec "$@"', "sh",
                           sys.executable, *build_args],
                          env={**os.environ, "TMPDIR": str(small), "HF_HUB_OFFLINE": "1"},
                          capture_output=True, text=True, timeout=600)
    ours = [ln for ln in done.stderr.splitlines() if ln.startswith("edge-m3:")]
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(ours) == 1 and ours[0].startswith("edge-m3: error: tracing the Keras model: no space "
                                                 f"left on the disk writing {small}/"), ours
    assert " free in " in ours[0] and "TMPDIR" in ours[0], ours
    assert {p.name: sha256_file(p) for p in target.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle", "small"]
    assert list(small.iterdir()) == []  # the tmpfs was the child's namespace's alone


@pytest.mark.parametrize("args, needle", [
    (["--quant", "int3"], "--quant int3"),
    (["--quant", "int8pc"], "renamed to int8"),
    (["--quant", "int4", "--formats", "tflite,onnx"], "TFLite only"),
    (["--quant", "int8-tflite214", "--formats", "onnx"], "TFLite only"),
    (["--heads", "dense,bogus"], "--heads bogus"),
    (["--seq-lens", "32,abc"], "--seq-lens abc"),
    (["--seq-lens", "32,9999"], "--seq-lens 9999"),
    (["--formats", "coreml"], "--formats coreml"),
    (["--quant", "fp32,int8"], "--out"),
])
def test_bad_options_exit_2(tiny_ckpt: Path, tmp_path: Path, capsys, args, needle) -> None:
    argv = ["build", "--checkpoint", str(tiny_ckpt), "--out", str(tmp_path / "o"),
            "--kits", "none", "-q", *args]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err
    assert not (tmp_path / "o").exists()


def test_unwritable_out_exits_2(tiny_ckpt: Path, tmp_path: Path, capsys) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    # root ignores permission bits; /proc refuses everyone
    target = locked / "b" if os.geteuid() != 0 else Path("/proc/edge-m3-test/b")
    try:
        assert main(["build", "--checkpoint", str(tiny_ckpt), "--out", str(target),
                     "--kits", "none", "-q"]) == 2
        assert "--out" in capsys.readouterr().err
    finally:
        locked.chmod(0o700)


def test_out_is_a_file_exits_2(tiny_ckpt: Path, tmp_path: Path, capsys) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["build", "--checkpoint", str(tiny_ckpt), "--out", str(f), "--kits", "none",
                 "-q"]) == 2
    assert "--out" in capsys.readouterr().err


def test_fp32_full_size_refused_before_conversion() -> None:
    """BGE-M3 in fp32 is 2.27 GB: over the FlatBuffer limit, refused with what to use instead."""
    from edge_m3.checkpoint import ModelConfig

    cfg = ModelConfig(vocab_size=250002, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                      intermediate_size=4096, max_position_embeddings=8194, type_vocab_size=1,
                      layer_norm_eps=1e-5, pad_token_id=1, hidden_act="gelu")
    params = param_count_from_config(cfg, 1024)
    assert 560e6 < params < 575e6
    with pytest.raises(EdgeM3Error, match="2 GB FlatBuffer limit.*fp16 or int8"):
        validate_against_config(BuildOptions(quants=recipes("fp32")), cfg, params)
    validate_against_config(BuildOptions(quants=recipes("int8", "fp16")), cfg, params)


def test_int8_is_per_channel_and_needs_litert(tiny_ckpt: Path, tmp_path: Path) -> None:
    """int8 (per-channel, FC v12) does not load on tflite-runtime 2.14: the build says so and
    ships it for LiteRT / TF Lite >= 2.17 (a runtime too old for a variant is no failure)."""
    (out,) = build(BuildOptions(checkpoint=str(tiny_ckpt), quants=recipes("int8"), seq_lens=[16],
                                out=str(tmp_path / "pc")), quiet=True)
    entry = load_bundle(out).model_entry("tflite")
    assert entry.ops["FULLY_CONNECTED"] == 12
    assert entry.self_check["tflite-runtime"].is_failure
    assert entry.self_check["litert"].ok
    assert entry.self_check["litert"].detail == "XNNPACK runs 14 of 14 FULLY_CONNECTED"
    assert "ai-edge-litert" in entry.oldest_runtime and entry.oldest_runtime["tflite"] == "2.17.0"
    assert entry.oldest_runtime["converter_min_runtime_version"] == "2.17.0"


def test_int8_tflite214_says_in_one_line_that_it_misses_the_gate(tiny_ckpt: Path, tmp_path: Path,
                                                                  capsys) -> None:
    from edge_m3.spec import RECIPES

    assert main(["build", "--checkpoint", str(tiny_ckpt), "--quant", "int8-tflite214",
                 "--seq-lens", "16", "--out", str(tmp_path / "pt"), "--kits", "none",
                 "--no-self-check"]) == 0
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "misses the default int8 gate" in ln]
    assert len(lines) == 1 and RECIPES["int8-tflite214"].note in lines[0], err


def test_a_file_no_runtime_can_run_is_refused(tiny_ckpt: Path, tmp_path: Path, capsys,
                                              monkeypatch) -> None:
    """LiteRT is new enough for every variant: if it cannot run the file, nothing ships."""
    import edge_m3.builder.orchestrate as b
    from edge_m3.spec import CheckResult

    monkeypatch.setattr(b, "self_check", lambda *a: {"tflite-runtime": CheckResult.failed("2.14.0", "x"),
                                                     "litert": CheckResult.failed("2.3.0", "boom")})
    target = tmp_path / "never"
    assert main(["build", "--checkpoint", str(tiny_ckpt), "--quant", "fp32", "--seq-lens", "16",
                 "--out", str(target), "--kits", "none", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "does not run on" in err and "not shipped" in err, err
    assert not target.exists() and sorted(p.name for p in tmp_path.iterdir()) == []


def test_int4_refuses_widths_its_blocks_do_not_divide(tiny_ckpt: Path, tmp_path: Path,
                                                      capsys) -> None:
    assert main(["build", "--checkpoint", str(tiny_ckpt), "--quant", "int4", "--out",
                 str(tmp_path / "x"), "--kits", "none", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--quant int4: not for this model" in err, err


def test_aeq_hadamard_rotation_runs_on_the_locked_numpy() -> None:
    """AEQ 0.10.0's Hadamard rotation is written for numpy 2 (`reshape(copy=False)`);
    `numpy_compat` spells it for 1.26 too: the same block-diagonal rotation, undone by H^T."""
    from ai_edge_quantizer.algorithms.uniform_quantize import hadamard_rotation as hr

    from edge_m3.export.aeq import numpy_compat

    numpy_compat()
    w = np.random.default_rng(0).normal(size=(3, 384)).astype(np.float32)
    rotated, size, _ = hr._rotate_with_diagonal_hadamard(w, 1)
    assert size == 128  # the largest power of two dividing 384
    back = (rotated.reshape(-1, 128) @ hr._make_hadamard_matrix(128).T).reshape(w.shape)
    np.testing.assert_allclose(back, w, atol=1e-5)


def test_int4_mixes_4_and_8_bit_weights_and_runs_on_litert(tmp_path_factory: pytest.TempPathFactory,
                                                           tmp_path: Path) -> None:
    """ai-edge-quantizer's int4: 4-bit FULLY_CONNECTED and tables, 8-bit where the recipe says,
    run by LiteRT with XNNPACK taking every FULLY_CONNECTED; tflite-runtime 2.14 cannot."""
    pytest.importorskip("ai_edge_quantizer")
    from edge_m3.export.aeq import AEQ_RECIPES
    from edge_m3.runtime.pipeline import DevicePipeline
    from tests.support.synthetic import make_checkpoint

    # The recipe's blocks (64, 128) must divide the widths: hidden 128, 6 layers.
    ckpt = make_checkpoint(tmp_path_factory.mktemp("w128"), seed=3, hidden_size=128,
                           intermediate_size=256, num_hidden_layers=6)
    (out,) = build(BuildOptions(checkpoint=str(ckpt), quants=recipes("int4"), seq_lens=[8, 16],
                                out=str(tmp_path / "i4")), quiet=True)
    bundle = load_bundle(out)
    entry = bundle.model_entry("tflite")
    assert "EMBEDDING_LOOKUP" in entry.ops and "GATHER" not in entry.ops
    assert entry.self_check["litert"].ok
    assert entry.self_check["litert"].detail == "XNNPACK runs 38 of 38 FULLY_CONNECTED"
    assert entry.self_check["tflite-runtime"].is_failure
    assert "ai-edge-litert" in entry.oldest_runtime
    assert any(bits == 8 for _, bits, *_ in AEQ_RECIPES["aeq-int4-mixed"])
    (fp32,) = build(BuildOptions(checkpoint=str(ckpt), quants=recipes("fp32"), seq_lens=[8, 16],
                                 out=str(tmp_path / "f32"), self_check=False), quiet=True)
    assert (out / entry.file).stat().st_size < 0.35 * (fp32 / "model_fp32.tflite").stat().st_size
    got = DevicePipeline(bundle, RUNTIMES["litert"], 1).embed("Hello world")
    want = DevicePipeline(load_bundle(fp32), RUNTIMES["litert"], 1).embed("Hello world")
    assert got["input_ids"] == want["input_ids"]
    # random tiny weights: a floor set from the spread over seeds (tests/support/spread.py)
    assert float(np.dot(got["dense_vecs"], want["dense_vecs"])) >= TOLERANCES["int4_dense_cosine_min"]


def test_int16x8_is_full_integer_and_computes_like_fp32(tiny_ckpt: Path, tmp_path: Path,
                                                         capsys) -> None:
    """The full-integer variant: ai-edge-quantizer's static int16 activations with int8 weights,
    calibrated on the committed fidelity sample (the default). Every op of the encoder computes
    in integers but LayerNorm's statistics (the variance, `+ epsilon`, RSQRT: STATIC_FLOAT_NORM,
    one float island a LayerNorm); the output tail (sparse head, L2 norms, the three outputs)
    is float by the recipe, and every signature shares one set of activation ranges. Inputs stay
    int32, outputs float32; LiteRT runs it close to fp32. A bad --calibration is one line;
    without one, the committed sample."""
    pytest.importorskip("ai_edge_quantizer")
    from edge_m3.builder.orchestrate import _calibration_texts
    from edge_m3.export.aeq import float_ops, int32_biases
    from edge_m3.harness.fidelity import bundled_sample
    from edge_m3.runtime.pipeline import DevicePipeline
    from edge_m3.spec import RECIPES

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "x", "kind": "query", "lang": "en"}\n')
    assert main(["build", "--checkpoint", str(tiny_ckpt), "--quant", "int16x8", "--calibration",
                 str(bad), "--out", str(tmp_path / "never"), "--kits", "none", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--calibration {bad}: line 1: 'group'" in err, err
    assert not (tmp_path / "never").exists()

    default = _calibration_texts(BuildOptions(quants=recipes("int16x8")))
    assert default == [r["text"] for r in bundled_sample().records]
    assert _calibration_texts(BuildOptions(quants=recipes("int8"))) is None
    calibration = tmp_path / "calibration.jsonl"  # a few texts of it keep the test short
    calibration.write_text("".join(json.dumps(r) + "\n" for r in bundled_sample().records[:24]))
    lengths = [8, 16]
    out, fp32 = build(BuildOptions(checkpoint=str(tiny_ckpt), quants=recipes("int16x8", "fp32"),
                                   seq_lens=lengths, out=str(tmp_path / "{quant}"),
                                   calibration=calibration), quiet=True)
    bundle = load_bundle(out)
    entry = bundle.model_entry("tflite")
    path = out / entry.file
    layers = 2 * json.loads((tiny_ckpt / "config.json").read_text())["num_hidden_layers"] + 1
    n = len(lengths)  # every count is per signature
    assert float_ops(path) == {"CAST": n, "NEG": layers * n, "SQUARED_DIFFERENCE": layers * n,
                               "MEAN": layers * n, "ADD": layers * n, "RSQRT": layers * n,
                               "SQUARE": 2 * n, "SUM": 2 * n, "SQRT": 2 * n, "MAXIMUM": 2 * n,
                               "DIV": 2 * n,  # the sparse head: its product, slice and mask
                               "FULLY_CONNECTED": n, "STRIDED_SLICE": n, "MUL": n}
    assert {"FULLY_CONNECTED", "BATCH_MATMUL", "SOFTMAX", "GELU", "GATHER"} <= set(entry.ops)
    scales = _int16_scales(path)  # one list per signature, tensor by tensor
    assert len(scales) == n and sum(x is not None for x in scales[0]) > 20 and scales[0] == scales[1]
    assert all(i.dtype == "int32" for s in entry.signatures for i in s.inputs)
    assert all(o.dtype == "float32" for s in entry.signatures for o in s.outputs)
    assert entry.self_check["litert"].ok
    # Its biases are int32 (AEQ saves them int64), which LiteRT's optimized 16x8 kernel needs;
    # the rewrite has nothing left to do on the built file.
    assert _int16_fc_bias_types(path) == {"INT32"} and int32_biases(path) == 0
    # The same file with its biases back in int64, its buffers inside the FlatBuffer (AEQ's
    # layout for small models) or after it (for the others): the rewrite gives back the built
    # file's outputs bit for bit.
    built = _outputs(path, lengths)
    for outside in (False, True):
        widened = tmp_path / f"int64-{outside}.tflite"
        widened.write_bytes(_int64_biases(path, outside))
        assert _int16_fc_bias_types(widened) == {"INT64"}
        assert int32_biases(widened) > 0 and _int16_fc_bias_types(widened) == {"INT32"}
        assert _outputs(widened, lengths) == built
    assert RECIPES["int16x8"].onnx is None and RECIPES["int16x8"].calibrated
    for text in ("Hello world", "a longer text that needs the sixteen token signature here"):
        got = DevicePipeline(bundle, RUNTIMES["litert"], 1).embed(text)
        want = DevicePipeline(load_bundle(fp32), RUNTIMES["litert"], 1).embed(text)
        assert got["input_ids"] == want["input_ids"]
        # random tiny weights: a floor set from the spread over seeds (tests/support/spread.py)
        cos = float(np.dot(got["dense_vecs"], want["dense_vecs"]))
        assert cos >= TOLERANCES["int16x8_dense_cosine_min"], (text, cos)


def _int64_biases(path: Path, outside: bool) -> bytes:
    """`path` (an int16x8 file) repacked with the int32 biases of its int16-input
    FULLY_CONNECTED ops stored int64, as AEQ writes them, and every buffer inside the
    FlatBuffer or (`outside`) after it, 16-byte aligned, as AEQ writes a large model's."""
    from tensorflow.lite.python import schema_py_generated as schema

    from edge_m3.export.tflite import builtin_code, pack_aligned

    data = path.read_bytes()
    model = schema.ModelT.InitFromPackedBuf(data, 0)
    for b in model.buffers:
        if b.offset > 1:
            b.data = np.frombuffer(data, np.uint8, b.size, b.offset)
        b.offset = b.size = 0
    widened: set[int] = set()
    for graph in model.subgraphs:
        for op in graph.operators:
            if (builtin_code(model, op) == schema.BuiltinOperator.FULLY_CONNECTED and len(op.inputs) > 2
                    and op.inputs[2] >= 0 and graph.tensors[op.inputs[0]].type == schema.TensorType.INT16):
                bias = graph.tensors[op.inputs[2]]
                if bias.buffer not in widened:
                    buf = model.buffers[bias.buffer]
                    values = np.frombuffer(np.asarray(buf.data, np.uint8).tobytes(), np.int32)
                    buf.data = np.frombuffer(values.astype(np.int64).tobytes(), np.uint8)
                    widened.add(bias.buffer)
                bias.type = schema.TensorType.INT64
    if not outside:
        return pack_aligned(model, 2 * len(data))
    blobs = [(b, np.asarray(b.data, np.uint8).tobytes()) for b in model.buffers if b.data is not None]
    for b, blob in blobs:  # offsets of the same width first, so the FlatBuffer's length is final
        b.data, b.offset, b.size = None, 1, len(blob)
    head = pack_aligned(model, len(data))
    at = -(-len(head) // 16) * 16
    for b, blob in blobs:
        b.offset, at = at, -(-(at + len(blob)) // 16) * 16
    head = pack_aligned(model, len(data))
    out = bytearray(head)
    for b, blob in blobs:
        out += bytes(b.offset - len(out)) + blob
    return bytes(out)


def _outputs(path: Path, lengths: list[int]) -> list[bytes]:
    """Every signature's outputs on one fixed input, as bytes (LiteRT's Interpreter)."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path), num_threads=1)
    out = []
    for n in lengths:
        ids = np.arange(5, 5 + n, dtype=np.int32)[None] % 100
        mask = np.ones((1, n), np.int32)
        got = it.get_signature_runner(f"embed_{n}")(input_ids=ids, attention_mask=mask)
        out += [got[k].tobytes() for k in sorted(got)]
    return out


def _int16_fc_bias_types(path: Path) -> set[str]:
    """The types of the biases of every FULLY_CONNECTED whose input is int16."""
    from ai_edge_litert import schema_py_generated as schema

    from edge_m3.export.aeq import _ops

    names = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    return {names[graph.Tensors(op.Inputs(2)).Type()] for graph, op, name in _ops(path)
            if name == "FULLY_CONNECTED" and op.InputsLength() > 2 and op.Inputs(2) >= 0
            and graph.Tensors(op.Inputs(0)).Type() == schema.TensorType.INT16}


def _int16_scales(path: Path) -> list[list[float | None]]:
    """Per subgraph, the scale of each tensor (None unless an int16 tensor with one scale)."""
    from ai_edge_litert import schema_py_generated as schema

    model = schema.Model.GetRootAsModel(path.read_bytes(), 0)
    out = []
    for g in range(model.SubgraphsLength()):
        graph, row = model.Subgraphs(g), []
        for i in range(graph.TensorsLength()):
            t = graph.Tensors(i)
            q = t.Quantization()
            one = t.Type() == schema.TensorType.INT16 and q is not None and q.ScaleLength() == 1
            row.append(float(q.Scale(0)) if one else None)
        out.append(row)
    return out

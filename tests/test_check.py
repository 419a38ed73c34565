"""`edge-m3 check`: golden.json replayed on the device with only the runtime installed.

Tiny fp32 and int8 bundles (lengths 8 and 16, conftest's tiny_bundles) are built once; every
test that edits one edits a copy. The runtime install itself is checked twice: the declared
dependencies, and a real check and embed run with everything outside that install made
unimportable (children included).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from edge_m3.cli import main
from edge_m3.common.files import file_entries
from edge_m3.common.options import version_tuple
from edge_m3.runtime import available_runtimes
from edge_m3.spec import GOLDEN, MANIFEST, RECIPES
from tests.support import blocked_imports_env

pytestmark = pytest.mark.models  # builds bundles
ROOT = Path(__file__).resolve().parents[1]
# What `pip install edge-m3` (no extras) brings, by distribution name.
RUNTIME_DISTRIBUTIONS = {"numpy", "ai-edge-litert", "regex", "rich", "psutil"}
# Top-level modules of the builder's and the tests' packages: never needed by embed/bench/check.
NOT_IN_THE_RUNTIME = ("tensorflow", "keras", "tf2onnx", "onnx", "torch", "transformers",
                      "FlagEmbedding", "sentencepiece", "matplotlib", "huggingface_hub",
                      "safetensors", "datasets")


@pytest.fixture(scope="module")
def bundles(tiny_bundles: dict[str, Path]) -> dict[str, Path]:
    return tiny_bundles


def _copy(bundle: Path, tmp_path: Path) -> Path:
    dst = tmp_path / bundle.name
    shutil.copytree(bundle, dst)
    return dst


def _rewrite(bundle: Path, golden: dict | None = None, **manifest_fields) -> None:
    """Edit golden.json and/or manifest fields, and re-hash, as a (wrong) build would have."""
    manifest = json.loads((bundle / MANIFEST).read_text())
    if golden is not None:
        (bundle / GOLDEN).write_text(json.dumps(golden))
        manifest["files"].update(file_entries(bundle, [GOLDEN]))
    manifest.update(manifest_fields)
    (bundle / MANIFEST).write_text(json.dumps(manifest))


def _check(bundle: Path, tmp_path: Path, *extra: str) -> tuple[int, dict | None]:
    report = tmp_path / "report"
    rc = main(["check", str(bundle), "--report", str(report), "--repeats", "2", "--warmup", "1",
               *extra])
    path = report / "report.json"
    return rc, json.loads(path.read_text()) if path.is_file() else None


@pytest.mark.parametrize("quant", ["fp32", "int8"])
def test_check_passes_and_reports(bundles: dict[str, Path], tmp_path: Path, quant: str) -> None:
    rc, report = _check(bundles[quant], tmp_path)
    assert rc == 0 and report is not None and report["passed"]
    golden_runtime = report["golden"]["recorded_with"]
    assert not report["golden"]["postprocess_problems"]  # golden scores recomputed bit for bit
    # int8 is per-channel (FULLY_CONNECTED v12): tflite-runtime 2.14 is too old for it
    candidates = ("tflite-runtime", "litert") if quant == "fp32" else ("litert",)
    tflite = [r for r in candidates if r in {rt.name for rt in available_runtimes()}]
    assert report["runtimes_checked"] == tflite  # TensorFlow's interpreter only on request
    tol = RECIPES[quant].device_tolerance
    assert report["tolerance"]["dense_cosine_min"] == tol.dense_cosine_min
    for rt in tflite:
        res = report["runtimes"][rt]
        assert res["passed"] and res["golden"]["cases"] == 12 and not res["golden"]["problems"]
        assert res["golden"]["dense_cosine_min"] >= tol.dense_cosine_min
        assert max(res["golden"][k] for k in ("dense_max_abs", "lexical_max_abs",
                                              "colbert_max_abs")) <= tol.max_abs
        if rt == golden_runtime:  # the recording's runtime, this CPU: the very same scores
            assert res["golden"]["scores_max_abs"] == 0.0
        else:
            assert 0.0 <= res["golden"]["scores_max_abs"] < 1e-3
        timing = res["timing"]
        assert set(timing["lengths"]) == {"8", "16"} and timing["peak_rss_mb"] > 0
        assert all(f["p50_ms"] > 0 for f in timing["lengths"].values())
        assert set(timing["first_call_ms"]) == {"8", "16"} and min(timing["first_call_ms"].values()) > 0
    md = (tmp_path / "report" / "report.md").read_text()
    assert "result: **PASS**" in md and "embed_16" in md


def test_golden_mismatch_names_text_output_and_size(bundles: dict[str, Path], tmp_path: Path,
                                                    capsys) -> None:
    from edge_m3.retrieval.scores import golden_scores

    """A recorded output off by 0.2 (raw and post-processed alike): exit 1, and the line says
    which text, which output, and by how much."""
    b = _copy(bundles["int8"], tmp_path)
    golden = json.loads((b / GOLDEN).read_text())
    case = golden["cases"][3]
    case["dense_vecs"][5] = float(np.float32(case["dense_vecs"][5] + 0.2))  # as a float32 reads back
    case["raw"]["dense_vecs"][0][5] = case["dense_vecs"][5]
    golden["scores"] = golden_scores(golden["cases"])  # recorded scores follow the edited case
    _rewrite(b, golden)
    rc, report = _check(b, tmp_path, "--runtime", "litert")
    out = capsys.readouterr().out
    assert rc == 1 and report is not None and not report["passed"]
    assert not report["golden"]["postprocess_problems"]  # the edit is consistent: only live differs
    # the live scores of the pairs with case 3 differ from the recorded ones by about the edit
    assert 1e-3 < report["runtimes"]["litert"]["golden"]["scores_max_abs"] < 1
    problems = report["runtimes"]["litert"]["golden"]["problems"]
    assert problems and all(p.startswith(f"golden case 3 {case['text'][:20]!r}"[:-1]) for p in problems)
    (size,) = [p for p in problems if "dense_vecs differs by up to" in p]
    assert size.endswith("dense_vecs differs by up to 0.2 > 0.05") and size in out.replace("\n", "")


def test_wrong_ids_and_inconsistent_post_processing_fail(bundles: dict[str, Path],
                                                         tmp_path: Path) -> None:
    b = _copy(bundles["fp32"], tmp_path)
    golden = json.loads((b / GOLDEN).read_text())
    golden["cases"][0]["input_ids"][1] += 1  # a tokenizer that drifted
    golden["cases"][1]["lexical_weights"] = {"5": 1.0}  # post-processing that drifted
    golden["scores"][6]["dense"] += 1e-15  # a score rule that drifted (case 2 x case 3)
    _rewrite(b, golden)
    rc, report = _check(b, tmp_path, "--runtime", "litert")
    assert rc == 1 and report is not None
    exact = report["golden"]["postprocess_problems"]
    assert any("lexical_weights post-processed" in p for p in exact)
    assert any(p.startswith("golden score 6 (case 2 x case 3, dense)") for p in exact)
    # the drifted case's own scores are recomputed differently too (with itself, at least)
    assert any(p.startswith("golden score 4 (case 1 x case 1, sparse)") for p in exact)
    problems = report["runtimes"]["litert"]["golden"]["problems"]
    assert any(p.startswith("golden case 0") and "input_ids differ" in p for p in problems)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_missing_runtime_is_one_line_naming_the_package(bundles: dict[str, Path], tmp_path: Path,
                                                        capsys, monkeypatch) -> None:
    from edge_m3.runtime import registry

    monkeypatch.setattr(registry, "installed_version", lambda rt: None)  # a device with no runtime
    assert main(["check", str(bundles["int8"]), "--report", str(tmp_path)]) == 2
    err = _one_line(capsys)
    assert "model_int8.tflite" in err and "pip install ai-edge-litert" in err
    assert not (tmp_path / "report.json").exists()


def test_variant_newer_than_tflite_runtime_names_litert(bundles: dict[str, Path], tmp_path: Path,
                                                        capsys, monkeypatch) -> None:
    """A variant whose oldest TF Lite is past 2.14 (per-channel int8) on a rig with only
    tflite-runtime 2.14: exit 2, and the line names LiteRT's package."""
    from edge_m3.runtime import registry

    newer = [q for q, r in RECIPES.items() if version_tuple(r.oldest_tflite) > version_tuple("2.14.0")]
    if not newer:
        pytest.skip("every registered variant runs on tflite-runtime 2.14")
    b = _copy(bundles["int8"], tmp_path)
    _rewrite(b, quant=newer[0])
    monkeypatch.setattr(registry, "installed_version",
                        lambda rt: "2.14.0" if rt.name == "tflite-runtime" else None)
    report = ["--report", str(tmp_path / "r")]
    assert main(["check", str(b), "--runtime", "tflite-runtime", *report]) == 2
    err = _one_line(capsys)
    assert "2.14.0 is older than TF Lite" in err and "pip install ai-edge-litert" in err
    assert main(["check", str(b), *report]) == 2
    assert "pip install ai-edge-litert" in _one_line(capsys)


@pytest.mark.parametrize(("edit", "args", "needle"), [
    ("no-golden", [], "golden.json: missing"),
    ("bad-golden", [], "golden.json: case 0 needs"),
    (None, ["--repeats", "0"], "--repeats 0"),
    (None, ["--runtime", "coreml"], "--runtime coreml: unknown"),
    (None, ["--runtime", "onnxruntime"], "--runtime onnxruntime: runs onnx models"),
    (None, ["--threads", "0"], "--threads 0"),
])
def test_bad_input_exits_2(bundles: dict[str, Path], tmp_path: Path, capsys, edit: str | None,
                           args: list[str], needle: str) -> None:
    b = _copy(bundles["fp32"], tmp_path)
    if edit == "no-golden":
        (b / GOLDEN).unlink()
        manifest = json.loads((b / MANIFEST).read_text())
        del manifest["files"][GOLDEN]
        (b / MANIFEST).write_text(json.dumps(manifest))
    elif edit == "bad-golden":
        golden = json.loads((b / GOLDEN).read_text())
        del golden["cases"][0]["signature"]
        _rewrite(b, golden)
    assert main(["check", str(b), "--report", str(tmp_path / "r"), *args]) == 2
    assert needle in _one_line(capsys)


def test_runtime_install_declares_only_runtime_packages() -> None:
    """`pip install edge-m3` is the device side: numpy, LiteRT, regex, rich, psutil; the
    builder and the references are extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(reqs: list[str]) -> set[str]:
        return {r.split(";")[0].split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower()
                for r in reqs}

    assert names(project["dependencies"]) == RUNTIME_DISTRIBUTIONS
    extras = project["optional-dependencies"]
    assert {"tensorflow-cpu", "tf2onnx", "onnx", "edge-m3"} <= names(extras["build"])
    assert "edge-m3[tflite-runtime,onnx]" in extras["build"] and "edge-m3[build,parquet,ray]" in extras["dev"]
    assert {"torch", "flagembedding", "sentencepiece", "pytest"} <= names(extras["dev"])
    assert names(extras["onnx"]) == {"onnxruntime"}
    assert project["requires-python"] == ">=3.11,<3.14"


def test_check_and_embed_run_with_only_the_runtime_importable(bundles: dict[str, Path],
                                                              tmp_path: Path) -> None:
    """What a Pi has: the builder's and the tests' packages unimportable, in the command and
    in every child it starts (a sitecustomize on PYTHONPATH blocks them everywhere)."""
    env = blocked_imports_env(tmp_path, NOT_IN_THE_RUNTIME)
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"text number {i}\n" for i in range(50)))
    for args in (["check", str(bundles["int8"]), "--runtime", "litert", "--report",
                  str(tmp_path / "r"), "--repeats", "1"],
                 ["embed", str(bundles["int8"]), "--texts", str(texts), "--runtime", "litert"]):
        proc = subprocess.run([sys.executable, "-m", "edge_m3.cli", *args], capture_output=True,
                              text=True, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(rows) == 50 and all(r["input_ids"][0] == 0 for r in rows)
    assert "50 text(s) in" in proc.stderr and "texts/s (litert" in proc.stderr
    # The builder's commands say which extra to install.
    for command, args in (("build", ["--checkpoint", "x"]),
                          ("verify", [str(bundles["int8"]), "--reference", "x"])):
        proc = subprocess.run([sys.executable, "-m", "edge_m3.cli", command, *args],
                              capture_output=True, text=True, env=env, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
            f"edge-m3: error: edge-m3 {command} needs tensorflow and keras, which the runtime "
            "install leaves out: pip install 'edge-m3[build]'"]

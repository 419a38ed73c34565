"""The harness: embed from the bundle alone, refuse modified bundles, gate on thresholds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from edge_m3.cli import main

TEXTS = ["Hello world", "안녕하세요, 세계.", "the lazy dog"]  # under 32 tokens: no truncation


@pytest.fixture(scope="module")
def bundle(tiny_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("harness") / "b"
    assert main(["build", "--checkpoint", str(tiny_ckpt), "--quant", "fp32", "--seq-lens",
                 "8,16,32", "--formats", "tflite,onnx", "--out", str(out), "--kits", "none",
                 "--no-self-check", "-q"]) == 0
    return out


@pytest.mark.parametrize("runtime", ["tflite-runtime", "litert", "tf", "onnxruntime"])
def test_embed_matches_flagembedding(bundle: Path, tiny_ckpt: Path, tmp_path: Path,
                                     runtime: str) -> None:
    import subprocess
    import sys

    from FlagEmbedding import BGEM3FlagModel

    out = tmp_path / "out.jsonl"
    # each runtime in its own process, as an app would (tflite-runtime cannot share with TF)
    subprocess.run([sys.executable, "-m", "edge_m3.cli", "embed", str(bundle), *TEXTS,
                    "--runtime", runtime, "--out", str(out)], check=True, capture_output=True)
    got = [json.loads(line) for line in out.read_text().splitlines()]
    ref = BGEM3FlagModel(str(tiny_ckpt), use_fp16=False, devices="cpu").encode(
        TEXTS, return_dense=True, return_sparse=True, return_colbert_vecs=True)
    for i, g in enumerate(got):
        d = np.asarray(g["dense_vecs"])
        cos = d @ ref["dense_vecs"][i] / np.linalg.norm(d) / np.linalg.norm(ref["dense_vecs"][i])
        assert cos >= 0.99999
        assert set(g["lexical_weights"]) == set(ref["lexical_weights"][i])
        assert np.asarray(g["colbert_vecs"]).shape == ref["colbert_vecs"][i].shape
        assert g["input_ids"][0] == 0 and g["input_ids"][-1] == 2


def test_modified_bundle_is_refused(bundle: Path, tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(bundle, bad)
    model = bad / "model_fp32.tflite"
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0x01
    model.write_bytes(bytes(data))
    assert main(["embed", str(bad), "Hello"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model_fp32.tflite" in err and "sha256" in err


def test_texts_file_errors(bundle: Path, tmp_path: Path, capsys) -> None:
    f = tmp_path / "t.txt"
    f.write_bytes(b"fine\nalso fine\n\xc3\x28 broken\n")
    assert main(["embed", str(bundle), "--texts", str(f)]) == 2
    assert "line 3 is not UTF-8" in capsys.readouterr().err
    assert main(["embed", str(bundle)]) == 2
    assert "no text" in capsys.readouterr().err


def test_verify_passes_then_fails_on_a_strict_threshold(bundle: Path, tiny_ckpt: Path,
                                                        tmp_path: Path) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    report = tmp_path / "report"
    assert main(["verify", str(bundle), "--reference", str(tiny_ckpt), "--texts", str(texts),
                 "--report", str(report)]) == 0
    data = json.loads((report / "report.json").read_text())
    assert data["passed"] and data["user_texts"] == 3 and data["queries"] >= 24
    assert set(data["runtimes"]) == {"tflite-runtime", "litert", "tf", "onnxruntime"}
    for figures in data["runtimes"].values():
        assert figures["dense_cosine"]["min"] >= 0.99999
        assert figures["ids_match_reference"] == data["texts"]
        assert figures["peak_rss_mb"] > 0 and figures["latency"]
    assert "PASS" in (report / "report.md").read_text()
    for png in ("cosine.png", "latency.png"):
        assert (report / png).read_bytes()[:4] == b"\x89PNG"
    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps({"fp32": {"dense_cosine_min": 1.000001}}))
    assert main(["verify", str(bundle), "--reference", str(tiny_ckpt), "--thresholds",
                 str(strict), "--runtime", "litert", "--report", str(tmp_path / "r2")]) == 1
    failed = json.loads((tmp_path / "r2" / "report.json").read_text())
    assert failed["runtimes"]["litert"]["failed"][0].startswith("dense_cosine_min")


def test_bench_reports_ratios(bundle: Path, tiny_ckpt: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    assert main(["bench", str(bundle), "--runtimes", "litert,onnxruntime", "--threads", "1",
                 "--lengths", "8,32", "--repeats", "2", "--reference", str(tiny_ckpt),
                 "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [r["runtime"] for r in rows] == ["torch fp32 (FlagEmbedding)", "litert", "onnxruntime"]
    assert all("speedup_vs_torch" in f for r in rows[1:] for f in r["lengths"].values())
    assert main(["bench", str(bundle), "--lengths", "64"]) == 2

"""The harness: embed from the bundle alone, refuse modified bundles, gate on thresholds, bench.

One fp32 bundle (TFLite, plus ONNX when the exporter is there) is built per module; every
installed runtime runs through `verify`, which compares each against FlagEmbedding itself.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edge_m3.cli import main
from edge_m3.runtime import RUNTIMES, WeightCache, available_runtimes

pytestmark = pytest.mark.models  # builds Keras models, bundles or references
ROOT = Path(__file__).resolve().parents[1]

# Under 32 tokens: no truncation. A literal "<pad>" (Dutch for "path", in dpkg's messages) is
# <pad>'s id, attended to but given no position by XLM-R: the tokens after it keep theirs.
TEXTS = ["Hello world", "안녕하세요, 세계.", "the lazy dog", "zie <pad> en <pad>/naam voor het pad"]
HAS_ONNX = importlib.util.find_spec("edge_m3.export.onnx") is not None


@pytest.fixture(scope="module")
def bundle(tiny_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("harness") / "b"
    formats = "tflite,onnx" if HAS_ONNX else "tflite"
    assert main(["build", "--checkpoint", str(tiny_ckpt), "--quant", "fp32", "--seq-lens",
                 "8,16,32", "--formats", formats, "--out", str(out), "--kits", "none",
                 "--no-self-check", "-q"]) == 0
    return out


@pytest.fixture(scope="module")
def verified(bundle: Path, tiny_ckpt: Path, tmp_path_factory: pytest.TempPathFactory,
             flag_model_class: type) -> dict[str, Any]:
    """One `verify` over every installed runtime, with TEXTS as --texts.

    Its reference cache (a temp dir, never ~/.cache) holds FlagEmbedding's own outputs for
    TEXTS, which the embed tests compare against.
    """
    work = tmp_path_factory.mktemp("verify")
    texts = work / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    rc = main(["verify", str(bundle), "--reference", str(tiny_ckpt), "--texts", str(texts),
               "--report", str(work / "report"), "--cache", str(work / "cache")])
    return {"rc": rc, "report": work / "report", "cache": work / "cache", "texts": texts}


@pytest.fixture(scope="module")
def flag_outputs(verified: dict[str, Any]) -> list[dict[str, Any]]:
    """BGEM3FlagModel.encode's outputs for TEXTS, as the verify run's FlagEmbedding child saved them."""
    from edge_m3.harness.workers import load_outputs

    (entry,) = (verified["cache"] / "reference").glob("flag-*.json")
    outs, meta = load_outputs(entry.with_suffix(""))
    assert meta["runtime"].startswith("FlagEmbedding BGEM3FlagModel")
    return outs[: len(TEXTS)]


def _installed() -> set[str]:
    return {r.name for r in available_runtimes()}


def _embed_runtimes() -> list[str]:
    return [r for r in ("tflite-runtime", "litert", "onnxruntime")
            if r in _installed() and (r != "onnxruntime" or HAS_ONNX)]


@pytest.mark.parametrize("runtime", _embed_runtimes())
def test_embed_matches_flagembedding(bundle: Path, flag_outputs: list[dict[str, Any]],
                                     tmp_path: Path, runtime: str) -> None:
    out = tmp_path / "out.jsonl"
    args = ["embed", str(bundle), *TEXTS, "--runtime", runtime, "--out", str(out)]
    if runtime == "tflite-runtime":  # cannot share a process with TensorFlow: its own, as in an app
        proc = subprocess.run([sys.executable, "-m", "edge_m3.cli", *args], capture_output=True,
                              text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
    else:
        assert main(args) == 0
    assert not list(tmp_path.glob("*.part"))
    got = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(got) == len(TEXTS)
    for g, ref in zip(got, flag_outputs, strict=True):
        assert set(g) >= {"input_ids", "dense_vecs", "lexical_weights", "colbert_vecs"}
        assert g["input_ids"] == ref["input_ids"]
        d, rd = np.asarray(g["dense_vecs"]), ref["dense_vecs"]
        assert d @ rd / np.linalg.norm(d) / np.linalg.norm(rd) >= 0.99999
        assert set(g["lexical_weights"]) == set(ref["lexical_weights"])
        for key, w in g["lexical_weights"].items():
            assert w == pytest.approx(ref["lexical_weights"][key], abs=1e-4)
        np.testing.assert_allclose(g["colbert_vecs"], ref["colbert_vecs"], atol=1e-4)


def test_modified_bundle_is_refused(bundle: Path, tiny_ckpt: Path, tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(bundle, bad)
    model = bad / "model_fp32.tflite"
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0x01
    model.write_bytes(bytes(data))
    for args in (["embed", str(bad), "Hello"],
                 ["verify", str(bad), "--reference", str(tiny_ckpt), "--no-cache"],
                 ["bench", str(bad), "--repeats", "1"]):
        assert main(args) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "model_fp32.tflite" in err and "sha256" in err


def test_texts_file(bundle: Path, tmp_path: Path, capsys) -> None:
    f = tmp_path / "t.txt"
    f.write_bytes(b"\xef\xbb\xbfone\r\ntwo\n")  # BOM and CRLF are not part of the texts
    out = tmp_path / "o.jsonl"
    assert main(["embed", str(bundle), "--texts", str(f), "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    single = json.loads(_embed_stdout(bundle, "one", capsys))
    assert len(rows) == 2 and rows[0]["input_ids"] == single["input_ids"]

    f.write_bytes(b"fine\nalso fine\n\xc3\x28 broken\n")
    assert main(["embed", str(bundle), "--texts", str(f)]) == 2
    assert "line 3 is not UTF-8" in capsys.readouterr().err
    assert main(["embed", str(bundle)]) == 2
    assert "no text" in capsys.readouterr().err
    f.write_bytes(b"")
    assert main(["embed", str(bundle), "--texts", str(f)]) == 2
    assert "no text" in capsys.readouterr().err


def _embed_stdout(bundle: Path, text: str, capsys) -> str:
    capsys.readouterr()
    assert main(["embed", str(bundle), text]) == 0
    return capsys.readouterr().out.strip()


def test_verify_passes_then_fails_on_a_strict_threshold(bundle: Path, tiny_ckpt: Path,
                                                        verified: dict[str, Any],
                                                        tmp_path: Path) -> None:
    report = verified["report"]
    assert verified["rc"] == 0
    data = json.loads((report / "report.json").read_text())
    assert data["passed"] and data["primary_reference"] == "flagembedding"
    assert data["texts"]["user"] == len(TEXTS) and data["texts"]["queries"] >= 24
    assert data["texts"]["passages"] >= 60 and len(data["texts"]["languages"]) >= 8
    expected = [r for r in ("tflite-runtime", "litert", "tf") if r in _installed()]
    if HAS_ONNX and "onnxruntime" in _installed():
        expected.append("onnxruntime")
    assert data["runtimes_checked"] == expected and list(data["runtimes"]) == expected
    for figures in data["runtimes"].values():
        assert figures["dense_cosine"]["all"]["min"] >= 0.99999
        assert figures["input_ids_match"] == 1.0 and not figures["failed"]
        assert figures["vs_keras"]["dense_cosine"]["min"] >= 0.99999
        assert figures["peak_rss_mb"] > 0 and figures["load_s"] >= 0
        assert set(figures["latency"]) <= {"8", "16", "32"} and figures["latency"]
        assert set(figures["first_call_ms"]) == {"8", "16", "32"}  # every signature ran
    for rt, figures in data["runtimes"].items():  # the memory gate: TFLite runtimes apps ship
        memory = figures["memory"]
        assert memory["model_mb"] > 0 and memory["model_peak_rss_mb"] > 0
        # A tiny model's ratio is reported, not bounded: the runtime's own MiB would decide it.
        assert memory["gated"] == (rt in ("litert", "tflite-runtime") and memory["model_mb"] >= 64 * 1.048576)
        assert ("model_rss_ratio" in figures) == memory["gated"]
    assert data["runtimes"]["litert"]["memory"]["weight_cache"] == "memory"
    assert data["thresholds"]["limits"]["model_rss_ratio_max"] == 1.3
    assert data["keras_vs_flagembedding"]["dense_cosine"]["min"] >= 0.99999
    assert max(data["score_formulas_vs_flagembedding"].values()) < 1e-5
    assert "PASS" in (report / "report.md").read_text()
    for png in ("cosine.png", "latency.png"):
        assert (report / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps({"fp32": {"dense_cosine_min": 1.000001,
                                           "colbert_score_abs_err_max": 0.0}}))
    r2 = tmp_path / "r2"
    assert main(["verify", str(bundle), "--reference", str(tiny_ckpt), "--thresholds",
                 str(strict), "--runtime", "litert", "--report", str(r2), "--texts",
                 str(verified["texts"]), "--cache", str(verified["cache"])]) == 1
    failed = json.loads((r2 / "report.json").read_text())
    # FlagEmbedding's outputs come from the first run's cache (the Keras entry's key also covers
    # edge-m3's model and tokenizer sources, which may change between two runs while developing)
    assert failed["references"]["flagembedding"]["cached"]
    assert not failed["passed"] and list(failed["runtimes"]) == ["litert"]
    reasons = failed["runtimes"]["litert"]["failed"]
    assert [r.split(":")[0] for r in reasons] == ["dense_cosine_min", "colbert_score_abs_err_max"]
    assert "FAIL" in (r2 / "report.md").read_text()


def test_verify_without_flagembedding_uses_keras(bundle: Path, tiny_ckpt: Path,
                                                 verified: dict[str, Any], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import edge_m3.harness.references

    monkeypatch.setattr(edge_m3.harness.references, "flagembedding_installed", lambda: False)
    assert main(["verify", str(bundle), "--reference", str(tiny_ckpt), "--runtime", "litert",
                 "--texts", str(verified["texts"]), "--report", str(tmp_path / "r"),
                 "--cache", str(verified["cache"])]) == 0
    data = json.loads((tmp_path / "r" / "report.json").read_text())
    assert data["primary_reference"] == "keras" and list(data["references"]) == ["keras"]
    assert data["keras_vs_flagembedding"] is None
    assert "vs_keras" not in data["runtimes"]["litert"]


# A sitecustomize that makes transformers look like 5.x to FlagEmbedding 1.4: the private module
# it imports is gone (what a fresh `pip install` of the unpinned ranges did on 2026-11-24).
_BREAK_TRANSFORMERS = """
import importlib.abc, sys
class _Gone(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "transformers.modeling_attn_mask_utils":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _Gone())
"""


def test_a_broken_flagembedding_is_one_line(bundle: Path, tiny_ckpt: Path, tmp_path: Path) -> None:
    """verify, with FlagEmbedding installed but unimportable: one line naming FlagEmbedding's
    version and the package (with its version) that broke it, exit 2, no traceback, no report."""
    from importlib import metadata

    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(_BREAK_TRANSFORMERS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])}
    texts = tmp_path / "t.txt"
    texts.write_text("Hello world\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "edge_m3.cli", "verify", str(bundle), "--reference",
                           str(tiny_ckpt), "--runtime", "litert", "--texts", str(texts), "--no-cache",
                           "--report", str(tmp_path / "r")],
                          capture_output=True, text=True, env=env, timeout=600)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    want = (f"FlagEmbedding {metadata.version('FlagEmbedding')} cannot be imported under "
            f"transformers {metadata.version('transformers')}")
    assert want in lines[0] and "modeling_attn_mask_utils" in lines[0], lines[0]
    assert "Traceback" not in proc.stderr and not (tmp_path / "r").exists()


def test_gate_skips_heads_a_bundle_lacks(tmp_path: Path) -> None:
    from edge_m3.harness.metrics import check_limits, compare, gate
    from edge_m3.harness.report import markdown

    rng = np.random.default_rng(0)
    ref = [{"input_ids": [0, 5 + i, 2], "dense_vecs": rng.normal(size=4),
            "lexical_weights": {str(5 + i): 0.3}, "colbert_vecs": rng.normal(size=(2, 4))}
           for i in range(6)]
    ours = [{"input_ids": r["input_ids"], "dense_vecs": r["dense_vecs"] * 2} for r in ref]  # dense only
    figures = compare(ours, ref, {"queries": [0, 1], "passages": [2, 3, 4, 5]}, [0, 1], [2, 3, 4, 5])
    assert figures["heads"] == ["dense"] and figures["dense_cosine"]["all"]["min"] == pytest.approx(1.0)
    assert "lexical_abs_err" not in figures and figures["retrieval_top10_agreement"]["min"] == 1.0
    limits = check_limits({"dense_cosine_min": 0.999, "lexical_abs_err_max": 0.0}, "t")
    assert gate(figures, limits) == []
    figures.update(version="x", latency={}, load_s=0.0, peak_rss_mb=1.0, rss_before_load_mb=1.0,
                   failed=[], first_call_ms={"8": 1.0},
                   memory={"model_mb": 1.0, "model_peak_rss_mb": 1.0, "model_rss_ratio": 0.5,
                           "weight_cache": "memory", "gated": True})
    md = markdown({"bundle": "b", "quant": "fp32", "source": "s", "reference_checkpoint": "c",
                   "primary_reference": "keras", "threads": 1, "passed": True,
                   "references": {"keras": {"runtime": "k", "version": "1", "load_s": 0.0,
                                            "peak_rss_mb": 1.0, "cached": False}},
                   "runtimes_checked": ["litert"], "runtimes": {"litert": figures},
                   "texts": {"total": 6, "user": 0, "queries": 2, "passages": 4, "max_length": 8,
                             "languages": ["en"]},
                   "thresholds": {"file": "t", "variant": "fp32", "limits": limits}})
    assert "n/a (head not exported)" in md and "PASS" in md


def test_verify_refuses_bad_thresholds(bundle: Path, tiny_ckpt: Path, tmp_path: Path,
                                       capsys) -> None:
    bad = tmp_path / "t.json"
    for content, message in ((json.dumps({"fp32": {"dense_cosine_minimum": 1}}), "unknown threshold"),
                             (json.dumps({"int8": {}}), "no entry for variant 'fp32'"),
                             ("{", "unreadable")):
        bad.write_text(content)
        assert main(["verify", str(bundle), "--reference", str(tiny_ckpt), "--thresholds",
                     str(bad)]) == 2
        err = capsys.readouterr().err
        assert message in err and str(bad) in err and len(err.strip().splitlines()) == 1
    assert main(["verify", str(bundle), "--reference", str(tmp_path / "nope")]) == 2
    assert "no such directory" in capsys.readouterr().err


def test_bench_reports_ratios(bundle: Path, tiny_ckpt: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "bench.json"
    runtimes = "litert,onnxruntime" if HAS_ONNX else "litert"
    assert main(["bench", str(bundle), "--runtimes", runtimes, "--threads", "1", "--lengths",
                 "5,32", "--repeats", "2", "--warmup", "1", "--reference", str(tiny_ckpt),
                 "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    rows = data["rows"]
    # LiteRT twice: a new weight cache file (cold), then a second start mapping it (warm)
    assert [r["runtime"] for r in rows] == ["torch fp32 (FlagEmbedding)", "litert", "litert",
                                            *runtimes.split(",")[1:]]
    assert [(r["cache_mode"], r["weight_cache"]) for r in rows[1:3]] == [("cold", "file"),
                                                                         ("warm", "file")]
    assert rows[1]["weight_cache_mb"] > 0 and rows[2]["weight_cache_mb"] == rows[1]["weight_cache_mb"]
    for row in rows[1:]:
        # 5 tokens is no signature: it runs padded in embed_8, as the device pipeline would
        assert set(row["lengths"]) == {"5", "32"} and row["peak_rss_ratio"] > 0
        assert all(f["p50_speedup"] > 0 and f["p95_ms"] >= f["p50_ms"] for f in row["lengths"].values())
        assert set(row["first_call_ms"]) == {"8", "16", "32"} and row["model_rss_ratio"] >= 0
        assert row["open_to_first_result_ms"] > 0 and row["model_mb"] > 0
    assert "32 tokens" in capsys.readouterr().out
    assert main(["bench", str(bundle), "--runtimes", "litert", "--threads", "1", "--repeats",
                 "1", "--warmup", "0", "--weight-cache", "off,memory", "--json", str(out)]) == 0
    assert [r["weight_cache"] for r in json.loads(out.read_text())["rows"]] == ["off", "memory"]
    assert main(["bench", str(bundle), "--runtimes", "litert", "--weight-cache", "warm,cold",
                 "--repeats", "1", "--threads", "1", "--json", str(out)]) == 0  # cold runs first
    assert [r["cache_mode"] for r in json.loads(out.read_text())["rows"]] == ["cold", "warm"]
    assert main(["bench", str(bundle), "--lengths", "64"]) == 2
    assert main(["bench", str(bundle), "--lengths", "1"]) == 2
    assert main(["bench", str(bundle), "--threads", "0"]) == 2
    assert main(["bench", str(bundle), "--weight-cache", "warm"]) == 2
    assert main(["bench", str(bundle), "--weight-cache", "disk"]) == 2


def test_litert_weight_cache_file_is_written_once_then_mapped(bundle: Path, tmp_path: Path) -> None:
    """CompiledModel with a cache file gives the Interpreter's outputs; a second start loads
    the file as it is (XNNPACK rewrites it only when it cannot load it)."""
    from edge_m3.bundle import load_bundle
    from edge_m3.runtime.registry import weight_cache_file
    from edge_m3.runtime.runners import LiteRTRunner, open_runner

    b = load_bundle(bundle)
    entry = b.model_entry("tflite")
    litert = RUNTIMES["litert"]
    cache = weight_cache_file(tmp_path / "xnn", b.manifest.files[entry.file]["sha256"], litert)

    def outputs(weight_cache: WeightCache | None) -> tuple[object, dict[str, np.ndarray]]:
        runner = open_runner(bundle / entry.file, entry.signatures, litert, 1, weight_cache)
        out = {}
        for n in entry.seq_lens:
            ids = np.ones((1, n), np.int32)
            ids[0, :4] = [0, 5, 6, 2]
            mask = (ids != 1).astype(np.int32)
            out.update({f"{n}/{k}": v for k, v in runner.run(ids, mask).items()})
        return runner, out

    plain_runner, plain = outputs(WeightCache.OFF)
    assert plain_runner.weight_cache == WeightCache.OFF and not isinstance(plain_runner, LiteRTRunner)
    cold_runner, cold = outputs(WeightCache.in_file(cache))
    assert isinstance(cold_runner, LiteRTRunner) and cache.stat().st_size > 0
    written = cache.stat()
    _, warm = outputs(WeightCache.in_file(cache))
    assert (cache.stat().st_mtime_ns, cache.stat().st_size) == (written.st_mtime_ns, written.st_size)
    mem_runner, memory = outputs(None)
    assert mem_runner.weight_cache == WeightCache.MEMORY
    for key, value in plain.items():
        for other in (cold, warm, memory):
            assert other[key].shape == value.shape and np.abs(other[key] - value).max() <= 1e-6, key


def test_default_runtimes_skip_what_the_build_saw_fail(tmp_path: Path) -> None:
    """An int8 (per-channel) file fails on tflite-runtime 2.14; verify/bench must not pick it by
    default."""
    from types import SimpleNamespace

    from edge_m3.runtime.choice import select_runtimes
    from edge_m3.spec import RECIPES, CheckResult, ModelEntry

    entry = ModelEntry("tflite", "model_int8.tflite", "int8", [], self_check={
        "tflite-runtime": CheckResult.parse("FAILED (2.14.0): Didn't find op for builtin opcode"),
        "litert": CheckResult.parse("ok (2.3)")})
    manifest = SimpleNamespace(models=[entry], formats={"tflite"}, recipe=RECIPES["int8"])
    chosen = [rt.name for rt in select_runtimes(SimpleNamespace(manifest=manifest, path=tmp_path), None)]
    assert "tflite-runtime" not in chosen
    assert ("litert" in chosen) == ("litert" in _installed())


def test_memory_gate_applies_to_shipping_runtimes_and_real_sizes() -> None:
    """The ratio bound holds for LiteRT and tflite-runtime on models of RSS_GATE_MIN_BYTES and up."""
    from edge_m3.harness.verify import memory_gated
    from edge_m3.spec import RSS_GATE_MIN_BYTES

    rt = RUNTIMES
    assert memory_gated(rt["litert"], RSS_GATE_MIN_BYTES) and memory_gated(rt["tflite-runtime"], 10**9)
    assert not memory_gated(rt["litert"], RSS_GATE_MIN_BYTES - 1)
    assert not memory_gated(rt["onnxruntime"], 10**9) and not memory_gated(rt["tf"], 10**9)


def test_error_spread_and_where_the_worst_is() -> None:
    """The gate bounds the 99th percentile of the lexical and ColBERT errors besides their
    largest value (which grows with the number of texts); the report says which text and which
    query x passage pair hold the largest."""
    from edge_m3.harness.metrics import ERR_PERCENTILE, check_limits, compare, gate

    rng = np.random.default_rng(1)
    n = 40
    ref = [{"input_ids": [0, 5 + i, 6 + i, 2], "dense_vecs": rng.normal(size=4),
            "lexical_weights": {str(5 + i): 0.3, str(6 + i): 0.2},
            "colbert_vecs": rng.normal(size=(3, 4)) / 2} for i in range(n)]
    ours = [{**r, "lexical_weights": {k: w + 0.001 * i for k, w in r["lexical_weights"].items()},
             "colbert_vecs": r["colbert_vecs"].copy()} for i, r in enumerate(ref)]
    ours[7]["lexical_weights"] = {"12": 0.3 + 0.5, "13": 0.2}  # one text far off
    ours[3]["colbert_vecs"] = ours[3]["colbert_vecs"] * 1.5  # one query far off
    queries, passages = list(range(10)), list(range(10, n))
    labels = ["xx" if i == 7 else "yy" for i in range(n)]
    f = compare(ours, ref, {"queries": queries, "passages": passages}, queries, passages,
                labels=labels)
    lex = [max(abs(w - ref[i]["lexical_weights"][k]) for k, w in ours[i]["lexical_weights"].items())
           for i in range(n)]
    assert f["lexical_abs_err"] == pytest.approx(0.5)
    assert f["lexical_abs_err_p99"] == pytest.approx(np.percentile(lex, ERR_PERCENTILE))
    assert f["worst"]["lexical_abs_err"] == {"text": 7, "value": pytest.approx(0.5), "tokens": 4,
                                             "label": "xx"}
    w = f["worst"]["colbert_score_abs_err"]
    assert w["query"] == 3 and w["passage"] in passages and w["value"] == f["colbert_score_abs_err"]
    assert 0 < f["colbert_score_abs_err_p99"] <= f["colbert_score_abs_err"]
    # One text past the maximum bound fails it; the percentile bound reads the spread.
    limits = check_limits({"lexical_abs_err_max": 0.6, "lexical_abs_err_p99_max": 0.1,
                           "colbert_score_abs_err_p99_max": 1.0}, "t")
    assert [r.split(":")[0] for r in gate(f, limits)] == ["lexical_abs_err_p99_max"]

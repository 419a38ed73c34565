"""Fidelity on real text (issue 26): the committed corpus sample, its reader and sampler, the
all-pairs scores, and the shipped recipes verified on the sample against FlagEmbedding, so that
a recipe regression fails here."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from edge_m3.errors import OptionError
from edge_m3.lab.fidelity import bundled_sample, read_corpus, sample
from tests.support import prebuild

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "edge_m3" / "data" / "fidelity_sample.jsonl"
REQUIRED_SCRIPTS = {"Kore", "Hans", "Jpan", "Arab", "Deva", "Thai", "Cyrl", "Latn"}


def test_the_committed_sample_is_broad_real_text() -> None:
    corpus = bundled_sample()
    recs = corpus.records
    assert 120 <= len(recs) <= 200
    assert len(corpus.languages()) >= 15
    assert REQUIRED_SCRIPTS <= {r["script"] for r in recs}
    assert {r["kind"] for r in recs} == {"query", "passage"}
    by_group = Counter((r["group"], r["kind"]) for r in recs)
    for group in {r["group"] for r in recs}:  # the query -> passage relation holds in every group
        assert by_group[(group, "query")] >= 1 and by_group[(group, "passage")] >= 1
    feats = Counter(f for r in recs for f in r["features"])
    assert min(feats[f] for f in ("url", "code", "digits", "mixed")) >= 3, feats
    chars = [len(r["text"]) for r in recs]
    assert min(chars) < 10 and max(chars) > 2500  # a few words to past 512 tokens
    assert all(r["source"].startswith("usr/share/") for r in recs)  # from the Debian packages
    assert read_corpus(SAMPLE).records == recs


def test_sample_takes_whole_groups_from_every_language_deterministically() -> None:
    corpus = bundled_sample()
    small = sample(corpus, 60, seed=1)
    assert len(small.records) <= 60
    assert small.languages() == corpus.languages()  # languages take turns
    assert small.records == sample(corpus, 60, seed=1).records
    assert small.records != sample(corpus, 60, seed=2).records
    groups = {r["group"] for r in small.records}
    assert [r for r in corpus.records if r["group"] in groups] == list(small.records)
    assert all(rel for rel in small.relevant())  # every query keeps a passage


def test_read_corpus_names_the_bad_line(tmp_path: Path) -> None:
    good = {"text": "t", "lang": "en", "group": "g", "kind": "query"}
    path = tmp_path / "c.jsonl"
    for bad, why in (({**good, "kind": "doc"}, "'kind'"), ({**good, "lang": ""}, "'lang'"),
                     ([1], "not a JSON object")):
        path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
        with pytest.raises(OptionError, match=f"line 2: .*{why}"):
            read_corpus(path)
    path.write_text(json.dumps(good) + "\n{oops\n", encoding="utf-8")
    with pytest.raises(OptionError, match="line 2: not JSON"):
        read_corpus(path)


def test_all_pair_scores_are_flagembeddings_sums() -> None:
    """score_matrices (all pairs at once) against the pairwise formulas (FlagEmbedding's,
    checked against FlagEmbedding itself on every verify run), ragged and empty inputs too."""
    from edge_m3.lab import metrics

    rng = np.random.default_rng(0)
    outs = [{"dense_vecs": rng.normal(size=8).astype(np.float32),
             "colbert_vecs": rng.normal(size=(int(n), 8)).astype(np.float32),
             "lexical_weights": {str(t): float(rng.random())
                                 for t in rng.integers(0, 40, int(rng.integers(0, 9)))}}
            for n in rng.integers(0, 30, 40)]
    q, p = list(range(12)), list(range(12, 40))
    for block in (16, 8192):  # passages split over several products, or one
        got = metrics._colbert_matrix(outs, q, p, block=block)
        want = [[metrics.colbert_score(outs[i]["colbert_vecs"], outs[j]["colbert_vecs"]) for j in p]
                for i in q]
        np.testing.assert_allclose(got, want, atol=2e-6)
    want = [[metrics.sparse_score(outs[i]["lexical_weights"], outs[j]["lexical_weights"]) for j in p]
            for i in q]
    np.testing.assert_allclose(metrics.score_matrices(outs, q, p)["sparse"], want, atol=1e-12)


def test_the_roff_reader_keeps_text_and_drops_layout() -> None:
    from tools.inputs.make_fidelity_corpus import features, roff_text

    src = "\n".join([
        '.\\" a comment', ".TH LS 1", ".SH NAME", "ls \\- list directory contents",
        ".SH DESCRIPTION", "List \\fBinformation\\fR about the FILEs.", ".TP",
        ".BR \\-a \", \" \\-\\-all", "do not ignore entries starting with .", ".UR https://gnu.org",
        ".UE", ".TS", "table data", ".TE"])
    sections = roff_text(src)
    assert sections["NAME"] == ["ls - list directory contents"]
    assert sections["DESCRIPTION"][0] == "List information about the FILEs."
    body = " ".join(sections["DESCRIPTION"])
    assert "-a, --all do not ignore" in body and "https://gnu.org" in body
    assert "table data" not in body and "comment" not in body
    assert set(features("実行 --all https://x.org 42", "Jpan")) == {"url", "code", "digits", "mixed"}


# --------------------------------------------------------------------------- recipes


@pytest.fixture(scope="module")
def e5_onnx_int8(e5_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ONNX int8 file of the real-weights e5-small as `build` makes it (16,128), its
    smoothing calibrated on texts apart from the sample it is verified on (the package's
    tokenizer corpus, not the default: the committed sample itself). Built in the background
    from when `e5_ckpt` is made (tests/support/prebuild.py)."""
    from tests.conftest import _built

    _built(prebuild.result("e5_onnx_int8", _e5_onnx_build(e5_ckpt, tmp_path_factory)))
    return prebuild.folder(tmp_path_factory, "e5_onnx") / "e5-onnx-int8"


def _e5_onnx_build(e5_ckpt: Path, factory: pytest.TempPathFactory) -> list[prebuild.Command]:
    """e5_onnx_int8's build (its calibration file written here)."""
    from importlib import resources

    from tests.conftest import E5_SEQ_LENS, _cli

    tmp = prebuild.folder(factory, "e5_onnx")
    lines = resources.files("edge_m3").joinpath("data/corpus_multilingual.txt").read_text("utf-8")
    texts = list(dict.fromkeys(t.strip() for t in lines.splitlines() if t.strip() and "\0" not in t))
    sample_texts = {r["text"] for r in bundled_sample().records}
    calibration = tmp / "calibration.jsonl"
    if not calibration.exists():  # once: the background build may be reading it
        calibration.write_text("".join(json.dumps({"text": t, "kind": "passage", "lang": "mixed",
                                                   "group": f"c{i}"}, ensure_ascii=False) + "\n"
                                       for i, t in enumerate(texts) if t not in sample_texts), "utf-8")
    out = tmp / "e5-onnx-int8"
    return [_cli("build", "--checkpoint", str(e5_ckpt), "--quant", "int8", "--formats", "onnx",
                 "--seq-lens", E5_SEQ_LENS, "--out", str(out), "--kits", "none", "--no-self-check",
                 "--calibration", str(calibration), "-q")]


prebuild.after("e5_ckpt", "e5_onnx_int8", _e5_onnx_build)


@pytest.mark.models
def test_shipped_recipes_hold_on_real_text(e5_ckpt: Path, e5_bundles: dict[str, Path],
                                           e5_onnx_int8: Path, flag_model_class: type,
                                           tmp_path: Path) -> None:
    """int8 (LiteRT) and ONNX int8 (onnxruntime) of real weights pass their variant's gate on
    the committed sample of real text in 24 languages, against FlagEmbedding (one reference
    run, cached for the three); int4 holds its measured figures. A recipe that loses accuracy
    on real text fails here."""
    from edge_m3.cli import main
    from edge_m3.lab.metrics import gate
    from tests.support.spread import TOLERANCES

    cache = tmp_path / "cache"
    cases = [(e5_bundles["int8"], "litert"), (e5_bundles["int4"], "litert"),
             (e5_onnx_int8, "onnxruntime")]
    failed = []
    for bundle, runtime in cases:
        report = tmp_path / f"{bundle.name}-{runtime}"
        code = main(["verify", str(bundle), "--reference", str(e5_ckpt), "--texts", str(SAMPLE),
                     "--runtime", runtime, "--report", str(report), "--cache", str(cache)])
        assert code in (0, 1)
        r = json.loads((report / "report.json").read_text("utf-8"))
        f = r["runtimes"][runtime]
        assert r["primary_reference"] == "flagembedding"
        assert len(f["per_language"]) == len(bundled_sample().languages())
        assert (report / "fidelity.png").is_file()
        # int8 and ONNX int8: the variant's own gate; int4 misses its gate on real text and is
        # held to its measured figures (tests/support/spread.py)
        missed = gate(f, TOLERANCES["fidelity_sample_int4"]) if r["quant"] == "int4" else f["failed"]
        if missed:
            failed.append(f"{bundle.name} on {runtime}: {missed}; worst languages "
                          f"{f['worse_languages']}")
    assert not failed, failed

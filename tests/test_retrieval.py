"""Retrieval (issue 25): the scores are FlagEmbedding's, the arithmetic is the contract's, search
returns what scoring every passage returns, and the index folder refuses what it must.

Three kinds of proof: (1) the numpy scores equal a plain-Python loop written from the contract's
text bit for bit (what the kits implement), on Hypothesis' edge cases too; (2) on real trained
weights they equal FlagEmbedding's own functions fed the same vectors, to float32 rounding;
(3) an index's hits equal a brute-force ranking over every passage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_m3.errors import EdgeM3Error, OptionError
from edge_m3.retrieval import colbert_score, compute_score, dense_score, lexical_matching_score
from edge_m3.retrieval.index import Index
from edge_m3.retrieval.index_folder import CorruptIndexError
from edge_m3.spec import (
    COLBERT_STORES,
    DENSE_STORES,
    HYBRID_CANDIDATES,
    INDEX_ARRAYS,
    INDEX_MANIFEST,
    SCORE_MODES,
    hybrid_score,
)

MASK_ID = 250001  # XLM-R's <mask>: kept in lexical_weights, so it scores like any token

# --------------------------------------------------------------------------- the contract, literally


def _py_dot(a: Any, b: Any, scale: float | None = None) -> float:
    """docs/index-format.md's dot, as a kit writes it: acc = +0.0, one float64 add per element."""
    acc = 0.0
    for x, y in zip(np.asarray(a).tolist(), np.asarray(b).tolist(), strict=True):
        acc = acc + float(x) * float(y)
    return acc if scale is None else acc * float(scale)


def _py_sparse(q: dict[str, float], p: dict[str, float]) -> float:
    acc = 0.0
    for t in sorted(set(map(int, q)) & set(map(int, p))):
        acc = acc + float(np.float32(q[str(t)])) * float(np.float32(p[str(t)]))
    return acc


def _py_colbert(q: Any, p: Any, scale: Any = None) -> float:
    q, p = np.asarray(q), np.asarray(p)
    if len(q) == 0 or len(p) == 0:
        return 0.0
    total = 0.0
    for qi in q:
        best = max(_py_dot(qi, pj, None if scale is None else scale[j]) for j, pj in enumerate(p))
        total = total + best
    return total / len(q)


f32 = st.floats(-1.0, 1.0, width=32, allow_subnormal=True)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40).flatmap(lambda d: st.tuples(st.lists(f32, min_size=d, max_size=d),
                                                      st.lists(f32, min_size=d, max_size=d))))
def test_dense_is_the_sequential_float64_dot(pair: tuple[list[float], list[float]]) -> None:
    a, b = (np.asarray(x, np.float32) for x in pair)
    got = dense_score(a, b)
    assert got == _py_dot(a, b) and str(got) != "-0.0"


weights_dict = st.dictionaries(st.sampled_from([5, 7, 11, 260, 1000, MASK_ID]).map(str),
                               st.floats(2.0 ** -20, 3.0, width=32), max_size=6)


@settings(max_examples=80, deadline=None)
@given(weights_dict, weights_dict)
def test_lexical_matching_edge_cases(q: dict[str, float], p: dict[str, float]) -> None:
    """Empty, one token, the mask token: the ascending-id float64 sum, 0.0 with nothing shared."""
    got = lexical_matching_score(q, p)
    assert got == _py_sparse(q, p)
    if not set(q) & set(p):
        assert got == 0.0 and str(got) == "0.0"
    if str(MASK_ID) in q and str(MASK_ID) in p and len(set(q) & set(p)) == 1:
        assert got == float(np.float32(q[str(MASK_ID)])) * float(np.float32(p[str(MASK_ID)]))


vecs = st.integers(0, 5).flatmap(lambda n: st.lists(st.lists(f32, min_size=6, max_size=6),
                                                    min_size=n, max_size=n))


@settings(max_examples=60, deadline=None)
@given(vecs, vecs)
def test_colbert_edge_cases(q: list[list[float]], p: list[list[float]]) -> None:
    qa, pa = np.asarray(q, np.float32).reshape(-1, 6), np.asarray(p, np.float32).reshape(-1, 6)
    assert colbert_score(qa, pa) == _py_colbert(qa, pa)
    p16 = pa.astype(np.float16)
    assert colbert_score(qa, p16) == _py_colbert(qa, p16.astype(np.float32))


def test_hybrid_follows_compute_score() -> None:
    """compute_score's formulas and default weights (FlagEmbedding's m3.py)."""
    d, s, c = 0.61, 0.042, 0.55
    assert hybrid_score("dense", d, s, c) == d and hybrid_score("colbert", d, s, c, [0, 0, 0]) == c
    assert hybrid_score("sparse+dense", d, s, c) == (s * 1.0 + d * 1.0) / 2.0
    assert hybrid_score("colbert+sparse+dense", d, s, c) == ((c * 1.0 + s * 1.0) + d * 1.0) / 3.0
    w = [0.4, 0.2, 0.4]
    assert hybrid_score("sparse+dense", d, s, c, w) == (s * 0.2 + d * 0.4) / (0.2 + 0.4)
    assert hybrid_score("colbert+sparse+dense", d, s, c, w) == \
        ((c * 0.4 + s * 0.2) + d * 0.4) / ((0.4 + 0.2) + 0.4)
    with pytest.raises(OptionError, match="sum to 0"):
        hybrid_score("sparse+dense", d, s, c, [0, 0, 1])
    for bad in ([1, 1], [1, -1, 1], [1, float("nan"), 1], "abc"):
        with pytest.raises(OptionError):
            hybrid_score("sparse+dense", d, s, c, bad)
    with pytest.raises(OptionError, match="unknown"):
        hybrid_score("dense+sparse", d, s, c)


# --------------------------------------------------------------------------- search == brute force


def _passages(rng: np.random.Generator, n: int, dim: int = 24, vocab: int = 40) -> list[dict[str, Any]]:
    out = []
    for _ in range(n):
        d = rng.standard_normal(dim).astype(np.float32)
        toks = rng.choice(vocab, size=int(rng.integers(0, 7)), replace=False)
        col = rng.standard_normal((int(rng.integers(1, 9)), dim)).astype(np.float32)
        out.append({"dense_vecs": d / np.linalg.norm(d),
                     "lexical_weights": {str(int(t)): float(np.float32(rng.random() + 1e-3)) for t in toks},
                     "colbert_vecs": col / np.linalg.norm(col, axis=1, keepdims=True)})
    return out


def _stored_scores(index: Index, q: dict[str, Any], passages: list[dict[str, Any]], r: int) -> tuple:
    """One row's three scores from the index's stored (maybe quantized) vectors, the contract's way."""
    a = index.arrays
    scale = a.get("dense_scale")
    d = _py_dot(np.asarray(a["dense"][r]), q["dense_vecs"], None if scale is None else scale[r])
    s = _py_sparse(q["lexical_weights"], passages[r]["lexical_weights"])
    lo, hi = int(a["colbert_offsets"][r]), int(a["colbert_offsets"][r + 1])
    cs = a.get("colbert_scale")
    c = _py_colbert(q["colbert_vecs"], np.asarray(a["colbert"][lo:hi]).astype(np.float32),
                    None if cs is None else np.asarray(cs[lo:hi]))
    return d, s, c


def _brute(index: Index, q: dict[str, Any], passages: list[dict[str, Any]], mode: str, k: int,
           weights: Any = None) -> list[tuple[int, float]]:
    scores = {r: hybrid_score(mode, *_stored_scores(index, q, passages, r), weights)
              for r in range(len(passages))}
    rows = [r for r in scores if mode != "sparse"
            or set(q["lexical_weights"]) & set(passages[r]["lexical_weights"])]
    return [(r, scores[r]) for r in sorted(rows, key=lambda r: (-scores[r], r))[:k]]


@pytest.mark.parametrize(("dense", "colbert"), [("float32", "fp16"), ("int8", "int8")])
def test_search_equals_scoring_every_passage(dense: str, colbert: str, tmp_path: Path) -> None:
    """Below HYBRID_CANDIDATES passages every mode's hits (rows and score bits) are the brute
    force's, before and after a save and a memory-mapped load; added in two batches."""
    rng = np.random.default_rng(1)
    passages = _passages(rng, 60)
    index = Index(24, dense, colbert)
    index.add(passages[:25])
    index.add(passages[25:], ids=[f"p{i}" for i in range(25, 60)])
    loaded = Index.load(index.save(tmp_path / "ix"))
    assert isinstance(loaded.arrays["dense"], np.memmap)
    for trial in range(4):
        q = _passages(rng, 1)[0]
        if trial == 3:
            q["dense_vecs"] = passages[7]["dense_vecs"].copy()  # a tie between rows would show here
        for mode in SCORE_MODES:
            want = _brute(index, q, passages, mode, 10, [0.4, 0.2, 0.4] if trial == 2 else None)
            for ix in (index, loaded):
                hits = ix.search(q, 10, mode, [0.4, 0.2, 0.4] if trial == 2 else None)
                assert [(h.row, h.score) for h in hits] == want, (mode, trial)
                assert [h.id for h in hits] == [r if r < 25 else f"p{r}" for r, _ in want]


def test_hybrid_candidates_on_a_larger_index() -> None:
    """Past HYBRID_CANDIDATES: dense, sparse and colbert stay exact; a hybrid's hits are the best
    of the candidates (top C by dense union top C by sparse), re-scored exactly."""
    rng = np.random.default_rng(2)
    n = HYBRID_CANDIDATES * 3
    passages = _passages(rng, n, vocab=300)
    index = Index(24, "float32", "fp16")
    index.add(passages)
    q = _passages(rng, 1, vocab=300)[0]
    for mode in ("dense", "sparse", "colbert"):
        assert [(h.row, h.score) for h in index.search(q, 7, mode)] == _brute(index, q, passages, mode, 7)
    cand = {r for r, _ in _brute(index, q, passages, "dense", HYBRID_CANDIDATES)} | {
        r for r, _ in _brute(index, q, passages, "sparse", HYBRID_CANDIDATES)}
    for mode in ("sparse+dense", "colbert+sparse+dense"):
        full = {r: hybrid_score(mode, *_stored_scores(index, q, passages, r)) for r in cand}
        want = [(r, full[r]) for r in sorted(cand, key=lambda r: (-full[r], r))[:7]]
        assert [(h.row, h.score) for h in index.search(q, 7, mode)] == want


def test_search_edges() -> None:
    """Empty index, k past the end, a query sharing no token, an index without ColBERT, bad k."""
    rng = np.random.default_rng(3)
    passages = _passages(rng, 5)
    q = _passages(rng, 1)[0]
    assert Index(24).search(q, 10, "colbert+sparse+dense") == []
    index = Index(24, colbert="none")
    index.add(passages)
    assert len(index.search(q, 10, "dense")) == 5 and len(index.search(q, 10, "sparse+dense")) == 5
    assert index.search(dict(q, lexical_weights={"99999": 0.5}), 3, "sparse") == []
    assert index.search(dict(q, lexical_weights={}), 3, "sparse") == []
    with pytest.raises(OptionError, match="ColBERT"):
        index.search(q, 3, "colbert")
    for k in (0, -1, 1.5, True):
        with pytest.raises(OptionError, match="k"):
            index.search(q, k, "dense")  # type: ignore[arg-type]
    with pytest.raises(EdgeM3Error, match="lacks colbert_vecs"):
        Index(24).search({"dense_vecs": q["dense_vecs"], "lexical_weights": {}}, 3, "colbert")
    with pytest.raises(OptionError):
        Index(24, dense="float16")


def _corrupt_array(ix: Path) -> None:
    f = ix / INDEX_ARRAYS["dense"]
    data = bytearray(f.read_bytes())
    data[3] ^= 1
    f.write_bytes(bytes(data))


def _truncate_ids(ix: Path) -> None:
    (ix / "ids.json").write_text("[0, 1]", encoding="utf-8")


def _manifest_shape(ix: Path) -> None:
    m = json.loads((ix / INDEX_MANIFEST).read_text())
    m["arrays"]["dense"]["shape"] = [6, 25]
    (ix / INDEX_MANIFEST).write_text(json.dumps(m))


def _manifest_version(ix: Path) -> None:
    m = json.loads((ix / INDEX_MANIFEST).read_text())
    m["format_version"] = 99
    (ix / INDEX_MANIFEST).write_text(json.dumps(m))


def _delete_postings(ix: Path) -> None:
    (ix / INDEX_ARRAYS["sparse_rows"]).unlink()


@pytest.mark.parametrize(("corrupt", "message"), [
    (_corrupt_array, "sha256 does not match"), (_truncate_ids, "sha256 does not match"),
    (_manifest_shape, "bytes"), (_manifest_version, "format_version 99"), (_delete_postings, "missing")])
def test_corrupt_index_is_refused(corrupt: Any, message: str, tmp_path: Path) -> None:
    index = Index(24, "int8", "int8")
    index.add(_passages(np.random.default_rng(4), 6))
    ix = index.save(tmp_path / "ix")
    corrupt(ix)
    with pytest.raises(CorruptIndexError, match=message) as err:
        Index.load(ix)
    assert "\n" not in str(err.value) and err.value.kind == "corrupt_index"


def test_store_sizes() -> None:
    """int8 dense is a quarter of float32 plus a scale per row; fp16 ColBERT half of float32."""
    passages = _passages(np.random.default_rng(5), 10)
    sizes = {}
    for dense in DENSE_STORES:
        for colbert in COLBERT_STORES:
            index = Index(24, dense, colbert)
            index.add(passages)
            index.freeze()
            sizes[dense, colbert] = {k: v.nbytes for k, v in index.arrays.items()}
    assert sizes["int8", "none"]["dense"] * 4 == sizes["float32", "none"]["dense"]
    assert "colbert" not in sizes["float32", "none"]
    assert sizes["float32", "int8"]["colbert"] * 2 == sizes["float32", "fp16"]["colbert"]


# --------------------------------------------------------------------------- the commands


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.models
def test_index_and_search_commands(tiny_bundles: dict[str, Path], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`edge-m3 index` then `search` per mode: one JSON line per query, the hits of Index.search
    on the bundle's own embeddings; blank rows skipped (ids stay line numbers); k past the end,
    a query with no indexed token and an empty index are answers, not errors."""
    from edge_m3.bundle import load_bundle
    from edge_m3.cli import main
    from edge_m3.retrieval.index_folder import BundleIdentity
    from edge_m3.runtime.pipeline import DevicePipeline
    from edge_m3.runtime.registry import RUNTIMES

    bundle = tiny_bundles["fp32"]
    passages = ["the cat sat on the mat", "", "dogs bark at night", "a cat and a dog", "rain in spain"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(passages) + "\n", encoding="utf-8")
    queries = tmp_path / "queries.txt"
    queries.write_text("cat on a mat\nbarking dogs\n", encoding="utf-8")
    ix = tmp_path / "ix"
    assert main(["index", str(bundle), str(corpus), "--out", str(ix), "--colbert", "int8", "-q"]) == 0
    err = capsys.readouterr().err
    assert "1 row(s)" in err  # the blank line
    index = Index.load(ix)
    # the tiny bundle's largest signature is 8 tokens: longer passages are split into chunks
    assert list(dict.fromkeys(index.ids)) == [0, 2, 3, 4] and index.passages == 4
    assert len(index) > 4 and "were split into chunks" in err
    pipe = DevicePipeline(load_bundle(bundle), RUNTIMES["litert"], threads=1)
    qs = [pipe.embed(t) for t in ("cat on a mat", "barking dogs")]
    for mode in SCORE_MODES:
        out = tmp_path / f"{mode}.jsonl"
        assert main(["search", str(ix), "--queries", str(queries), "--mode", mode, "--k", "3",
                     "--out", str(out)]) == 0
        lines = _jsonl(out)
        assert [ln["query"] for ln in lines] == [0, 1]
        for line, q in zip(lines, qs, strict=True):
            assert line["hits"] == [[h.id, h.score] for h in index.search(q, 3, mode)], mode
        assert main(["search", str(ix), "--queries", str(queries), "--mode", mode, "--k", "3",
                     "--chunks", "--out", str(tmp_path / f"{mode}-chunks.jsonl")]) == 0
        for line, q in zip(_jsonl(tmp_path / f"{mode}-chunks.jsonl"), qs, strict=True):
            assert line["hits"] == [[h.id, h.chunk, h.score] for h in index.search(q, 3, mode, chunks=True)]
    # k past the end: every passage, and a note
    assert main(["search", str(ix), "--queries", str(queries), "--k", "50"]) == 0
    got = capsys.readouterr()
    assert [len(ln["hits"]) for ln in map(json.loads, got.out.splitlines())] == [4, 4]
    assert "k 50 > 4" in got.err
    # a query sharing no token with the index: no sparse hits (a note), other modes rank as usual
    nothing = tmp_path / "nothing.txt"
    nothing.write_text("\u2603\u2603\u2603\n", encoding="utf-8")
    assert main(["search", str(ix), "--queries", str(nothing), "--mode", "sparse"]) == 0
    got = capsys.readouterr()
    assert json.loads(got.out) == {"query": 0, "hits": []} and "no sparse hits" in got.err
    # JSON lines with string ids: a duplicate id and a row without text are skipped, ids are the corpus's
    rows = [{"id": "a", "text": "the cat sat"}, {"id": "b"}, {"id": "a", "text": "again"},
            {"id": "c", "text": "dogs bark"}]
    jsonl = tmp_path / "corpus.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["index", str(bundle), str(jsonl), "--out", str(tmp_path / "ixj"), "--colbert", "none",
                 "--dense", "int8", "-q"]) == 0
    assert "2 row(s)" in capsys.readouterr().err
    assert main(["search", str(tmp_path / "ixj"), "--queries", str(queries), "--mode", "sparse+dense"]) == 0
    assert {h[0] for ln in capsys.readouterr().out.splitlines() for h in json.loads(ln)["hits"]} == {"a", "c"}
    # an empty index (made by the library): every query gets no hits
    empty = Index(index.dim, bundle=BundleIdentity.of(load_bundle(bundle))).save(tmp_path / "empty")
    assert main(["search", str(empty), "--queries", str(queries), "--mode", "colbert+sparse+dense"]) == 0
    got = capsys.readouterr()
    assert [json.loads(x)["hits"] for x in got.out.splitlines()] == [[], []] and "empty index" in got.err


# --------------------------------------------------------------------------- real weights


@pytest.fixture(scope="module")
def e5_flag(e5_ckpt: Path, flag_model_class: type) -> Any:
    return flag_model_class(str(e5_ckpt), use_fp16=False, devices="cpu")


@pytest.fixture(scope="module")
def e5_sets(e5_bundles: dict[str, Path], e5_flag: Any) -> dict[str, Any]:
    """The built-in retrieval set through the int8 bundle (LiteRT, one thread) and through
    FlagEmbedding fp32 on the same checkpoint, truncated alike (the bundle's longest signature)."""
    from edge_m3.bundle import load_bundle
    from edge_m3.lab.inputs import retrieval_set
    from edge_m3.runtime.pipeline import DevicePipeline
    from edge_m3.runtime.registry import RUNTIMES

    data = retrieval_set()
    queries, passages = [q["text"] for q in data["queries"]], list(data["passages"])
    bundle = load_bundle(e5_bundles["int8"])
    pipe = DevicePipeline(bundle, RUNTIMES["litert"], threads=1)
    longest = max(pipe.lengths)
    ref = e5_flag.encode(queries + passages, batch_size=16, max_length=longest, return_dense=True,
                         return_sparse=True, return_colbert_vecs=True)
    flag = [{"dense_vecs": np.asarray(ref["dense_vecs"][i], np.float32),
             "lexical_weights": dict(ref["lexical_weights"][i]),
             "colbert_vecs": np.asarray(ref["colbert_vecs"][i], np.float32)}
            for i in range(len(queries) + len(passages))]
    return {"queries": queries, "passages": passages, "bundle": bundle, "pipe": pipe,
            "ours": [pipe.embed(t) for t in queries + passages], "flag": flag, "longest": longest}


@pytest.mark.models
@pytest.mark.slow
def test_scores_equal_flagembeddings_own_functions(e5_sets: dict[str, Any], e5_flag: Any) -> None:
    """Fed the same real-weights vectors, edge_m3.retrieval gives what FlagEmbedding's
    compute_lexical_matching_score, colbert_score and compute_score give, to float32 rounding
    (FlagEmbedding sums in float32, in its own order)."""
    flag, nq = e5_sets["flag"], len(e5_sets["queries"])
    pairs = [(i, nq + j) for i in range(nq) for j in (i, (3 * i + 1) % (len(flag) - nq))]
    for i, j in pairs:
        q, p = flag[i], flag[j]
        ref_sparse = float(e5_flag.compute_lexical_matching_score(q["lexical_weights"], p["lexical_weights"]))
        assert lexical_matching_score(q["lexical_weights"], p["lexical_weights"]) == pytest.approx(
            ref_sparse, rel=1e-5, abs=1e-7)
        ref_colbert = float(e5_flag.colbert_score(q["colbert_vecs"], p["colbert_vecs"]))
        assert colbert_score(q["colbert_vecs"], p["colbert_vecs"]) == pytest.approx(ref_colbert, abs=2e-6)
        assert dense_score(q["dense_vecs"], p["dense_vecs"]) == pytest.approx(
            float(q["dense_vecs"] @ p["dense_vecs"]), abs=2e-6)
    # compute_score runs the model itself on the texts (batch_size=1: no padding between pairs),
    # so its forward pass's float32 noise comes on top of the summation order.
    texts = e5_sets["queries"] + e5_sets["passages"]
    for weights, some in ((None, pairs[:3]), ([0.4, 0.2, 0.4], pairs[3:4])):
        ref = e5_flag.compute_score([(texts[i], texts[j]) for i, j in some], batch_size=1,
                                    max_query_length=e5_sets["longest"],
                                    max_passage_length=e5_sets["longest"], weights_for_different_modes=weights)
        assert set(ref) == set(SCORE_MODES)
        for n, (i, j) in enumerate(some):
            ours = compute_score(flag[i], flag[j], weights)
            for mode in SCORE_MODES:
                assert ours[mode] == pytest.approx(float(ref[mode][n]), abs=5e-5), (mode, weights)


def _agreement(ours: list[list[int]], ref: list[list[int]]) -> float:
    return float(np.mean([len(set(o) & set(r)) / max(len(r), 1) for o, r in zip(ours, ref, strict=True)]))


# Floors with margin under what the e5-small int8 bundle measured (docs/benchmarks.md, "Index size
# and search latency").
AGREEMENT_FLOOR = {"dense": 0.9, "sparse": 0.8, "colbert": 0.85, "sparse+dense": 0.9,
                   "colbert+sparse+dense": 0.9}


@pytest.mark.models
@pytest.mark.slow
def test_int8_bundle_ranks_like_flagembedding_fp32(e5_sets: dict[str, Any], e5_flag: Any) -> None:
    """End to end: passages embedded by the int8 bundle into an Index, queries searched per mode,
    against FlagEmbedding fp32's ranking by its own score functions: top-10 overlap per mode."""
    nq, flag = len(e5_sets["queries"]), e5_sets["flag"]
    index = Index(e5_sets["bundle"].manifest.hidden_size, "float32", "fp16")
    index.add(e5_sets["ours"][nq:])
    k, n = 10, len(flag) - nq
    ref = {"dense": np.zeros((nq, n)), "sparse": np.zeros((nq, n)), "colbert": np.zeros((nq, n))}
    for i in range(nq):
        q = flag[i]
        for r in range(n):
            p = flag[nq + r]
            ref["dense"][i, r] = float(q["dense_vecs"] @ p["dense_vecs"])
            ref["sparse"][i, r] = float(e5_flag.compute_lexical_matching_score(q["lexical_weights"],
                                                                               p["lexical_weights"]))
            ref["colbert"][i, r] = float(e5_flag.colbert_score(q["colbert_vecs"], p["colbert_vecs"]))
    agreement = {}
    for mode in SCORE_MODES:
        got, want = [], []
        for i in range(nq):
            scores = hybrid_score(mode, ref["dense"][i], ref["sparse"][i], ref["colbert"][i])
            rows = [r for r in range(n) if mode != "sparse" or set(flag[i]["lexical_weights"]) & set(
                flag[nq + r]["lexical_weights"])]
            want.append(sorted(rows, key=lambda r: (-scores[r], r))[:k])
            got.append([h.row for h in index.search(e5_sets["ours"][i], k, mode)])
        agreement[mode] = _agreement(got, want)
    print("top-10 agreement, int8 bundle vs FlagEmbedding fp32:", agreement)
    for mode, floor in AGREEMENT_FLOOR.items():
        assert agreement[mode] >= floor, agreement


@pytest.mark.models
def test_golden_scores_follow_the_contract_bit_for_bit(e5_bundles: dict[str, Path]) -> None:
    """golden.json's scores, recomputed from its cases by the literal contract (what a kit
    writes), are equal to the last bit: the kits' test of the same file cannot pass by luck."""
    golden = json.loads((e5_bundles["int8"] / "golden.json").read_text(encoding="utf-8"))
    cases, scores = golden["cases"], golden["scores"]
    assert len(scores) == 3 * len(cases)
    assert {tuple(s["weights"]) for s in scores} == {(1.0, 1.0, 1.0), (0.4, 0.2, 0.4)}
    for n, s in enumerate(scores):
        q, p = cases[s["query"]], cases[s["passage"]]
        d = _py_dot(np.asarray(q["dense_vecs"], np.float32), np.asarray(p["dense_vecs"], np.float32))
        sp = _py_sparse(q["lexical_weights"], p["lexical_weights"])
        c = s["colbert"]
        if n % 3 == 0:  # the pure-Python ColBERT loop is slow: one pair of each case
            c = _py_colbert(np.asarray(q["colbert_vecs"], np.float32),
                            np.asarray(p["colbert_vecs"], np.float32))
        assert (s["dense"], s["sparse"], s["colbert"]) == (d, sp, c)
        for mode in SCORE_MODES:
            assert s[mode] == hybrid_score(mode, d, sp, c, s["weights"]), mode


def test_near_ties_are_ranked_exactly() -> None:
    """Rows one float32 ulp apart (the fast BLAS pass cannot order them) and exact duplicates
    (ties go to the lower row): dense and colbert hits are still the brute force's, bit for bit."""
    rng = np.random.default_rng(6)
    passages = _passages(rng, 1)
    base = passages[0]
    for i in range(1, 80):
        d = base["dense_vecs"].copy()
        c = base["colbert_vecs"].copy()
        if i % 2:
            j = int(rng.integers(len(d)))
            d[j] = np.nextafter(d[j], np.float32(2) if i % 4 == 1 else np.float32(-2))
            c[0, j] = np.nextafter(c[0, j], np.float32(2))
        passages.append({"dense_vecs": d, "lexical_weights": dict(base["lexical_weights"]), "colbert_vecs": c})
    for dense, colbert in (("float32", "fp16"), ("int8", "int8")):
        index = Index(24, dense, colbert)
        index.add(passages)
        q = {"dense_vecs": base["dense_vecs"], "lexical_weights": base["lexical_weights"],
             "colbert_vecs": base["colbert_vecs"][:3]}
        for mode in ("dense", "colbert", "colbert+sparse+dense"):
            assert [(h.row, h.score) for h in index.search(q, 10, mode)] == _brute(index, q, passages, mode, 10)

"""The kits' retrieval (Retrieval.kt/.swift, EdgeM3Index.kt/.swift) against Python's, bit for bit.

Both kits run as command-line tools (android_assets/jvm/RetrievalCheck.kt, ios_assets/Sources/
EdgeM3Retrieval) on files this test writes with every float as the hex of its bits, and answer
the same way, so each score and hit is compared exactly: golden scores, scores of real-weights
vectors (also against FlagEmbedding's own functions, to float rounding), Hypothesis-drawn
vectors and weights, and search over indexes the Python side builds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_m3.errors import EdgeM3Error
from edge_m3.retrieval import compute_score
from edge_m3.retrieval.index import Index
from edge_m3.retrieval.index_folder import CorruptIndexError
from edge_m3.spec import (
    COLBERT_VECS,
    DEFAULT_MODE_WEIGHTS,
    DENSE_VECS,
    GOLDEN,
    INDEX_MANIFEST,
    LEXICAL_WEIGHTS,
    SCORE_MODES,
)
from tools.kit import retrieval_wire as wire

KITS = ("kotlin", "swift")
# compute_score's default and two other weight sets (one with a zero weight).
WEIGHT_SETS = (DEFAULT_MODE_WEIGHTS, (0.4, 0.2, 0.4), (1.0, 0.0, 0.3))

Vectors = Mapping[str, Any]


@pytest.fixture(scope="session")
def kit_run(request: pytest.FixtureRequest) -> Callable[[str, Sequence[str]], subprocess.CompletedProcess[str]]:
    """run(kit, args): one kit's retrieval tool (builds it on first use: kit_jar / swift_build)."""
    tools: dict[str, list[str]] = {}

    def run(kit: str, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        if kit not in tools:
            if kit == "kotlin":
                jar = request.getfixturevalue("kit_jar")
                tools[kit] = ["java", "-cp", str(jar), wire.KOTLIN_MAIN]
            else:
                tools[kit] = [str(request.getfixturevalue("swift_build") / "release" / wire.SWIFT_PRODUCT)]
        return subprocess.run([*tools[kit], *args], capture_output=True, text=True, timeout=300)

    return run


def _kit_scores(kit_run: Callable[..., subprocess.CompletedProcess[str]], kit: str, tmp: Path,
                pairs: Sequence[tuple[Vectors, Vectors]], weights: Sequence[Sequence[float]]) -> dict:
    path = tmp / f"cases-{kit}.txt"
    path.write_text(wire.cases(pairs, weights), encoding="ascii")
    proc = kit_run(kit, ["score", str(path)])
    assert proc.returncode == 0, proc.stderr
    return wire.parse_scores(proc.stdout)


def _py_scores(pairs: Sequence[tuple[Vectors, Vectors]], weights: Sequence[Sequence[float]]) -> dict:
    """Python's answer in the kits' form: (pair, set, mode) -> float64 bits, or "error"."""
    want = {}
    for i, (q, p) in enumerate(pairs):
        for k, w in enumerate(weights):
            for mode in SCORE_MODES:
                try:
                    want[i, k, mode] = wire.h64(compute_score(q, p, w, (mode,))[mode])
                except EdgeM3Error:
                    want[i, k, mode] = "error"
    return want


def _outputs(case: Mapping[str, Any]) -> dict[str, Any]:
    return {k: case[k] for k in (DENSE_VECS, LEXICAL_WEIGHTS, COLBERT_VECS)}


# ---- (a) golden.json's scores ------------------------------------------------------------------

@pytest.mark.parametrize("kit", KITS)
def test_golden_scores_bit_for_bit(kit: str, kit_run: Callable[..., Any], tiny_bundle: Path,
                                   tmp_path: Path) -> None:
    """Every score golden.json carries, recomputed by the kit from the cases' fields, is the same float64."""
    golden = json.loads((tiny_bundle / GOLDEN).read_text(encoding="utf-8"))
    entries = golden["scores"]
    assert entries, "golden.json has no scores"
    cases = [_outputs(c) for c in golden["cases"]]
    pairs = [(cases[e["query"]], cases[e["passage"]]) for e in entries]
    got = {}
    # one kit run per weight set in golden.json (the entries name theirs)
    for w in sorted({tuple(e["weights"]) for e in entries}):
        at = [i for i, e in enumerate(entries) if tuple(e["weights"]) == w]
        scores = _kit_scores(kit_run, kit, tmp_path, [pairs[i] for i in at], [w])
        got.update({(at[i], mode): bits for (i, _, mode), bits in scores.items()})
    checked = 0
    for i, e in enumerate(entries):
        for mode in (m for m in SCORE_MODES if m in e):  # a bundle without a head has fewer modes
            assert got[i, mode] == wire.h64(e[mode]), (i, mode, got[i, mode], e[mode])
            checked += 1
    assert checked == len(entries) * len(SCORE_MODES)  # the kit bundle has every head


# ---- (b) real-weights vectors: the kits == Python bit for bit, == FlagEmbedding to float32 rounding --

TEXTS = ("What is the capital of France?", "Paris is the capital and largest city of France.",
         "The Eiffel Tower is in Paris.", "Berlin ist die Hauptstadt Deutschlands.",
         "北京是中国的首都。", "A recipe for bread: flour, water, salt and yeast.")


@pytest.fixture(scope="module")
def e5_outputs(e5_bundles: dict[str, Path]) -> list[dict[str, Any]]:
    """The real-weights int8 bundle's outputs for TEXTS, through the device pipeline."""
    from edge_m3.bundle import load_bundle
    from edge_m3.runtime.pipeline import DevicePipeline
    from edge_m3.runtime.registry import RUNTIMES

    pipe = DevicePipeline(load_bundle(e5_bundles["int8"]), RUNTIMES["litert"], threads=1)
    return [pipe.embed(t) for t in TEXTS]


@pytest.mark.parametrize("kit", KITS)
def test_real_vectors_match_python_and_flagembedding(kit: str, kit_run: Callable[..., Any], e5_outputs: list,
                                                     flag_model_class: type, tmp_path: Path) -> None:
    """Every (query, passage) pair of real outputs, three weight sets: the kit's five scores are
    Python's bits, and FlagEmbedding's own functions fed the same vectors agree to float32 rounding."""
    outs = [_outputs(o) for o in e5_outputs]
    pairs = [(q, p) for q in outs for p in outs]
    got = _kit_scores(kit_run, kit, tmp_path, pairs, WEIGHT_SETS)
    assert got == _py_scores(pairs, WEIGHT_SETS)
    flag = flag_model_class
    for i, (q, p) in enumerate(pairs):
        ref = {"dense": float(np.asarray(q[DENSE_VECS], np.float32) @ np.asarray(p[DENSE_VECS], np.float32)),
               "sparse": float(flag.compute_lexical_matching_score(None, q[LEXICAL_WEIGHTS],
                                                                   p[LEXICAL_WEIGHTS])),
               "colbert": float(flag.colbert_score(None, np.asarray(q[COLBERT_VECS], np.float32),
                                                   np.asarray(p[COLBERT_VECS], np.float32)))}
        for k, (wd, ws, wc) in enumerate(WEIGHT_SETS):
            ref_k = dict(ref, **{"sparse+dense": (ref["sparse"] * ws + ref["dense"] * wd) / (ws + wd),
                                 "colbert+sparse+dense": (ref["colbert"] * wc + ref["sparse"] * ws
                                                          + ref["dense"] * wd) / (wd + ws + wc)})
            for mode in SCORE_MODES:
                value = wire.f64(got[i, k, mode])
                assert value == pytest.approx(ref_k[mode], rel=1e-5, abs=1e-6), (i, k, mode)


# ---- (b) Hypothesis: drawn vectors and weights ----------------------------------------------------

_f32 = (st.floats(-2.0, 2.0, width=32, allow_subnormal=True)
        | st.sampled_from([0.0, -0.0, 2.0 ** -100, -(2.0 ** -140), 1.0]))
_w32 = st.floats(2.0 ** -100, 4.0, width=32, allow_subnormal=False)
_weight = st.sampled_from([0.0, 1.0, 0.5, 1e-300, 3.0]) | st.floats(0.0, 10.0)


@st.composite
def _pair(draw: st.DrawFn) -> tuple[dict, dict]:
    d = draw(st.integers(1, 12))

    def side() -> dict:
        return {DENSE_VECS: draw(st.lists(_f32, min_size=d, max_size=d)),
                LEXICAL_WEIGHTS: draw(st.dictionaries(st.integers(0, 40).map(str), _w32, max_size=12)),
                COLBERT_VECS: np.asarray(draw(st.lists(st.lists(_f32, min_size=d, max_size=d), max_size=5)),
                                         np.float32).reshape(-1, d)}

    return side(), side()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pairs=st.lists(_pair(), min_size=1, max_size=12),
       weights=st.lists(st.tuples(_weight, _weight, _weight), min_size=1, max_size=3))
def test_drawn_vectors_bit_for_bit(pairs: list, weights: list, kit_run: Callable[..., Any],
                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    """Drawn float32 vectors (zeros, -0.0, subnormals, no shared token, no ColBERT row) and weights
    (zeros, sums of 0: an error in every implementation): both kits give Python's bits."""
    tmp = tmp_path_factory.mktemp("drawn")
    want = _py_scores(pairs, weights)
    for kit in KITS:
        assert _kit_scores(kit_run, kit, tmp, pairs, weights) == want, kit


# ---- (c) search over indexes the Python side writes ----------------------------------------------

def _unit(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x / np.where(n > 0, n, 1)).astype(np.float32)


def _drawn_outputs(rng: np.random.Generator, n: int, dim: int, vocab: int = 50) -> list[dict[str, Any]]:
    """Passages like the pipeline's: unit dense and ColBERT rows (0-5 of them), 0-7 lexical tokens;
    every 7th a copy of an earlier one, so equal scores exercise the row tie-break."""
    outs: list[dict[str, Any]] = []
    for i in range(n):
        if i % 7 == 6:
            outs.append(outs[int(rng.integers(0, i))])
            continue
        toks = rng.choice(vocab, int(rng.integers(0, 8)), replace=False)
        outs.append({DENSE_VECS: _unit(rng.standard_normal(dim)),
                     LEXICAL_WEIGHTS: {str(int(t)): float(np.float32(rng.uniform(0.01, 0.4))) for t in toks},
                     COLBERT_VECS: _unit(rng.standard_normal((int(rng.integers(0, 6)), dim)))})
    return outs


def _queries(rng: np.random.Generator, passages: Sequence[Mapping[str, Any]], dim: int) -> list[dict[str, Any]]:
    """Drawn queries, a passage as its own query, one whose tokens the index lacks, one with none."""
    qs = _drawn_outputs(rng, 4, dim)
    if passages:
        qs.append(dict(passages[3 % len(passages)]))
    qs.append(dict(qs[0], **{LEXICAL_WEIGHTS: {"100001": 0.3, "100002": 0.2}}))
    qs.append(dict(qs[1], **{LEXICAL_WEIGHTS: {}, COLBERT_VECS: np.zeros((0, dim), np.float32)}))
    return qs


def _plan(ks: Sequence[int], weights: Sequence[Sequence[float]]) -> list[tuple[int, str, Sequence[float]]]:
    return [(k, mode, w) for k in ks for mode in SCORE_MODES for w in weights]


def _py_search(index: Index, queries: Sequence[Mapping[str, Any]], plan: Sequence[tuple]) -> list[str]:
    """Python's hits in the kits' form, one line per plan line and query."""
    lines = []
    for j, (k, mode, w) in enumerate(plan):
        for i, q in enumerate(queries):
            try:
                hits = " ".join(f"{h.row}:{wire.h64(h.score)}" for h in index.search(q, k, mode, w))
                lines.append(f"{j} {i} {hits}".rstrip())
            except EdgeM3Error:
                lines.append(f"{j} {i} error")
    return lines


def _kit_search(kit_run: Callable[..., Any], kit: str, index: Path, queries: Sequence[Mapping[str, Any]],
                plan: Sequence[tuple], tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    qf, pf = tmp / "queries.txt", tmp / "plan.txt"
    qf.write_text(wire.queries(queries), encoding="ascii")
    pf.write_text(wire.plan(plan), encoding="ascii")
    return kit_run(kit, ["search", str(index), str(qf), str(pf), *extra])


DIM = 16
STORES = (("float32", "fp16"), ("int8", "int8"), ("float32", "none"))


@pytest.fixture(scope="module")
def drawn_indexes(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], tuple[Index, Path]]:
    """Python-written indexes of 230 drawn passages (more than HYBRID_CANDIDATES, so hybrid search
    really selects candidates) per store, and an empty one; each loaded back as a kit reads it."""
    rng = np.random.default_rng(25)
    passages = _drawn_outputs(rng, 230, DIM)
    root = tmp_path_factory.mktemp("indexes")
    out = {}
    for dense, colbert in (*STORES, ("empty", "fp16")):
        idx = Index(DIM, dense="float32" if dense == "empty" else dense, colbert=colbert)
        if dense != "empty":
            idx.add(passages)
        path = idx.save(root / f"{dense}-{colbert}")
        out[dense, colbert] = (Index.load(path), path)
    out["passages"] = passages  # type: ignore[index]
    return out


@pytest.mark.parametrize("kit", KITS)
@pytest.mark.parametrize("store", [*STORES, ("empty", "fp16")], ids=lambda s: "-".join(s))
def test_search_same_hits_as_python(kit: str, store: tuple[str, str], kit_run: Callable[..., Any],
                                    drawn_indexes: dict, tmp_path: Path) -> None:
    """Every mode, k of 1, 10, over HYBRID_CANDIDATES and over the index size, two weight sets:
    the kit's hits (rows, order, float64 score bits) are Python's. Covers the query with no token
    in the index (sparse: no hits), ties between copied passages, an index without ColBERT vectors
    (those modes are errors in both) and the empty index (no hits)."""
    index, path = drawn_indexes[store]
    queries = _queries(np.random.default_rng(7), drawn_indexes["passages"], DIM)
    plan = _plan((1, 10, 130, 300), (DEFAULT_MODE_WEIGHTS, (0.4, 0.2, 0.4)))
    plan.append((0, "dense", DEFAULT_MODE_WEIGHTS))
    proc = _kit_search(kit_run, kit, path, queries, plan, tmp_path)
    assert proc.returncode == 0, proc.stderr
    want = _py_search(index, queries, plan)
    assert proc.stdout.splitlines() == want
    # the plan reaches what it means to: k = 0 refused, no-token sparse queries hit nothing,
    # more hits than HYBRID_CANDIDATES (rows beyond the candidates), ColBERT modes refused without vectors
    assert all(x.endswith(" error") for x in want[-len(queries):])
    sparse_no_token = plan.index((10, "sparse", DEFAULT_MODE_WEIGHTS)) * len(queries) + len(queries) - 2
    assert want[sparse_no_token].split() == want[sparse_no_token].split()[:2]
    if store[0] != "empty":
        assert max(len(x.split()) for x in want) - 2 > 130
        assert any(x.endswith(" error") for x in want[:-len(queries)]) == (store[1] == "none")


# ---- (c) an index `edge-m3 index` writes from the real-weights bundle; refusals ----------------

CORPUS = TEXTS + ("Madrid is the capital of Spain.", "Bread needs flour.", "The Louvre is a museum in Paris.",
                  "Die Mauer fiel 1989.", "上海是中国最大的城市。", "")


@pytest.fixture(scope="module")
def e5_index(e5_bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`edge-m3 index` of CORPUS with the real-weights int8 bundle (int8 dense, int8 ColBERT)."""
    from edge_m3.cli import main

    root = tmp_path_factory.mktemp("e5_index")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    assert main(["index", str(e5_bundles["int8"]), str(corpus), "--out", str(root / "index"), "--dense", "int8",
                 "--colbert", "int8", "-q"]) == 0
    return root / "index"


@pytest.mark.parametrize("kit", KITS)
def test_cli_index_same_hits_and_bundle_check(kit: str, kit_run: Callable[..., Any], e5_index: Path,
                                              e5_bundles: dict[str, Path], e5_outputs: list, tiny_bundle: Path,
                                              tmp_path: Path) -> None:
    """Real queries on the CLI's index, with the bundle that built it: Python's hits; with
    another bundle: refused in one line, as Python refuses it."""
    from edge_m3.bundle import load_bundle

    bundle = e5_bundles["int8"]
    index = Index.load(e5_index, bundle=load_bundle(bundle))
    queries = [_outputs(o) for o in e5_outputs]
    plan = _plan((3, 20), (DEFAULT_MODE_WEIGHTS,))
    proc = _kit_search(kit_run, kit, e5_index, queries, plan, tmp_path, "--bundle", str(bundle))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == _py_search(index, queries, plan)
    with pytest.raises(EdgeM3Error, match="another bundle") as err:
        Index.load(e5_index, bundle=load_bundle(tiny_bundle))
    assert not isinstance(err.value, CorruptIndexError)  # the caller's bundle, not the index's files
    proc = _kit_search(kit_run, kit, e5_index, queries, plan, tmp_path, "--bundle", str(tiny_bundle))
    assert proc.returncode == 2 and "another bundle" in proc.stderr, proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr


def _flip(path: Path, at: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("kit", KITS)
@pytest.mark.parametrize("damage", ["flipped byte", "truncated", "missing file", "format version", "bad json"])
def test_corrupt_index_refused(kit: str, damage: str, kit_run: Callable[..., Any], drawn_indexes: dict,
                               tmp_path: Path) -> None:
    """A modified index folder: the kit refuses it in one line naming the file (exit 2), as Python does."""
    src = drawn_indexes["float32", "fp16"][1]
    bad = tmp_path / "index"
    shutil.copytree(src, bad)
    name = {"flipped byte": "sparse_weights.bin", "truncated": "dense.bin", "missing file": "colbert.bin",
            "format version": INDEX_MANIFEST, "bad json": INDEX_MANIFEST}[damage]
    f = bad / name
    if damage == "flipped byte":
        _flip(f, 5)
    elif damage == "truncated":
        f.write_bytes(f.read_bytes()[:-4])
    elif damage == "missing file":
        f.unlink()
    elif damage == "format version":
        m = json.loads(f.read_text(encoding="utf-8"))
        m["format_version"] = 2
        f.write_text(json.dumps(m), encoding="utf-8")
    else:
        f.write_text("{", encoding="utf-8")
    with pytest.raises(CorruptIndexError):
        Index.load(bad)
    proc = _kit_search(kit_run, kit, bad, [], [], tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert name in proc.stderr, proc.stderr


# ---- passages of several chunks (docs/index-format.md, "Passages and chunks"): the Swift kit ----

@pytest.mark.parametrize("store", STORES, ids=lambda s: "-".join(s))
def test_swift_chunked_index_same_hits_as_python(store: tuple[str, str], kit_run: Callable[..., Any],
                                                 drawn_indexes: dict, tmp_path: Path) -> None:
    """An index whose rows share ids (a passage's chunks, some scattered over the rows, some ids
    one row, one id of many): EdgeM3Index's passage search (each passage by its best chunk, the
    default) and chunk search give Python's hits, rows, chunk numbers and score bits."""
    passages = drawn_indexes["passages"]
    rng = np.random.default_rng(35)
    ids: list[int | str] = [int(x) for x in rng.integers(0, 70, len(passages))]
    ids[100:130] = ["long"] * 30  # one passage of 30+ chunks: k * P rows run past the index
    ids[5::41] = ["1"] * len(ids[5::41])  # a string id next to the integer 1
    idx = Index(DIM, *store)
    idx.add(passages, ids)
    index = Index.load(idx.save(tmp_path / "chunked"))
    queries = _queries(np.random.default_rng(8), passages, DIM)
    plan = _plan((1, 3, 10, 130), (DEFAULT_MODE_WEIGHTS, (0.4, 0.2, 0.4)))
    plan.append((0, "dense", DEFAULT_MODE_WEIGHTS))
    lines = {}
    for scope in ("passages", "chunks"):
        proc = _kit_search(kit_run, "swift", tmp_path / "chunked", queries, plan, tmp_path, "--scope", scope)
        assert proc.returncode == 0, proc.stderr
        want = wire.scoped_answers(index, queries, plan, chunks=scope == "chunks")
        assert proc.stdout.splitlines() == want, scope
        lines[scope] = want
    # passage hits are each id's best row once; chunk hits repeat ids and carry chunk numbers > 0
    assert lines["passages"] != lines["chunks"]
    assert any(":0:" not in h for x in lines["chunks"] for h in x.split()[2:] if x.count(":") > 1)

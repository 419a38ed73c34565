"""The writable index's costs (issue 35): adding one precomputed passage, hybrid search over a
base with removes and adds on top, compaction, and the database's bytes per passage.

    python -m tools.bench.bench_writable BUNDLE [--sizes 10000,100000] [--removes 1000] [--adds 300]
                                         [--chunks 3]

BUNDLE: a real-weights bundle (e.g. e5-small int8, as tools/bench/bench_search.py). Passages and
queries are bench_search's (real outputs of the bundle, synthesized to N). Per size: a format-1
base of N passages is saved and opened as a WritableIndex; `--removes` random passages are
removed one transaction each, then `--adds` new passages added one transaction each (timed:
p50 wall and thread CPU, no model call); the hybrid modes are searched over the result (every
query, interleaved with the same search on a fresh format-1 build of the survivors, whose hits
must be equal); then compact() is timed. `--chunks P`: then, per size, N rows as N / P passages
of P chunks each (docs/index-format.md, "Passages and chunks"), searched by passage (the default:
k * P rows, the best chunk of each) and by chunk, side by side. BLAS and numpy run on one thread.
`--results docs/results/writable.json` and `--chunk-results docs/results/writable_chunks.json`
also write the two tables for docs/benchmarks.md (tools/bench/results.py).
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from edge_m3.retrieval.compaction import merged  # noqa: E402
from edge_m3.retrieval.writable import WritableIndex  # noqa: E402
from edge_m3.spec import INDEX_DB  # noqa: E402
from tools.bench import results  # noqa: E402
from tools.bench.bench_search import embed_corpus, synthesize  # noqa: E402


def _p50(xs: list[float]) -> str:
    return f"{1e3 * float(np.median(xs)):.3f}"


def _folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bundle", type=Path)
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--removes", type=int, default=1000)
    p.add_argument("--adds", type=int, default=300)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--chunks", type=int, default=0, help="also time passages of this many chunks")
    results.add_option(p, "writable.json")
    p.add_argument("--chunk-results", type=Path, default=None, metavar="FILE",
                   help="also write the --chunks table as a result file (writable_chunks.json)")
    a = p.parse_args()
    load = results.Load()
    figures: dict[str, list[str]] = {}
    chunk_rows: list[list[str]] = []
    sizes = [int(x) for x in a.sizes.split(",")]
    base_out, queries, dim = embed_corpus(a.bundle)
    print(f"cpu: {results.machine()['flags']}")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    work = Path(tempfile.mkdtemp(prefix="bench_writable_"))
    try:
        for n in sizes:
            rng = np.random.default_rng(n)
            folder = work / f"ix{n}"
            synthesize(base_out, n, dim, "fp16").save(folder)
            fmt1 = _folder_bytes(folder)
            extra = synthesize(base_out, a.adds, dim, "fp16", seed=n + 1)
            ea = extra.arrays
            tok = np.repeat(ea["sparse_tokens"], np.diff(ea["sparse_offsets"]))
            extra_outs = []  # the extra passages' outputs, as a pipeline gives them
            for r in range(a.adds):
                lo, hi = int(ea["colbert_offsets"][r]), int(ea["colbert_offsets"][r + 1])
                mine = ea["sparse_rows"] == r
                pairs = zip(tok[mine], ea["sparse_weights"][mine], strict=True)
                lex = {str(int(t)): float(x) for t, x in pairs}
                extra_outs.append({"dense_vecs": np.asarray(ea["dense"][r]), "lexical_weights": lex,
                                   "colbert_vecs": np.asarray(ea["colbert"][lo:hi], np.float32)})
            w = WritableIndex.open(folder)
            gone = rng.choice(n, a.removes, replace=False)
            rm_wall, rm_cpu = [], []
            for pid in gone:
                t, c = time.perf_counter(), time.thread_time()
                w.remove(int(pid))
                rm_cpu.append(time.thread_time() - c)
                rm_wall.append(time.perf_counter() - t)
            add_wall, add_cpu = [], []
            for i, out in enumerate(extra_outs):
                t, c = time.perf_counter(), time.thread_time()
                w.add(f"new-{i}", out)
                add_cpu.append(time.thread_time() - c)
                add_wall.append(time.perf_counter() - t)
            wal = Path(f"{folder / INDEX_DB}-wal")
            wal_bytes = wal.stat().st_size if wal.exists() else 0
            w.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # what the database file holds
            db = (folder / INDEX_DB).stat().st_size
            print(f"\n## {n} passages, {a.removes} removed, {a.adds} added (one transaction each)")
            print(f"remove p50 wall / cpu (ms): {_p50(rm_wall)} / {_p50(rm_cpu)}")
            print(f"add one precomputed passage p50 wall / cpu (ms): {_p50(add_wall)} / {_p50(add_cpu)}")
            print(f"database after a checkpoint: {db} bytes for {a.adds} passages and {a.removes} tombstones "
                  f"({db / a.adds:.0f} per added passage, tombstones included; the WAL held {wal_bytes} "
                  f"before); format 1: {fmt1 / n:.0f} bytes per passage")
            for label, value in (("add one precomputed passage, p50 wall / CPU (ms)",
                                  f"{_p50(add_wall)} / {_p50(add_cpu)}"),
                                 ("remove one passage, p50 wall / CPU (ms)",
                                  f"{_p50(rm_wall)} / {_p50(rm_cpu)}"),
                                 ("database bytes per added passage (checkpointed; tombstones included)",
                                  f"{db / a.adds:,.0f}"),
                                 ("format 1 bytes per passage (all files)", f"{fmt1 / n:,.0f}")):
                figures.setdefault(label, []).append(value)
            fresh = merged(w)
            w.search(queries[0], 10, "sparse+dense")
            fresh.search(queries[0], 10, "sparse+dense")
            for mode in ("sparse+dense", "colbert+sparse+dense", "dense"):
                ws, wc, fs, fc = [], [], [], []
                for _ in range(a.repeats):
                    for q in queries:
                        t, c = time.perf_counter(), time.thread_time()
                        hits = w.search(q, 10, mode)
                        wc.append(time.thread_time() - c)
                        ws.append(time.perf_counter() - t)
                        t, c = time.perf_counter(), time.thread_time()
                        ref = fresh.search(q, 10, mode)
                        fc.append(time.thread_time() - c)
                        fs.append(time.perf_counter() - t)
                        assert [(h.id, h.score) for h in hits] == [(h.id, h.score) for h in ref], mode
                print(f"search {mode} p50 wall / cpu (ms): writable {_p50(ws)} / {_p50(wc)}; fresh format-1 "
                      f"build of the survivors {_p50(fs)} / {_p50(fc)} (same hits and scores)")
                figures.setdefault(f"search {mode}, p50 CPU (ms): writable / fresh build", []).append(
                    f"{_p50(wc)} / {_p50(fc)}")
            t, c = time.perf_counter(), time.process_time()
            w.compact()
            wall, proc = time.perf_counter() - t, time.process_time() - c
            print(f"compact: {wall:.2f} s wall, {proc:.2f} s cpu; {len(w)} passages in {w.base_name}")
            figures.setdefault("compact() wall / CPU (s)", []).append(f"{wall:.2f} / {proc:.2f}")
            w.close()
            shutil.rmtree(folder)
            if a.chunks > 1:
                chunk_rows += _chunked(base_out, queries, dim, n, a.chunks, a.repeats)
            print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    how = (f"{a.removes:,} removes, then {a.adds} adds, one transaction each; every query searched on the "
           "writable index and on a fresh format-1 build of the survivors: the same hits and scores")
    if a.results:
        results.write_result(a.results, title=f"The writable index, {a.bundle.name} passages",
                             module="tools.bench.bench_writable",
                             columns=["figure", *[f"{n:,}" for n in sizes]],
                             rows=[[k, *v] for k, v in figures.items()], notes=[how + "."], load=load)
    if a.chunk_results and chunk_rows:
        results.write_result(a.chunk_results, title=f"Passages of {a.chunks} chunks: by passage and by chunk",
                             module="tools.bench.bench_writable",
                             columns=["rows (passages)", "mode", "by passage, p50 CPU (ms)",
                                      "by chunk, p50 CPU (ms)", "ratio"], rows=chunk_rows, load=load)


def _chunked(base_out: list, queries: list, dim: int, n: int, chunks: int, repeats: int) -> list[list[str]]:
    """N rows as N / chunks passages: search by passage (k * P rows) beside search by chunk; the
    table's rows."""
    rows = []
    idx = synthesize(base_out, n, dim, "fp16")
    idx.ids = [r // chunks for r in range(n)]
    idx._chunks = None
    print(f"\n## {n} rows as {n // chunks} passages of {chunks} chunks (format 1)")
    for mode in ("dense", "sparse+dense", "colbert+sparse+dense"):
        cpu: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(repeats):
            for q in queries:
                for by_chunk in (False, True):
                    c = time.thread_time()
                    idx.search(q, 10, mode, chunks=by_chunk)
                    cpu[by_chunk].append(time.thread_time() - c)
        ratio = f"{np.median(cpu[False]) / np.median(cpu[True]):.2f}"
        print(f"search {mode} p50 cpu (ms): by passage {_p50(cpu[False])}, by chunk {_p50(cpu[True])} "
              f"(ratio {ratio})")
        rows.append([f"{n:,} ({n // chunks:,})", mode, _p50(cpu[False]), _p50(cpu[True]), ratio])
    return rows


if __name__ == "__main__":
    main()

"""Kill a writer of the writable index at random moments and check what survives (issue 35).

    python -m tools.bench.writable_kills [--passages 10000] [--kills 50] [--batch 10] [--seed 0]

A child process adds passages in transactions of `--batch` (with removes every 7 batches and a
compaction every 11), printing each commit; the parent lets a random number of commits through,
SIGKILLs it at a random moment, and checks that the index opens, holds exactly a committed
prefix of the writes, and searches (dense, sparse+dense, colbert+sparse+dense) as a fresh
format-1 build of that prefix; then restarts the writer, which resumes where the commits end.
tests/test_writable.py runs a short version; the figures of the long one are in
docs/benchmarks.md, "Index size and search latency" (`--results docs/results/writable_kills.json`,
tools/bench/results.py).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.retrieval.index import Index
from edge_m3.retrieval.writable import WritableIndex
from tools.bench.results import Load, add_option, write_result

DIM = 16


def passage(seed: int, dim: int = DIM, vocab: int = 30) -> dict[str, Any]:
    """Pipeline-like outputs from a seed: unit dense, 0..6 lexical weights, 1..6 unit ColBERT vectors."""
    rng = np.random.default_rng(seed)
    d = rng.standard_normal(dim).astype(np.float32)
    toks = rng.choice(vocab, size=int(rng.integers(0, 7)), replace=False)
    col = rng.standard_normal((int(rng.integers(1, 7)), dim)).astype(np.float32)
    return {"dense_vecs": d / np.linalg.norm(d),
            "lexical_weights": {str(int(t)): float(np.float32(rng.random() + 1e-3)) for t in toks},
            "colbert_vecs": col / np.linalg.norm(col, axis=1, keepdims=True)}


def fresh(survivors: dict[Any, dict[str, Any]], dense: str, colbert: str) -> Index:
    """A format-1 index built from these passages, in this order (what a writable index must equal);
    a passage given as a list of outputs is its chunks, one row each."""
    idx = Index(DIM, dense, colbert)
    rows = [(pid, c) for pid, v in survivors.items() for c in ([v] if isinstance(v, dict) else v)]
    if rows:
        idx.add([c for _, c in rows], [pid for pid, _ in rows])
    idx.freeze()
    return idx


_WRITER = r"""
import sys, json
import numpy as np
sys.path.insert(0, {root!r})
from tools.bench.writable_kills import passage, DIM
from edge_m3.retrieval.writable import WritableIndex
folder, n, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
w = WritableIndex.open(folder) if (__import__("pathlib").Path(folder) / "index.sqlite").exists() \
    else WritableIndex.create(folder, DIM, "int8", "fp16")
i = max((p for p in w.ids() if isinstance(p, int)), default=-1) + 1  # batches are atomic
if i and i % (batch * 7) == 0 and w.contains(i - batch * 7):  # killed between a batch and its removes
    w.remove_many(list(range(i - batch * 7, i - batch * 7 + 3)))
while i < n:
    w.add_many([(j, passage(j)) for j in range(i, min(n, i + batch))])
    i = min(n, i + batch)
    print(i, flush=True)   # committed
    if i % (batch * 7) == 0:
        w.remove_many(list(range(i - batch * 7, i - batch * 7 + 3)))
        print("r", i, flush=True)
    if i % (batch * 11) == 0:
        w.compact()
        print("c", i, flush=True)
"""


def survivors_after(n: int, batch: int, last_removes: bool = True) -> dict[int, dict[str, Any]]:
    """The passages after the writer committed its batches up to id n (and, unless
    `last_removes` is False, the removes that follow the last batch: a separate transaction)."""
    live = {}
    i = 0
    while i < n:
        for j in range(i, min(n, i + batch)):
            live[j] = passage(j)
        i = min(n, i + batch)
        if i % (batch * 7) == 0 and (last_removes or i < n):
            for j in range(i - batch * 7, i - batch * 7 + 3):
                del live[j]
    return live


def kill_loop(folder: Path, n: int, batch: int, kills: int, seed: int) -> tuple[int, int]:
    """Run the writer, SIGKILL it at random moments `kills` times, and after each kill check the
    index holds exactly a committed prefix of the writes and searches as a fresh build of it.
    Returns the number of kills that landed before the writer finished, and of those inside a
    compaction."""
    rng = np.random.default_rng(seed)
    root = str(Path(__file__).resolve().parents[2])
    script = folder.parent / "writer.py"
    script.write_text(_WRITER.format(root=root))
    landed = in_compaction = 0
    for _ in range(kills):
        proc = subprocess.Popen([sys.executable, str(script), str(folder), str(n), str(batch)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        # commits to let through (about n in all over the kills), then kill at a random moment
        lines = int(rng.integers(1, max(3, 2 * n // batch // kills)))
        for _ in range(lines):
            if not proc.stdout.readline():
                break
        time.sleep(float(rng.uniform(0, 0.004)))
        if proc.poll() is None:
            proc.kill()
            landed += 1
        proc.wait()
        proc.stdout.close()
        in_compaction += check_prefix(folder, n, batch)
    return landed, in_compaction


def check_prefix(folder: Path, n: int, batch: int) -> bool:
    """Check the index after a kill; True when the kill landed inside a compaction (a new base
    written but not yet swapped in, or swapped in with the old one not yet deleted)."""
    bases = {p.name for p in folder.glob("base-*")} | {p.name for p in folder.glob(".base-*")}
    w = WritableIndex.open(folder)
    got = w.ids()
    done = max((i for i in got if isinstance(i, int)), default=-1) + 1
    want = survivors_after(done, batch)
    if got != list(want):  # killed between a batch's commit and its removes' commit
        want = survivors_after(done, batch, last_removes=False)
    assert got == list(want), f"not a committed prefix ({len(got)} ids, {len(want)} committed)"
    q = passage(424242)
    f = fresh(want, "int8", "fp16")
    for mode in ("dense", "sparse+dense", "colbert+sparse+dense"):
        assert w.search(q, 5, mode) == f.search(q, 5, mode)
    w.close()
    return bool(bases - {w.base_name}) or (w.base_name != "." and (folder / "index.json").exists())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--passages", type=int, default=10_000)
    p.add_argument("--kills", type=int, default=50)
    p.add_argument("--batch", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dir", type=Path, default=Path("/tmp/edge_m3_kills"))
    add_option(p, "writable_kills.json")
    a = p.parse_args()
    load = Load()
    import shutil

    shutil.rmtree(a.dir, ignore_errors=True)
    a.dir.mkdir(parents=True)
    t0 = time.perf_counter()
    landed, in_compaction = kill_loop(a.dir / "ix", a.passages, a.batch, a.kills, a.seed)
    w = WritableIndex.open(a.dir / "ix")
    at_end = len(w)
    w.close()
    proc = subprocess.run([sys.executable, str(a.dir / "writer.py"), str(a.dir / "ix"), str(a.passages),
                           str(a.batch)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    check_prefix(a.dir / "ix", a.passages, a.batch)
    w = WritableIndex.open(a.dir / "ix")
    w.compact()  # collects every leftover of the kills
    w.close()
    left = sorted(p.name for p in (a.dir / "ix").iterdir())
    assert left == [w.base_name, "index.sqlite"], left
    print(f"{landed} of {a.kills} kills landed mid-write ({in_compaction} inside a compaction); every one "
          f"left a committed prefix that searched as a fresh build; {at_end} passages after the last kill; "
          f"finished to {a.passages} and checked; a last compaction left {left}; "
          f"{time.perf_counter() - t0:.0f} s")
    if a.results:
        columns = ["kills", "mid-write", "inside a compaction", "passages after the last kill", "finished to",
                   "held a committed prefix and searched as a fresh build", "seconds"]
        row = [f"{a.kills}", f"{landed}", f"{in_compaction}", f"{at_end:,}", f"{a.passages:,}",
               f"{a.kills} of {a.kills}", f"{time.perf_counter() - t0:.0f}"]
        write_result(a.results, title="The writable index under real SIGKILLs",
                     module="tools.bench.writable_kills", columns=columns, rows=[row], load=load,
                     notes=[f"Transactions of {a.batch} passages, removes every 7 batches, a compaction "
                            f"every 11; a last compaction left {left}."])

if __name__ == "__main__":
    main()

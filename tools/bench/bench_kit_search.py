"""Search latency per mode in Python and in each kit's desktop build, side by side (issue 25).

    python -m tools.bench.bench_kit_search BUNDLE [--sizes 10000,100000] [--rounds 3]
        [--colbert-queries 3] [--kits kotlin,swift]

The same index folder (tools.bench.bench_search.synthesize: N passages from the bundle's real
outputs) and the same queries (the retrieval set's, embedded by BUNDLE) go to Python
(`edge_m3.retrieval.Index`), the Kotlin kit on the JVM (android_assets/jvm/RetrievalCheck.kt
`bench`) and the Swift kit (ios_assets `edge-m3-retrieval bench`, release build). Every
implementation runs pinned to one CPU, one search at a time; the rounds interleave them
(Python, Kotlin, Swift, then again), each kit process warming up on one pass per mode first.
Prints p50 per mode and implementation (ms, k=10): wall clock, and the searching thread's CPU
time (what an idle core would take, roughly, on a shared machine). `colbert` scores every
passage, so at sizes over 20k only the first --colbert-queries queries are timed in that mode.
Builds the kits as the tests do (tools/kit/kit_jar.sh; swift build -c release into
build/swift-tests). `--results docs/results/kit_search.json` also writes the table (one row per
mode, a column per size and implementation) for docs/benchmarks.md (tools/bench/results.py).
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from edge_m3.spec import SCORE_MODES  # noqa: E402
from tools.bench import results  # noqa: E402
from tools.bench.bench_search import _embed, synthesize  # noqa: E402
from tools.kit import retrieval_wire as wire  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SWIFT_FLAGS = ("-c", "release", "-Xswiftc", "-enable-testing", "-Xswiftc", "-warnings-as-errors")
CPU = 0  # every implementation on this one CPU


def _kit_tools(kits: list[str]) -> dict[str, list[str]]:
    tools = {}
    if "kotlin" in kits:
        jar = subprocess.run([str(ROOT / "tools/kit/kit_jar.sh")], capture_output=True, text=True,
                             check=True).stdout.strip().splitlines()[-1]
        tools["kotlin"] = ["java", "-XX:+UseSerialGC", "-cp", jar, wire.KOTLIN_MAIN]
    if "swift" in kits:
        scratch = ROOT / "build/swift-tests"
        swift = shutil.which("swift") or "/opt/swift/usr/bin/swift"
        # the tests' flags (tests/conftest.py SWIFT_FLAGS), so both share one incremental build
        subprocess.run([swift, "build", *SWIFT_FLAGS, "--product", wire.SWIFT_PRODUCT, "--package-path",
                        str(ROOT / "ios_assets"), "--scratch-path", str(scratch)], capture_output=True,
                       check=True)
        tools["swift"] = [str(scratch / "release" / wire.SWIFT_PRODUCT)]
    return tools


Times = dict[str, list[tuple[float, float]]]  # mode -> (wall, thread CPU) seconds per search


def _run_kit(cmd: list[str], index: Path, queries: Path, modes: list[str]) -> Times:
    out = subprocess.run(["taskset", "-c", str(CPU), *cmd, "bench", str(index), str(queries), "10",
                          ",".join(modes), "1"], capture_output=True, text=True, check=True).stdout
    times: Times = {}
    for line in out.splitlines()[1:]:
        mode, *secs = line.split()
        times[mode] = [(float(w), float(c)) for w, c in (s.split(":") for s in secs)]
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bundle", type=Path)
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (each: every query once per mode)")
    p.add_argument("--colbert-queries", type=int, default=3,
                   help="queries timed in colbert mode at sizes over 20k (it scores every passage)")
    p.add_argument("--kits", default="kotlin,swift")
    results.add_option(p, "kit_search.json")
    a = p.parse_args()
    load = results.Load()
    columns, cells = ["mode"], {m: [m] for m in SCORE_MODES}
    os.sched_setaffinity(0, {CPU})
    tools = _kit_tools([k for k in a.kits.split(",") if k])
    base, queries, dim = _embed(a.bundle)
    print(f"{len(base)} real passages, {len(queries)} queries, dim {dim}; "
          f"cpu flags: {results.machine()['flags']}")
    print(f"one CPU (taskset {CPU}), k=10, p50 over {a.rounds} interleaved rounds; ms")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in a.sizes.split(",")):
            index = synthesize(base, n, dim, "fp16")
            path = index.save(Path(tmp) / f"index-{n}")
            qfile, cfile = Path(tmp) / "queries.txt", Path(tmp) / "colbert_queries.txt"
            qfile.write_text(wire.queries(queries), encoding="ascii")
            few = queries[:a.colbert_queries] if n > 20000 else queries
            cfile.write_text(wire.queries(few), encoding="ascii")
            impls = ["python", *tools]
            times: dict[str, Times] = {i: {m: [] for m in SCORE_MODES} for i in impls}
            for mode in SCORE_MODES:  # Python's first search caches the norms of its error bounds
                index.search(queries[0], 10, mode)
            for _ in range(a.rounds):
                for qs, modes in ((queries, [m for m in SCORE_MODES if m != "colbert"]), (few, ["colbert"])):
                    for q in qs:
                        for mode in modes:
                            c, t = time.thread_time(), time.perf_counter()
                            index.search(q, 10, mode)
                            times["python"][mode].append((time.perf_counter() - t, time.thread_time() - c))
                for kit, cmd in tools.items():
                    for f, modes in ((qfile, [m for m in SCORE_MODES if m != "colbert"]), (cfile, ["colbert"])):
                        for mode, secs in _run_kit(cmd, path, f, modes).items():
                            times[kit][mode] += secs
            print(f"\n{n} passages, p50 ms wall / CPU of the searching thread:")
            columns += [f"{n:,} {i} (wall / CPU)" for i in impls]
            for mode in SCORE_MODES:
                got = [f"{1e3 * np.median([w for w, _ in times[i][mode]]):.1f} / "
                       f"{1e3 * np.median([c for _, c in times[i][mode]]):.1f}" for i in impls]
                cells[mode] += got
                print(f"  {mode}: " + "; ".join(f"{i} {g}" for i, g in zip(impls, got, strict=True)))
            print(f"  load average {os.getloadavg()[0]:.1f}")
    if a.results:
        results.write_result(
            a.results, title=f"Search latency in Python and the kits, p50 ms, {a.bundle.name} passages",
            module="tools.bench.bench_kit_search", columns=columns, rows=list(cells.values()), load=load,
            notes=[f"k = 10, {a.rounds} interleaved rounds, every implementation pinned to CPU {CPU}; CPU: "
                   "the searching thread's time; colbert over 20k passages: the first "
                   f"{a.colbert_queries} queries."])


if __name__ == "__main__":
    main()

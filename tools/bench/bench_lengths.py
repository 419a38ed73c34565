"""The model step per signature length, alone and with a second process running beside it, and
the padding a set of lengths costs on the bulk benchmark's texts.

    python -m tools.bench.bench_lengths BUNDLE [--runtimes litert,onnxruntime] [--threads 1]
                                        [--texts 2000] [--sets 16,32,64,128,256,512 ...]

Why: it tells where a bulk job's time can still come from. Per-token cost by length says what
batch signatures could save (short calls cost more per token); the padded-token ratio says what
finer lengths save; "side by side" runs two single-threaded copies at once (the bulk job's two
lanes) and gives each one's slowdown against running alone, which is what two vCPUs really give.
`--results docs/results/speed_lengths.json` also writes the table and its plot's series for
docs/benchmarks.md ("Speed by length and runtime"; tools/bench/results.py).
"""

from __future__ import annotations

import argparse
import bisect
import json
import subprocess
import sys
import time

from tools.bench import results

_CHILD = r"""
import json, sys, time
import numpy as np
from edge_m3.bundle import load_bundle
from edge_m3.runtime.registry import RUNTIMES
from edge_m3.runtime.runners import open_runner
bundle, runtime, threads, calls_per_token = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
b = load_bundle(bundle)
rt = RUNTIMES[runtime]
e = b.model_entry(rt.format)
r = open_runner(b.path / e.file, e.signatures, rt, threads)
out = {}
for length in r.seq_lens:
    ids, mask = np.full((1, length), 5, np.int32), np.ones((1, length), np.int32)
    for _ in range(3):
        r.run(ids, mask)
    n = max(5, calls_per_token // length)
    t = time.perf_counter()
    for _ in range(n):
        r.run(ids, mask)
    out[length] = (time.perf_counter() - t) / n * 1000
print(json.dumps(out))
"""


def _measure(bundle: str, runtime: str, threads: int, copies: int, calls: int) -> list[dict[str, float]]:
    """ms per call by length, from `copies` processes started together."""
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, bundle, runtime, str(threads), str(calls)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for _ in range(copies)]
    got = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"{runtime}: the timing child failed (exit {p.returncode})")
        got.append({int(k): v for k, v in json.loads(out.strip().splitlines()[-1]).items()})
    return got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle")
    ap.add_argument("--runtimes", default="litert")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--texts", type=int, default=2000)
    ap.add_argument("--calls", type=int, default=4000, help="about this many tokens timed per length")
    ap.add_argument("--sets", nargs="*", default=["16,32,64,128,256,512",
                                                  "16,24,32,48,64,96,128,192,256,384,512"])
    results.add_option(ap, "speed_lengths.json")
    a = ap.parse_args(argv)
    from edge_m3.bundle import load_bundle
    from tools.bench.bench_throughput import make_texts

    load = results.Load()
    notes: list[str] = []

    b = load_bundle(a.bundle)
    tok = b.tokenizer()
    lengths = [len(tok.encode(t, max_length=b.manifest.max_length)) for t in make_texts(a.texts)]
    print(f"{len(lengths)} texts, {sum(lengths):,} tokens")
    for s in a.sets:
        ls = sorted(int(x) for x in s.split(","))
        padded = sum(ls[min(bisect.bisect_left(ls, n), len(ls) - 1)] for n in lengths)
        print(f"  lengths {s}: padded to {padded:,} tokens ({padded / sum(lengths):.3f}x)")
        notes.append(f"Padding of {len(lengths):,} bulk texts ({sum(lengths):,} tokens) by lengths {s}: "
                     f"{padded:,} tokens ({padded / sum(lengths):.3f}x).")
    cells: dict[int, list[str]] = {}
    series: dict[str, dict[int, float]] = {}
    runtimes = a.runtimes.split(",")
    for runtime in runtimes:
        alone = _measure(a.bundle, runtime, a.threads, 1, a.calls)[0]
        both = _measure(a.bundle, runtime, a.threads, 2, a.calls)
        print(f"{runtime}, {a.threads} thread(s): length: ms a call alone (us a token); side by side, slowdown")
        for length, ms in alone.items():
            pair = max(x[length] for x in both)
            print(f"  {length}: {ms:.2f} ms ({ms / length * 1000:.0f} us); {pair:.2f} ms, {pair / ms:.2f}x")
            cells.setdefault(length, []).extend([f"{ms:.2f} ({ms / length * 1000:.0f})", f"{pair / ms:.2f}x"])
        series[f"{b.manifest.quant} {runtime}"] = alone
    if a.results:
        threads = f"{a.threads} thread{'s' * (a.threads > 1)}"
        results.write_result(
            a.results, title=f"The model step per length, {b.path.name} ({b.manifest.quant}), {threads}",
            module="tools.bench.bench_lengths", argv=argv,
            columns=["length", *[c for rt in runtimes for c in (f"{rt} ms a call (us a token)",
                                                                 f"{rt} side by side")]],
            rows=[[str(n), *c] for n, c in sorted(cells.items())], series=series,
            plot={"x": "tokens", "y": "ms a call"}, load=load,
            notes=["Side by side: two single-threaded copies started together (two bulk lanes), each "
                   "one's time against running alone.", *notes])
    return 0


if __name__ == "__main__":
    t0 = time.perf_counter()
    rc = main()
    print(f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    raise SystemExit(rc)

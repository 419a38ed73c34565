"""Bulk embedding, whole commands timed: `edge-m3 embed --out` vs FlagEmbedding's batched encode,
and on Ray Data with 1 and 2 workers.

    python -m tools.bench.bench_bulk BUNDLE CHECKPOINT [--texts 2000] [--threads 2] [--repeats 2]
                                     [--sides embed,embed-1lane,flag,ray1,ray2,direct]

Every side is one process started from scratch and timed from its start to its exit (imports,
model load, reading, writing included), on the same texts (tools.bench.bench_throughput's:
seeded from edge_m3/data/corpus_multilingual.txt, one to eight lines joined), all three outputs:

- embed: `edge-m3 embed BUNDLE --texts T --out X.parquet --threads N` (N lane processes of one
  thread);
- embed-1lane: the same with `--lanes 1` (one model instance of N threads, in the process);
- embed-alt: `embed` on `--alt-bundle` (the same weights built otherwise, e.g. finer `--seq-lens`);
- embed-json: `edge-m3 embed BUNDLE --texts T` (one text per call, JSON lines to stdout: the
  path before issue 27);
- flag: FlagEmbedding's `BGEM3FlagModel(CHECKPOINT, use_fp16=False).encode(texts, batch_size=32)`
  with torch at N threads, results kept in memory (nothing written);
- ray1, ray2: `embed --engine ray --ray-workers W` on a local Ray started by the command;
- direct: `EmbedBatches` called in one process on the same 256-row Arrow batches Ray hands it
  (no Ray): Ray's overhead per batch is (ray1's execution time - direct's) / batches.

Sides run interleaved (side after side, repeat after repeat) so that a busy machine slows them
alike; the table gives each side's median and its ratio to FlagEmbedding's, by wall time and by
CPU seconds (user + system of the process and the children it waited for: on a machine other
jobs share, CPU seconds are the steadier measure of the work; Ray's own processes are not
counted, so not for the ray sides), and the peak resident memory of the command's process tree
(the lanes' model copies added up; for the ray sides, the Ray processes the command started).
`--results docs/results/bulk.json` (bulk_fullsize.json at full size) also writes the table for
docs/benchmarks.md (tools/bench/results.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.bench.bench_throughput import make_texts
from tools.bench.results import Load, add_option, write_result

SIDES = ("embed", "embed-1lane", "embed-alt", "embed-json", "flag", "ray1", "ray2", "direct")
# What each side is, for the result file's notes (the module's docstring says more).
SIDE_WHAT = {"embed": "embed = `edge-m3 embed --out X.parquet` (lane processes of one thread)",
             "embed-1lane": "embed-1lane = the same with `--lanes 1`",
             "embed-alt": "embed-alt = embed on --alt-bundle",
             "embed-json": "embed-json = JSON lines to stdout",
             "flag": "flag = FlagEmbedding's `encode`, torch fp32",
             "ray1": "ray1 = `--engine ray --ray-workers 1`", "ray2": "ray2 = 2 Ray workers",
             "direct": "direct = EmbedBatches without Ray"}


def _flag_child(checkpoint: str, texts_file: str, threads: int, batch: int, max_length: int) -> None:
    import torch

    torch.set_num_threads(threads)
    from FlagEmbedding import BGEM3FlagModel

    texts = Path(texts_file).read_text("utf-8").split("\n")[:-1]
    model = BGEM3FlagModel(checkpoint, use_fp16=False, devices="cpu")
    model.encode(texts, batch_size=batch, max_length=max_length, return_dense=True,
                 return_sparse=True, return_colbert_vecs=True)


def _direct_child(bundle: str, texts_file: str, threads: int) -> None:
    """EmbedBatches without Ray, on Ray's batches: prints {"seconds", "batches"} of the calls."""
    import pyarrow as pa

    from edge_m3.bulk.ray import BATCH_ROWS, EmbedBatches

    texts = Path(texts_file).read_text("utf-8").split("\n")[:-1]
    table = pa.table({"row": list(range(len(texts))), "id": list(range(len(texts))), "text": texts})
    t0 = time.perf_counter()  # the model load counted, as in a Ray actor's start
    fn = EmbedBatches(bundle, threads=threads)
    n = 0
    for batch in table.to_batches(max_chunksize=BATCH_ROWS):
        fn(pa.Table.from_batches([batch]))
        n += 1
    print(json.dumps({"seconds": time.perf_counter() - t0, "batches": n}))


def _cpu() -> float:
    """CPU seconds (user + system) of the children waited for so far."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(cmd: list[str], env: dict[str, str], keep_stdout: bool = True) -> tuple[float, str, float]:
    """(seconds, output, peak MiB of the process and its children together, sampled every
    0.1 s: the lanes' model copies count)."""
    import psutil

    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out if keep_stdout else subprocess.DEVNULL, stderr=err, env=env)
        peak = 0
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                tree = [root, *root.children(recursive=True)]
                peak = max(peak, sum(p.memory_info().rss for p in tree))
            except psutil.Error:
                pass
            time.sleep(0.1)
        seconds = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        text = err.read().decode("utf-8", "replace") + out.read().decode("utf-8", "replace")
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:6])} ... failed: {text.strip()[-800:]}")
    return seconds, text, peak / 2**20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle", type=Path)
    ap.add_argument("checkpoint")
    ap.add_argument("--texts", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32, help="FlagEmbedding's batch size")
    ap.add_argument("--sides", default="embed,embed-1lane,flag,ray1,ray2,direct")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--alt-bundle", type=Path, help="the bundle of the embed-alt side")
    add_option(ap, "bulk.json")
    a = ap.parse_args(argv)
    load = Load()
    from rich.console import Console
    from rich.table import Table

    from edge_m3.bundle import load_bundle

    sides = [s for s in a.sides.split(",") if s]
    for s in sides:
        if s not in SIDES:
            raise SystemExit(f"--sides {s}: unknown (choose from {', '.join(SIDES)})")
    manifest = load_bundle(a.bundle).manifest
    texts = make_texts(a.texts)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TOKENIZERS_PARALLELISM": "false"}
    py = [sys.executable]
    times: dict[str, list[float]] = {s: [] for s in sides}
    notes: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="edge-m3-bulk-") as tmp:
        tf = Path(tmp) / "texts.txt"
        tf.write_text("".join(t + "\n" for t in texts), "utf-8")
        embed = [*py, "-m", "edge_m3.cli", "embed", str(a.bundle), "--texts", str(tf), "--threads",
                 str(a.threads)]
        for rep in range(a.repeats):
            for side in sides:
                out = Path(tmp) / f"{side}-{rep}.parquet"
                if side == "embed":
                    cmd = [*embed, "--out", str(out)]
                elif side == "embed-alt":
                    if a.alt_bundle is None:
                        raise SystemExit("--sides embed-alt needs --alt-bundle")
                    cmd = [*embed, "--out", str(out)]
                    cmd[cmd.index(str(a.bundle))] = str(a.alt_bundle)
                elif side == "embed-1lane":
                    cmd = [*embed, "--out", str(out), "--lanes", "1"]
                elif side == "embed-json":
                    cmd = embed
                elif side == "flag":
                    cmd = [*py, "-m", "tools.bench.bench_bulk", "--flag-child", a.checkpoint, str(tf),
                           str(a.threads), str(a.batch), str(manifest.max_length)]
                elif side == "direct":
                    cmd = [*py, "-m", "tools.bench.bench_bulk", "--direct-child", str(a.bundle), str(tf), "1"]
                else:
                    workers = int(side[3:])
                    cmd = [*embed, "--out", str(Path(tmp) / f"{side}-{rep}"), "--engine", "ray",
                           "--ray-workers", str(workers)]
                cpu0 = _cpu()
                seconds, text, mib = _run(cmd, env, keep_stdout=side != "embed-json")
                times.setdefault(f"{side}:rss", []).append(mib)
                times.setdefault(f"{side}:cpu", []).append(_cpu() - cpu0)
                times[side].append(seconds)
                m = re.search(r"embedded in ([\d.]+) s", text)
                if m:
                    times.setdefault(f"{side}:inner", []).append(float(m.group(1)))
                if side == "direct":
                    d = json.loads(text.strip().splitlines()[-1])
                    times.setdefault("direct:inner", []).append(d["seconds"])
                    notes["batches"] = str(d["batches"])
                shutil.rmtree(out, ignore_errors=True)
                shutil.rmtree(Path(tmp) / f"{side}-{rep}", ignore_errors=True)
                print(f"repeat {rep + 1}/{a.repeats} {side}: {seconds:.1f} s", file=sys.stderr, flush=True)
    med = {k: statistics.median(v) for k, v in times.items() if v}
    ref = med.get("flag")
    n = len(texts)
    table = Table(title=f"{n:,} texts, {a.threads} threads, dense + sparse + ColBERT, whole command timed "
                        f"(start-up included), median of {a.repeats} interleaved repeats")
    columns = ("side", "seconds (whole)", "texts/s", "vs FlagEmbedding", "inner seconds", "CPU s",
               "vs FlagEmbedding (CPU)", "peak RSS MiB (tree)")
    for col in columns:
        table.add_column(col, justify="left" if col == "side" else "right")
    rows = []
    for side in sides:
        inner = med.get(f"{side}:inner")
        cpu, ref_cpu = med.get(f"{side}:cpu"), med.get("flag:cpu")
        rows.append([side, f"{med[side]:.1f}", f"{n / med[side]:.1f}",
                     f"{ref / med[side]:.2f}x" if ref else "-", f"{inner:.1f}" if inner else "-",
                     f"{cpu:.1f}" if cpu else "-",
                     f"{ref_cpu / cpu:.2f}x" if cpu and ref_cpu and not side.startswith("ray") else "-",
                     f"{max(times[f'{side}:rss']):.0f}"])
        table.add_row(*rows[-1])
    Console(width=140).print(table)
    if a.results:
        write_result(a.results, title=f"Bulk embedding, {a.bundle.name}, {n:,} texts, whole commands",
                     module="tools.bench.bench_bulk", argv=argv, columns=columns, rows=rows, load=load,
                     notes=[f"{a.threads} threads, dense + sparse + ColBERT, each side the whole command "
                            f"(start-up included), median of {a.repeats} interleaved repeats; sides: "
                            + "; ".join(SIDE_WHAT.get(s, s) for s in sides) + "."])
    if "ray1:inner" in med and "direct:inner" in med and "batches" in notes:
        per = (med["ray1:inner"] - med["direct:inner"]) / int(notes["batches"])
        print(f"Ray per-batch overhead (ray1 execution - direct calls) / {notes['batches']} batches: "
              f"{per * 1000:.0f} ms")
    if a.json:
        a.json.write_text(json.dumps({"texts": n, "threads": a.threads, "times": times, "median": med,
                                      "notes": notes}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--flag-child":
        _flag_child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--direct-child":
        _direct_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        raise SystemExit(main())

"""`edge-m3 bench`: latency and memory across runtimes, thread counts and lengths.

One child process per cell, run one after another so timings stay clean; the torch fp32
reference (FlagEmbedding), when asked for, is timed in the same run so ratios compare like
with like.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.common.files import check_writable, write_atomic
from edge_m3.common.options import parse_ints
from edge_m3.errors import EdgeM3Error
from edge_m3.harness.workers import run_worker
from edge_m3.runtime.choice import select_runtimes

# How `bench` runs a runtime that takes an XNNPACK weight cache, each in a process of its own:
# off (no cache: one packed copy per signature), memory (packed once, nothing on disk), cold
# (a new cache file: packed once and written), warm (a second start mapping that file).
CACHE_MODES = ("off", "memory", "cold", "warm")


def cache_modes(value: str) -> list[str]:
    """`--weight-cache`: a comma list of CACHE_MODES (run in that order); warm needs cold."""
    from edge_m3.common.options import parse_choices

    modes = parse_choices(value, "--weight-cache", CACHE_MODES)
    if "warm" in modes and "cold" not in modes:
        raise EdgeM3Error("--weight-cache warm: needs cold too (the cold run writes the file "
                          "that the warm run maps)")
    return modes


def cmd_bench(a: argparse.Namespace) -> int:
    """Latency, first-run cost and memory: runtimes x threads x weight-cache modes x lengths,
    each latency also as a ratio to torch."""
    from edge_m3.bundle import load_bundle
    from edge_m3.contract import IN_MEMORY_WEIGHT_CACHE
    from edge_m3.runtime.runners import NO_CACHE, WEIGHT_CACHE_RUNTIMES

    bundle = load_bundle(a.bundle)
    runtimes = select_runtimes(bundle, a.runtimes, "--runtimes")
    threads = parse_ints(a.threads, "--threads")
    modes = cache_modes(a.weight_cache)
    if a.repeats < 1 or a.warmup < 0:
        raise EdgeM3Error(f"--repeats {a.repeats} / --warmup {a.warmup}: need repeats >= 1, "
                          "warmup >= 0")
    have = bundle.manifest.seq_lens
    lengths = parse_ints(a.lengths, "--lengths") if a.lengths else have
    for n in lengths:
        if not 2 <= n <= max(have):
            raise EdgeM3Error(f"--lengths {n}: need 2..{max(have)} tokens (the bundle has "
                              f"signatures for {have})")
    if a.json:
        check_writable(Path(a.json), "--json", is_file=True)  # before the runs, not after
    ref_dir = None
    if a.reference:
        from edge_m3.checkpoint import resolve_checkpoint

        ref_dir = str(resolve_checkpoint(a.reference, option="--reference")[0])

    rows: list[dict[str, Any]] = []
    common = [",".join(map(str, lengths)), str(a.warmup), str(a.repeats)]
    with tempfile.TemporaryDirectory(prefix="edge-m3-bench-") as tmp_s:
        tmp = Path(tmp_s)
        for th in threads:  # one process per cell, run one after another: timings stay clean
            ref = None
            if ref_dir:
                out = tmp / f"torch-{th}.json"
                run_worker(["bench-torch", ref_dir, str(th), *common, str(out)],
                           f"torch reference ({th} threads)")
                ref = json.loads(out.read_text())
                rows.append(bench_row("torch fp32 (FlagEmbedding)", th, ref, None, lengths))
            for rt in runtimes:
                cache_file = tmp / f"{rt}-{th}.xnnpack_cache"
                cells = {"off": NO_CACHE, "memory": IN_MEMORY_WEIGHT_CACHE, "cold": str(cache_file),
                         "warm": str(cache_file)} if rt in WEIGHT_CACHE_RUNTIMES else {"none": ""}
                for mode, cache in cells.items():
                    if rt in WEIGHT_CACHE_RUNTIMES and mode not in modes:
                        continue
                    out = tmp / f"{rt}-{th}-{mode}.json"
                    run_worker(["bench", str(bundle.path), rt, str(th), *common, str(out),
                                *([cache] if cache else [])], f"bench {rt} ({th} threads, {mode})")
                    rows.append(bench_row(rt, th, json.loads(out.read_text()), ref, lengths)
                                | {"cache_mode": mode})
    result = {"bundle": str(bundle.path), "quant": bundle.manifest.quant,
              "warmup": a.warmup, "repeats": a.repeats, "lengths": lengths,
              "signatures": have, "reference": a.reference, "rows": rows}
    _print_bench(result)
    if a.json:
        write_atomic(Path(a.json), json.dumps(result, indent=1) + "\n", "--json")
    return 0


def bench_row(runtime: str, threads: int, res: Mapping[str, Any], ref: Mapping[str, Any] | None,
               lengths: Sequence[int]) -> dict[str, Any]:
    """One runtime x thread count x cache: p50/p95 per length, load, first result of every
    signature, the model's memory, and ratios to the reference."""
    row: dict[str, Any] = {"runtime": runtime, "version": res.get("version"), "threads": threads,
                           "weight_cache": res.get("weight_cache"),
                           "load_s": res["load_s"], "peak_rss_mb": res["peak_rss"] / 1e6,
                           "rss_before_load_mb": res["rss_before_load"] / 1e6,
                           "first_call_ms": {n: 1e3 * float(v) for n, v in res["first_call"].items()},
                           "lengths": {}}
    if "model_peak_rss" in res:  # the torch reference has no model file to compare with
        first = res["first_call"][min(res["first_call"], key=int)]
        row.update(model_peak_rss_mb=res["model_peak_rss"] / 1e6,
                   model_mb=res["model_bytes"] / 1e6, model_rss_ratio=res["model_rss_ratio"],
                   weight_cache_mb=(res["weight_cache_bytes"] or 0) / 1e6 or None,
                   open_to_first_result_ms=1e3 * (res["load_s"] + float(first)))
    for n in lengths:
        v = res["latency"][str(n)]
        fig = {"p50_ms": 1e3 * float(np.percentile(v, 50)),
               "p95_ms": 1e3 * float(np.percentile(v, 95))}
        if ref is not None:  # speedup: reference time / this runtime's time
            r = ref["latency"][str(n)]
            fig["p50_speedup"] = 1e3 * float(np.percentile(r, 50)) / fig["p50_ms"]
            fig["p95_speedup"] = 1e3 * float(np.percentile(r, 95)) / fig["p95_ms"]
        row["lengths"][str(n)] = fig
    if ref is not None:  # memory: share of the reference's peak (load times are not comparable:
        # TFLite maps the file and packs weights on the first call, see first_call_ms)
        row["peak_rss_ratio"] = res["peak_rss"] / ref["peak_rss"]
    return row


def _print_bench(result: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    lengths = result["lengths"]
    table = Table(title=f"bench {result['bundle']} ({result['quant']}); p50 / p95 ms over "
                        f"{result['repeats']} runs" + ("; (x) = speedup over torch fp32"
                                                       if result["reference"] else "")
                        + "; model RSS = peak over the RSS before opening (x model file)")
    for col in ("runtime", "threads", "weight cache", *[f"{n} tokens" for n in lengths],
                "open to 1st result ms", "1st call per signature ms", "model RSS MB",
                "peak RSS MB"):
        table.add_column(col, justify="left" if col in ("runtime", "weight cache") else "right")

    def ratio(x: float | None) -> str:
        return f" ({x:.2f}x)" if x is not None else ""

    for row in result["rows"]:
        cells = [f"{f['p50_ms']:.2f} / {f['p95_ms']:.2f}{ratio(f.get('p50_speedup'))}"
                 for f in (row["lengths"][str(n)] for n in lengths)]
        model = (f"{row['model_peak_rss_mb']:.0f}{ratio(row['model_rss_ratio'])}"
                 if "model_peak_rss_mb" in row else "")
        first = " ".join(f"{n}:{v:.0f}" for n, v in row["first_call_ms"].items())
        opened = f"{row['open_to_first_result_ms']:.0f}" if "open_to_first_result_ms" in row else ""
        table.add_row(row["runtime"], str(row["threads"]), row.get("cache_mode", ""), *cells,
                      opened, first, model, f"{row['peak_rss_mb']:.0f}")
    console = Console()
    if not console.is_terminal:
        console = Console(width=180)
    console.print(table)

"""`edge-m3 bench`: latency and memory across runtimes, thread counts and lengths.

One child process per cell, run one after another so timings stay clean; the torch fp32
reference (FlagEmbedding), when asked for, is timed in the same run so ratios compare like
with like. With `--json FILE`, a latency-by-length plot (one line per runtime, thread count and
cache mode of the bundle's variant) goes beside it as FILE's stem + `-latency.svg`.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.common.files import check_writable, write_atomic
from edge_m3.device.workers import BenchJob, TorchBenchJob, run_worker, runtime_job, worker
from edge_m3.errors import OptionError
from edge_m3.runtime.choice import select_runtimes
from edge_m3.runtime.registry import Runtime, WeightCache

# How `bench` runs a runtime that takes an XNNPACK weight cache, each in a process of its own:
# off (no cache: one packed copy per signature), memory (packed once, nothing on disk), cold
# (a new cache file: packed once and written), warm (a second start mapping that file).
CACHE_MODES = ("off", "memory", "cold", "warm")


@dataclass(frozen=True)
class Repeats:
    """How often each timed cell runs: `warmup` untimed runs, then `repeats` timed ones."""

    repeats: int = 10
    warmup: int = 2

    def __post_init__(self) -> None:
        if self.repeats < 1 or self.warmup < 0:
            raise OptionError(None, None, f"{{}} {self.repeats} / {{}} {self.warmup}: need "
                              "repeats >= 1, warmup >= 0", mentions=("repeats", "warmup"))


@dataclass(frozen=True)
class BenchOptions:
    """What `edge-m3 bench` was asked for, parsed (edge_m3.cli)."""

    bundle: Path
    runtimes: tuple[Runtime, ...] = ()  # none: every installed one that runs the bundle
    threads: tuple[int, ...] = (1, 2)
    lengths: tuple[int, ...] = ()  # tokens per input; none: each signature length
    reference: str | None = None  # checkpoint for the torch fp32 baseline
    timing: Repeats = Repeats()
    cache_modes: tuple[str, ...] = ("cold", "warm")  # of CACHE_MODES, run in that order
    json: Path | None = None  # also write the figures here
    report: Path | None = None  # report.json, report.md and latency.svg in this folder

    def __post_init__(self) -> None:
        if "warm" in self.cache_modes and "cold" not in self.cache_modes:
            raise OptionError("weight_cache", "warm", "needs cold too (the cold run writes the file "
                              "that the warm run maps)")


def cache_runs(runtime: Runtime, modes: Sequence[str], cache_file: Path) -> dict[str, WeightCache | None]:
    """The runs of one runtime and thread count, by cache mode: the asked modes where the runtime
    takes a weight cache (cold before warm, which maps the file cold wrote), else one run."""
    if not runtime.weight_cache:
        return {"none": None}
    caches = {"off": WeightCache.OFF, "memory": WeightCache.MEMORY,
              "cold": WeightCache.in_file(cache_file), "warm": WeightCache.in_file(cache_file)}
    return {mode: caches[mode] for mode in CACHE_MODES if mode in modes}


def cmd_bench(opts: BenchOptions) -> int:
    """Latency, first-run cost and memory: runtimes x threads x weight-cache modes x lengths,
    each latency also as a ratio to torch."""
    from edge_m3.bundle import load_bundle

    bundle = load_bundle(opts.bundle)
    runtimes = select_runtimes(bundle, opts.runtimes, "runtimes")
    timing = opts.timing
    have = bundle.manifest.seq_lens
    lengths = list(opts.lengths) or have
    for n in lengths:
        if not 2 <= n <= max(have):
            raise OptionError("lengths", n, f"need 2..{max(have)} tokens (the bundle has "
                              f"signatures for {have})")
    if opts.json:
        check_writable(opts.json, "json", is_file=True)  # before the runs, not after
    if opts.report:
        check_writable(opts.report, "report")
    ref_dir = None
    if opts.reference:
        from edge_m3.checkpoint import resolve_checkpoint

        ref_dir = str(resolve_checkpoint(opts.reference, field="reference")[0])

    rows: list[dict[str, Any]] = []
    common = {"lengths": lengths, "warmup": timing.warmup, "repeats": timing.repeats}  # both jobs'
    with tempfile.TemporaryDirectory(prefix="edge-m3-bench-") as tmp_s:
        tmp = Path(tmp_s)
        for th in opts.threads:  # one process per cell, run one after another: timings stay clean
            ref = None
            if ref_dir:
                out = tmp / f"torch-{th}.json"
                run_worker(worker("bench-torch", TorchBenchJob(checkpoint=ref_dir, threads=th, **common,
                                                               out=str(out)),
                                  f"torch reference ({th} threads)"))
                ref = json.loads(out.read_text())
                rows.append(bench_row(f"torch fp32 ({ref['reference']})", th, ref, None, lengths))
            for rt in runtimes:
                runs = cache_runs(rt, opts.cache_modes, tmp / f"{rt.name}-{th}.xnnpack_cache")
                for mode, cache in runs.items():
                    out = tmp / f"{rt.name}-{th}-{mode}.json"
                    run_worker(worker("bench", BenchJob(bundle=str(bundle.path), **runtime_job(rt, cache),
                                                        threads=th, **common, out=str(out)),
                                      f"bench {rt.name} ({th} threads, {mode})"))
                    rows.append(bench_row(rt.name, th, json.loads(out.read_text()), ref, lengths)
                                | {"cache_mode": mode})
    result = {"bundle": str(bundle.path), "quant": bundle.manifest.quant,
              "warmup": timing.warmup, "repeats": timing.repeats, "lengths": lengths,
              "signatures": have, "reference": opts.reference, "rows": rows}
    _print_bench(result)
    if opts.json:
        write_atomic(opts.json, json.dumps(result, indent=1) + "\n", "json")
        write_latency_plot(plot_path(opts.json), result)
    if opts.report:
        write_bench_report(opts.report, result)
    return 0


def write_bench_report(report_dir: Path, result: Mapping[str, Any]) -> list[Path]:
    """`--report DIR`: the figures (report.json), the table for people (report.md) and the
    latency-by-length plot (latency.svg), as check and verify write their reports."""
    report_dir.mkdir(parents=True, exist_ok=True)
    paths = [report_dir / "report.json", report_dir / "report.md"]
    write_atomic(paths[0], json.dumps(result, indent=1) + "\n", "report")
    header, rows = bench_table(result)
    md = [f"# {table_title(result)}", "", "| " + " | ".join(header) + " |",
          "| " + " | ".join("---" for _ in header) + " |", *("| " + " | ".join(r) + " |" for r in rows)]
    plot = write_latency_plot(report_dir / "latency.svg", result)
    if plot is not None:
        md += ["", "![p50 by length](latency.svg)"]
        paths.append(plot)
    write_atomic(paths[1], "\n".join(md) + "\n", "report")
    print(f"bench: report in {report_dir}/ ({', '.join(p.name for p in paths)})", file=sys.stderr)
    return paths


def plot_path(json_path: Path) -> Path:
    """Where the plot of a `--json FILE` run goes: beside it, FILE's stem + `-latency.svg`."""
    return json_path.with_name(json_path.stem + "-latency.svg")


def latency_series(result: Mapping[str, Any]) -> dict[str, dict[int, float]]:
    """p50 ms by length, one series per row: variant, runtime, threads and cache mode."""
    series: dict[str, dict[int, float]] = {}
    for row in result["rows"]:
        mode = row.get("cache_mode")
        variant = "" if row["runtime"].startswith("torch") else f"{result['quant']} "
        label = (f"{variant}{row['runtime']}, {row['threads']} thread{'s' * (row['threads'] > 1)}"
                 + (f", {mode} cache" if mode not in (None, "none") else ""))
        series[label] = {int(n): f["p50_ms"] for n, f in row["lengths"].items()}
    return series


def write_latency_plot(path: Path, result: Mapping[str, Any]) -> Path | None:
    """The SVG, or one line saying why not (matplotlib is not on a runtime-only install)."""
    from edge_m3.device.report import latency_svg

    title = (f"bench {Path(result['bundle']).name} ({result['quant']}): p50 over "
             f"{result['repeats']} runs by length")
    try:
        return latency_svg(path, latency_series(result), title)
    except ImportError:
        print("bench: latency plot skipped: matplotlib is not installed (it comes with "
              "edge-m3[build]); the figures are in the JSON", file=sys.stderr)
        return None


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


def table_title(result: Mapping[str, Any]) -> str:
    """The bench table's title: the bundle, its variant, how to read the cells."""
    return (f"bench {result['bundle']} ({result['quant']}); p50 / p95 ms over {result['repeats']} runs"
            + ("; (x) = speedup over torch fp32" if result["reference"] else "")
            + "; model RSS = peak over the RSS before opening (x model file)")


def bench_table(result: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The table's header and rows, as printed and as report.md writes them."""
    lengths = result["lengths"]
    header = ["runtime", "threads", "weight cache", *[f"{n} tokens" for n in lengths],
              "open to 1st result ms", "1st call per signature ms", "model RSS MB", "peak RSS MB"]

    def ratio(x: float | None) -> str:
        return f" ({x:.2f}x)" if x is not None else ""

    rows = []
    for row in result["rows"]:
        cells = [f"{f['p50_ms']:.2f} / {f['p95_ms']:.2f}{ratio(f.get('p50_speedup'))}"
                 for f in (row["lengths"][str(n)] for n in lengths)]
        model = (f"{row['model_peak_rss_mb']:.0f}{ratio(row['model_rss_ratio'])}"
                 if "model_peak_rss_mb" in row else "")
        first = " ".join(f"{n}:{v:.0f}" for n, v in row["first_call_ms"].items())
        opened = f"{row['open_to_first_result_ms']:.0f}" if "open_to_first_result_ms" in row else ""
        rows.append([row["runtime"], str(row["threads"]), row.get("cache_mode", ""), *cells,
                     opened, first, model, f"{row['peak_rss_mb']:.0f}"])
    return header, rows


def _print_bench(result: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    header, rows = bench_table(result)
    table = Table(title=table_title(result))
    for col in header:
        table.add_column(col, justify="left" if col in ("runtime", "weight cache") else "right")
    for cells in rows:
        table.add_row(*cells)
    console = Console()
    if not console.is_terminal:
        console = Console(width=180)
    console.print(table)

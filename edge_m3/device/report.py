"""The reports of the device commands: report.json and report.md for people (`write_report`,
check's `check_markdown`), check's console table, and the latency-by-length SVG that bench and
docs/benchmarks.md draw. The lab's verify report writes through the same `write_report`."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from edge_m3.common.files import write_atomic


def cell(f: Mapping[str, Any] | None, path: str, spec: str) -> str:
    """A figure by dotted path, formatted; "n/a" when the bundle lacks that head."""
    value: Any = f
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return "n/a"
        value = value[part]
    return format(value, spec)


def write_report(out_dir: Path, report: Mapping[str, Any],
                 render: Callable[[Mapping[str, Any]], str]) -> list[Path]:
    """report.json (the figures) and report.md (`render`'s text for people); returns the paths."""
    paths = [out_dir / "report.json", out_dir / "report.md"]
    write_atomic(paths[0], json.dumps(report, indent=1, ensure_ascii=False) + "\n", "report")
    write_atomic(paths[1], render(report), "report")
    return paths


def latency_svg(path: Path, series: Mapping[str, Mapping[Any, float]], title: str,
                y_label: str = "p50 ms a call") -> Path:
    """An SVG of latency by length, one line per series (runtime x variant x ...), each line an
    SVG group with id `latency-line-N`. SVG because it is text: diffable, shown by GitHub, and
    reproducible (no date, fixed ids). matplotlib is imported here, not on a runtime-only
    install: ImportError tells the caller to skip the plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"svg.hashsalt": "edge-m3", "svg.fonttype": "none"}):
        fig, ax = plt.subplots(figsize=(7, 4))
        for i, (label, points) in enumerate(series.items()):
            xs = sorted(points, key=float)
            (line,) = ax.plot([float(x) for x in xs], [points[x] for x in xs], marker="o", label=label)
            line.set_gid(f"latency-line-{i}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = sorted({float(x) for points in series.values() for x in points})
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.set_xlabel("tokens")
        ax.set_ylabel(y_label)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(path, format="svg", metadata={"Date": None})
        plt.close(fig)
    return path


def check_markdown(r: Mapping[str, Any]) -> str:
    """report.md of `check`: what ran where, golden.json's verdict, the timings."""
    d, tol = r["device"], r["tolerance"]
    lines = [f"# edge-m3 check: {r['bundle']}", "",
             f"- device: {d['machine']}, {d['system']}, Python {d['python']}, {d['cpus']} CPUs",
             f"- variant: **{r['quant']}**, model {r['model_file']}; edge-m3 {r['edge_m3_version']}",
             f"- golden.json: {r['golden']['cases']} texts recorded with "
             f"{r['golden']['recorded_with']}; tolerance dense cosine >= {tol['dense_cosine_min']:g}, "
             f"every value within {tol['max_abs']:g} ({tol['source']})",
             f"- runtimes: {', '.join(r['runtimes_checked'])} ({r['threads']} thread(s)); "
             f"{r['warmup']} warm-up + {r['repeats']} timed runs per signature",
             f"- result: **{'PASS' if r['passed'] else 'FAIL'}**", "",
             "## golden.json", "",
             "| runtime | version | dense cos min | dense max diff | lexical max diff | "
             "ColBERT max diff | golden scores max diff | result |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]

    for rt, res in r["runtimes"].items():
        if "error" in res:
            lines.append(f"| {rt} | | | | | | | **{res['error']}** |")
            continue
        g = res["golden"]
        lines.append(f"| {rt} | {res['version']} | {cell(g, 'dense_cosine_min', '.7f')} "
                     f"| {cell(g, 'dense_max_abs', '.2e')} | {cell(g, 'lexical_max_abs', '.2e')} "
                     f"| {cell(g, 'colbert_max_abs', '.2e')} | {cell(g, 'scores_max_abs', '.2e')} "
                     f"| {'pass' if res['passed'] else 'FAIL'} |")
    lines += ["", "Golden scores (every mode, 3 pairs per case): recomputed from the recorded "
              "cases they must be equal bit for bit (else a problem below); from this device's "
              "live outputs their largest difference is shown above."]
    problems = list(r["golden"]["postprocess_problems"]) + [
        f"{rt}: {p}" for rt, res in r["runtimes"].items() for p in res.get("golden", {}).get("problems", [])]
    if problems:
        lines += ["", "Problems:", "", *[f"- {p}" for p in problems]]
    lines += ["", "## Latency per signature (exactly L tokens), ms", "",
              "| runtime | signature | p50 | p95 | first call |", "| --- | --- | --- | --- | --- |"]
    for rt, res in r["runtimes"].items():
        timing = res.get("timing", {})
        for n, f in timing.get("lengths", {}).items():
            lines.append(f"| {rt} | embed_{n} | {f['p50_ms']:.2f} | {f['p95_ms']:.2f} "
                         f"| {timing['first_call_ms'][n]:.1f} |")
    lines += ["", "| runtime | load s | peak RSS MB (before load) |", "| --- | --- | --- |"]
    for rt, res in r["runtimes"].items():
        if "timing" in res:
            t = res["timing"]
            lines.append(f"| {rt} | {t['load_s']:.3f} | {t['peak_rss_mb']:.0f} "
                         f"({t['rss_before_load_mb']:.0f}) |")
    lines += ["", "Peak RSS: the runtime's own process (VmHWM), interpreter and imports included.", ""]
    return "\n".join(lines)


def print_check(r: Mapping[str, Any], report_dir: Path) -> None:
    """The compact table of `check` on stdout; every problem on its own line."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"check {r['bundle']} ({r['quant']}) on {r['device']['machine']}, "
                        f"{r['threads']} thread(s)")
    for col in ("runtime", "version", "dense cos min", "max diff d/l/c", "p50 ms by signature",
                "load s", "RSS MB", "golden"):
        table.add_column(col)
    for rt, res in r["runtimes"].items():
        if "error" in res:
            table.add_row(rt, *[""] * 6, f"[red]{res['error']}")
            continue
        g, t = res["golden"], res["timing"]
        table.add_row(rt, str(res["version"]), cell(g, "dense_cosine_min", ".6f"),
                      "/".join(cell(g, k, ".1e") for k in ("dense_max_abs", "lexical_max_abs",
                                                          "colbert_max_abs")),
                      " ".join(f"{n}:{f['p50_ms']:.1f}" for n, f in t["lengths"].items()),
                      f"{t['load_s']:.2f}", f"{t['peak_rss_mb']:.0f}",
                      "[green]pass" if res["passed"] else f"[red]FAIL ({len(g['problems'])})")
    console = Console()
    if not console.is_terminal:  # logs and CI: do not squeeze the table into 80 columns
        console = Console(width=150)
    console.print(table)
    for p in r["golden"]["postprocess_problems"]:
        console.print(p, markup=False)
    for rt, res in r["runtimes"].items():
        for p in res.get("golden", {}).get("problems", []):
            console.print(f"{rt}: {p}", markup=False)
    console.print(f"{'PASS' if r['passed'] else 'FAIL'}; report: {report_dir / 'report.md'}")

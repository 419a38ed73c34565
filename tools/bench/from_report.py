"""A result file from `edge-m3 bench`, `verify` or `check` reports: their tables for docs/benchmarks.md.

    edge-m3 bench BUNDLE ... --report R1 [&& edge-m3 bench BUNDLE2 ... --report R2]
    python -m tools.bench.from_report bench R1 [R2 ...] --results docs/results/NAME.json \\
        [--layout LAYOUT] [--label TEXT ...] [--title TEXT] [--note TEXT ...] [--keep-notes]
    python -m tools.bench.from_report verify R1 ... --results FILE [--layout variants|runtimes|grid]
    python -m tools.bench.from_report check R1 ... --results FILE [--merge]

Why: the CLI's own commands measure these tables (a bundle's speed, memory, fidelity, device
parity); this reads what they wrote (a `--report DIR`'s report.json, or bench's `--json FILE`)
and writes the table through tools/bench/results.py, so a rerun updates the page without a
second way of measuring. The result's command is the CLI calls (rebuilt from each report:
bundle, runtimes, threads, lengths, repeats, references, texts) followed by this one.
A layout is the shape of one page table (the file names which fed it):

- bench `table`: bench's own printed table (edge_m3.device.bench.bench_table), a label column
  first when several reports; `lengths`: p50 by length, first call, peak RSS per variant and
  thread count (speed_fullsize_int4); `torch`: p50 by length beside torch and the ratio
  (speed_minilm); `by-length`: lengths as columns, a row per cache mode (speed_modernbert);
  `runs`: the same label's reports side by side, "a / b" (speed_int16x8); `memory`: model RSS
  per weight-cache mode, a row per report (memory_int4); `memory-modes`: a row per runtime with
  its modes "off / memory / cold / warm" (memory_weight_cache).
- verify `variants`: a row per report x runtime, the research studies' columns
  (fidelity_variants); `runtimes`: a row per report, a column per runtime (fidelity_minilm);
  `grid`: labels "ROW|COLUMN", a cell per pair (fidelity_modernbert).
- check: a row per report x runtime, the golden replay's worst figures (fidelity_devices);
  `--merge` keeps the file's other rows (another machine's, e.g. tools.run.arm64_rig's).

`--label` (repeatable, one per report, in order) names a report's rows; default its variant.
The title defaults to the result file's own (else one made from the reports); `--keep-notes`
keeps its notes (prose the reports cannot give), else the notes are `--note`s or made here.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tools.bench.results import add_option, existing_notes, read_result, write_result

MODULE = "tools.bench.from_report"
NAMES = {"litert": "LiteRT", "tflite-runtime": "tflite-runtime", "onnxruntime": "onnxruntime", "tf": "TF"}
WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}
Report = tuple[str, dict[str, Any]]  # (label, report.json)
Table = tuple[list[str], list[list[str]]]


def read_report(path: Path) -> dict[str, Any]:
    """A report folder's report.json, or a JSON file itself (bench --json)."""
    file = path / "report.json" if path.is_dir() else path
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"from_report: {file}: {exc}") from None


def _q(*words: object) -> str:
    return " ".join(shlex.quote(str(w)) for w in words)


def _runs(r: dict[str, Any]) -> list[dict[str, Any]]:
    """A bench report's rows of the bundle (torch's left out)."""
    return [row for row in r["rows"] if not row["runtime"].startswith("torch")]


def bench_command(r: dict[str, Any], where: Path) -> str:
    """The `edge-m3 bench` call that writes this report again."""
    runs = _runs(r)
    rts = list(dict.fromkeys(row["runtime"] for row in runs))
    threads = list(dict.fromkeys(str(row["threads"]) for row in r["rows"]))
    modes = [m for m in dict.fromkeys(row.get("cache_mode") for row in runs) if m not in (None, "none")]
    words = ["edge-m3", "bench", r["bundle"], "--runtimes", ",".join(rts), "--threads", ",".join(threads),
             "--lengths", ",".join(map(str, r["lengths"])), "--repeats", r["repeats"], "--warmup", r["warmup"]]
    if modes and modes != ["cold", "warm"]:
        words += ["--weight-cache", ",".join(modes)]
    if r.get("reference"):
        words += ["--reference", r["reference"]]
    return _q(*words, "--json" if where.suffix == ".json" else "--report", where)


def verify_command(r: dict[str, Any], where: Path) -> str:
    """The `edge-m3 verify` call that writes this report again."""
    words = ["edge-m3", "verify", r["bundle"], "--reference", r["reference_checkpoint"]]
    corpus = r["texts"].get("corpus")
    if corpus:
        words += ["--texts", corpus["file"]]
        if corpus.get("sample"):
            words += ["--sample", corpus["sample"], "--seed", corpus["seed"]]
    return _q(*words, "--runtime", ",".join(r["runtimes_checked"]), "--threads", r["threads"],
              "--report", where)


def check_command(r: dict[str, Any], where: Path) -> str:
    """The `edge-m3 check` call that writes this report again."""
    return _q("edge-m3", "check", r["bundle"], "--runtime", ",".join(r["runtimes_checked"]),
              "--threads", r["threads"], "--repeats", r["repeats"], "--warmup", r["warmup"],
              "--report", where)


# bench layouts ------------------------------------------------------------------------------

def _mode(row: dict[str, Any]) -> str | None:
    m = row.get("cache_mode")
    return None if m in (None, "none") else m


def _fig(row: dict[str, Any], n: object) -> dict[str, float]:
    return row["lengths"][str(n)]


def bench_table_layout(reports: list[Report]) -> Table:
    from edge_m3.device.bench import bench_table

    header, rows = bench_table(reports[0][1])
    if len(reports) == 1:
        return header, rows
    out = [[label, *cells] for label, r in reports for cells in bench_table(r)[1]]
    return ["variant", *header], out


def lengths_layout(reports: list[Report]) -> Table:
    lengths = reports[0][1]["lengths"]
    first = min(lengths)
    cols = ["variant", "threads", *[f"p50 @{n}" for n in lengths], f"first call @{first}", "peak RSS"]
    threads = sorted({row["threads"] for _, r in reports for row in _runs(r)})
    rows = []
    for th in threads:
        for label, r in reports:
            mine = [row for row in _runs(r) if row["threads"] == th]
            for row in mine:
                name = label if len(mine) == 1 else f"{label} ({row['runtime']}, {_mode(row) or 'no'} cache)"
                call = row["first_call_ms"].get(str(first))
                rows.append([name, str(th), *[f"{_fig(row, n)['p50_ms']:,.1f} ms" for n in lengths],
                             "" if call is None else f"{call:,.0f} ms", f"{row['peak_rss_mb']:,.0f} MB"])
    return cols, rows


def torch_layout(reports: list[Report]) -> Table:
    lengths = reports[0][1]["lengths"]
    cols = ["variant", "runtime", *[f"p50 {n} tokens (ms)" for n in lengths],
            "vs torch at " + " / ".join(map(str, lengths))]
    rows = []
    for label, r in reports:
        for row in r["rows"]:
            rt = row["runtime"] + (f" ({_mode(row)} cache)" if _mode(row) else "")
            ratio = " / ".join(f"{_fig(row, n)['p50_speedup']:.2f}x" for n in lengths
                               if "p50_speedup" in _fig(row, n))
            rows.append([label, rt, *[f"{_fig(row, n)['p50_ms']:.2f}" for n in lengths], ratio])
    return cols, rows


def by_length_layout(reports: list[Report]) -> Table:
    lengths = reports[0][1]["lengths"]
    rows = []
    for label, r in reports:
        prefix = f"{label}: " if len(reports) > 1 else ""
        runs = _runs(r)
        for row in runs:
            how = f"{_mode(row)} weight cache" if _mode(row) else f"{row['runtime']}"
            rows.append([f"{prefix}p50 / p95 ms, {how}",
                         *[f"{_fig(row, n)['p50_ms']:,.0f} / {_fig(row, n)['p95_ms']:,.0f}" for n in lengths]])
        if runs:
            first = runs[0]
            rows.append([f"{prefix}first call of the signature, ms ({_mode(first) or first['runtime']})",
                         *[f"{first['first_call_ms'][str(n)]:,.0f}" if str(n) in first["first_call_ms"]
                           else "" for n in lengths]])
    return ["tokens", *map(str, lengths)], rows


def runs_layout(reports: list[Report]) -> Table:
    lengths = reports[0][1]["lengths"]
    groups: dict[str, list[dict[str, Any]]] = {}
    for label, r in reports:
        groups.setdefault(label, []).extend(_runs(r))
    k = max(len(v) for v in groups.values())
    runs = f"{WORDS.get(k, k)} run{'s' * (k > 1)}"
    rows = [[label, *[" / ".join(f"{_fig(row, n)['p50_ms']:,.2f}" for row in rs) + " ms" for n in lengths],
             f"{rs[0].get('model_peak_rss_mb', 0):,.0f} MB"] for label, rs in groups.items()]
    return ["file", *[f"p50 @{n} tok ({runs})" for n in lengths], "model RSS"], rows


def _rss(row: dict[str, Any] | None) -> str:
    if not row or "model_peak_rss_mb" not in row:
        return ""
    return f"{row['model_peak_rss_mb']:,.0f} MB ({row['model_rss_ratio']:.2f}x)"


def memory_layout(reports: list[Report]) -> Table:
    cols = ["model", "variant", "file", "off", "memory", "cold cache", "warm cache",
            "open -> first result off / cold / warm"]
    rows = []
    for label, r in reports:
        by_mode = {_mode(row) or "off": row for row in _runs(r)}
        some = next(iter(by_mode.values()))
        opened = [f"{by_mode[m]['open_to_first_result_ms']:,.0f}" for m in ("off", "cold", "warm")
                  if m in by_mode]
        extra = (f" (memory: {by_mode['memory']['open_to_first_result_ms']:,.0f} ms)"
                 if "memory" in by_mode and opened else "")
        rows.append([label, r["quant"], f"{some.get('model_mb', 0):,.1f} MB",
                     *[_rss(by_mode.get(m)) for m in ("off", "memory", "cold", "warm")],
                     (" / ".join(opened) + " ms" + extra) if opened else ""])
    return cols, rows


def memory_modes_layout(reports: list[Report]) -> Table:
    cols = ["model", "variant, signatures", "file", "runtime / weight cache", "model peak RSS", "x file",
            "open -> first result", "cache file"]
    rows = []
    for label, r in reports:
        by_rt: dict[str, list[dict[str, Any]]] = {}
        for row in _runs(r):
            by_rt.setdefault(row["runtime"], []).append(row)
        for i, (rt, rs) in enumerate(by_rt.items()):
            modes = [_mode(row) for row in rs if _mode(row)]
            name = f"{NAMES.get(rt, rt)} {' / '.join(modes) if modes else rs[0].get('version') or ''}".rstrip()
            cache = next((row.get("weight_cache_mb") for row in rs if row.get("weight_cache_mb")), None)
            head = ([label, f"{r['quant']}, {'/'.join(map(str, r['signatures']))}",
                     f"{rs[0].get('model_mb', 0):,.1f} MB"] if i == 0 else ["", "", ""])
            rows.append([*head, name,
                         " / ".join(f"{row.get('model_peak_rss_mb', 0):,.0f}" for row in rs) + " MB",
                         " / ".join(f"{row.get('model_rss_ratio', 0):.2f}" for row in rs),
                         " / ".join(f"{row.get('open_to_first_result_ms', 0):,.0f}" for row in rs) + " ms",
                         "" if cache is None else f"{cache:,.0f} MB"])
    return cols, rows


# verify layouts -----------------------------------------------------------------------------

def _ok(r: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {rt: f for rt, f in r["runtimes"].items() if "error" not in f}


def _gate(f: dict[str, Any], failed_word: str = "FAIL") -> str:
    fails = [x.split(":")[0] for x in f.get("failed", []) if "rss" not in x]
    return "pass" if not fails else f"{failed_word}: {', '.join(fails)}"


def _label(r: dict[str, Any], rt: str, f: dict[str, Any]) -> str:
    fmt = "ONNX" if rt == "onnxruntime" else "TFLite"
    return f"{fmt} {r['quant']} ({NAMES.get(rt, rt)} {f.get('version') or ''})".replace(" )", ")")


def variants_layout(reports: list[Report]) -> Table:
    cols = ["variant", "file MB", "dense cos min", "p1", "mean", "lexical err max (p99)",
            "ColBERT err max (p99)", "top-10 agreement d / s / c", "its gate"]
    rows = []
    for label, r in reports:
        ok = _ok(r)
        for rt, f in ok.items():
            d, a = f["dense_cosine"]["all"], f["retrieval_top10_agreement"]
            name = _label(r, rt, f) if label == r["quant"] else (label if len(ok) == 1 else f"{label} ({rt})")
            rows.append([name, f"{f.get('memory', {}).get('model_mb', 0):.1f}", f"{d['min']:.5f}",
                         f"{d.get('p1', d['min']):.5f}", f"{d['mean']:.5f}",
                         f"{f['lexical_abs_err']:.3f} ({f['lexical_abs_err_p99']:.3f})",
                         f"{f['colbert_score_abs_err']:.3f} ({f['colbert_score_abs_err_p99']:.3f})",
                         f"{a['dense']:.3f} / {a['sparse']:.3f} / {a['colbert']:.3f}", _gate(f)])
    return cols, rows


def runtimes_layout(reports: list[Report]) -> Table:
    heads: dict[str, str] = {}
    for _, r in reports:
        for rt, f in _ok(r).items():
            heads.setdefault(rt, f"{NAMES.get(rt, rt)} {f.get('version') or ''}".strip())
    rows = []
    for label, r in reports:
        ok = _ok(r)
        cells = []
        for rt in heads:
            f = ok.get(rt)
            if f is None:
                cells.append("")
                continue
            d = f["dense_cosine"]["all"]
            cells.append(f"{d['min']:.5f} / {d.get('p1', d['min']):.5f}; "
                         f"{f['retrieval_top10_agreement']['min']:.3f}")
        fails = sorted({x for f in ok.values() for x in [_gate(f)] if x != "pass"})
        name = (f"{r['quant']}: dense cosine min / p1; top-10 agreement" if label == r["quant"] else label)
        rows.append([name, f"{r['texts']['total']:,}", *cells, "; ".join(fails) or "pass"])
    return ["check", "texts", *heads.values(), "gate"], rows


def grid_layout(reports: list[Report]) -> Table:
    cells: dict[str, dict[str, str]] = {}
    sizes: dict[str, str] = {}
    columns: list[str] = []
    for label, r in reports:
        row, _, col = label.partition("|")
        col = col or "dense cos min, agreement, gate"  # one column: its heading as is
        columns += [col] if col not in columns else []
        ok = _ok(r)
        mins = " / ".join(f"{f['dense_cosine']['all']['min']:.6f}" for f in ok.values())
        agree = list(dict.fromkeys(f"{f['retrieval_top10_agreement']['min']:.2f}" for f in ok.values()))
        fails = sorted({x.split(":")[0] for f in ok.values() for x in f.get("failed", []) if "rss" not in x})
        cells.setdefault(row, {})[col] = (f"{mins}, {' / '.join(agree)}, "
                                          + ("pass" if not fails else f"fail ({', '.join(fails)})"))
        tflite = [f for rt, f in ok.items() if rt != "onnxruntime"] or list(ok.values())
        sizes.setdefault(row, f"{tflite[0].get('memory', {}).get('model_mb', 0):.1f}" if tflite else "")
    heads = [c if c.endswith("gate") else f"{c}: dense cos min, agreement, gate" for c in columns]
    return (["variant", "TFLite MB", *heads],
            [[row, sizes[row], *[by.get(c, "") for c in columns]] for row, by in cells.items()])


# check ------------------------------------------------------------------------------------

CHECK_COLUMNS = ["variant", "machine", "Python", "runtime", "dense cos min", "dense max diff",
                 "lexical max diff", "ColBERT max diff", "result"]


def _diff(x: float | None) -> str:
    return "" if x is None else ("0" if x == 0 else f"{x:.1e}")


def check_layout(reports: list[Report]) -> Table:
    rows = []
    for label, r in reports:
        machine = {"x86_64": "x86-64", "AMD64": "x86-64", "arm64": "aarch64"}.get(
            r["device"]["machine"], r["device"]["machine"])
        py = ".".join(r["device"]["python"].split(".")[:2])
        tol = r["tolerance"]
        for i, (rt, res) in enumerate(r["runtimes"].items()):
            g = res.get("golden", {})
            version = ".".join((res.get("version") or "").split(".")[:2])
            name = label if i else f"{label} (tolerance {tol['dense_cosine_min']:g} / {tol['max_abs']:g})"
            cos = g.get("dense_cosine_min")
            rows.append([name, machine, py, f"{NAMES.get(rt, rt)} {version}".strip(),
                         "" if cos is None else f"{cos:.7f}", _diff(g.get("dense_max_abs")),
                         _diff(g.get("lexical_max_abs")), _diff(g.get("colbert_max_abs")),
                         "pass" if res.get("passed") else "FAIL: " + "; ".join(
                             g.get("problems") or [res.get("error", "failed")])])
    return CHECK_COLUMNS, rows


def merge_rows(old: list[list[Any]], new: list[list[str]],
               key: Callable[[Sequence[Any]], tuple]) -> list[list[Any]]:
    """The file's rows with those of the same key replaced in place, the new ones appended."""
    fresh = {key(r): r for r in new}
    out = [fresh.pop(key(r), r) for r in old]
    return out + [r for r in new if key(r) in fresh]


def _check_key(row: Sequence[Any]) -> tuple:
    return (str(row[0]).split(" (")[0], *map(str, row[1:4]))


LAYOUTS: dict[str, dict[str, Callable[[list[Report]], Table]]] = {
    "bench": {"table": bench_table_layout, "lengths": lengths_layout, "torch": torch_layout,
              "by-length": by_length_layout, "runs": runs_layout, "memory": memory_layout,
              "memory-modes": memory_modes_layout},
    "verify": {"variants": variants_layout, "runtimes": runtimes_layout, "grid": grid_layout},
    "check": {"table": check_layout},
}
COMMANDS = {"bench": bench_command, "verify": verify_command, "check": check_command}


def default_title(kind: str, reports: list[Report]) -> str:
    r = reports[0][1]
    if kind == "bench":
        from edge_m3.device.bench import table_title

        return table_title(r) if len(reports) == 1 else f"bench: {', '.join(label for label, _ in reports)}"
    names = ", ".join(Path(x["bundle"]).name for _, x in reports)
    return f"edge-m3 {kind}: {names}"


def default_notes(kind: str, reports: list[Report]) -> list[str]:
    r = reports[0][1]
    if kind == "bench":
        return [f"p50 / p95 over {r['repeats']} runs after {r['warmup']} warm-ups; model RSS = peak over "
                "the RSS before opening (x the model file)."]
    if kind == "verify":
        t = r["texts"]
        src = (t["corpus"]["file"] if t.get("corpus") else "the built-in retrieval set")
        return [f"{t['total']:,} texts ({t['queries']:,} queries x {t['passages']:,} passages, {src}), "
                f"against {r['primary_reference']}; gates: `{r['thresholds']['file']}`."]
    return [f"Worst of the {r['golden']['cases']} golden texts, recorded with {r['golden']['recorded_with']}."]


def convert(kind: str, paths: Sequence[Path], results: Path, layout: str | None = None,
            labels: Sequence[str] = (), title: str | None = None, notes: Sequence[str] = (),
            keep_notes: bool = False, merge: bool = False, argv: Sequence[str] | None = None,
            module: str = MODULE, before: Sequence[str] | None = None) -> Path:
    """Read the reports, lay out the table, write the result file (see the module docstring)."""
    layouts = LAYOUTS[kind]
    layout = layout or next(iter(layouts))
    if layout not in layouts:
        raise SystemExit(f"from_report: {kind} --layout {layout}: choose from {', '.join(layouts)}")
    raw = [read_report(p) for p in paths]
    if len(labels) > len(raw):
        raise SystemExit(f"from_report: {len(labels)} labels for {len(raw)} reports")
    reports = [(labels[i] if i < len(labels) else r["quant"], r) for i, r in enumerate(raw)]
    try:
        columns, rows = layouts[layout](reports)
    except (KeyError, TypeError, StopIteration) as exc:
        raise SystemExit(f"from_report: not a {kind} report ({exc!r} missing)") from None
    kept = existing_notes(results) if keep_notes else []
    old = read_result(results) if merge and results.is_file() else None
    if old is not None:
        if old["columns"] != columns:
            raise SystemExit(f"from_report: --merge: {results} has other columns")
        rows = merge_rows(old["rows"], rows, _check_key if kind == "check" else lambda r: tuple(r[:1]))
        kept = kept or existing_notes(results)
    if before is None:
        before = [COMMANDS[kind](r, p) for r, p in zip(raw, paths, strict=True)]
    if old is None and results.is_file():
        try:
            old = read_result(results)  # its title stays: the page's heading for this table
        except ValueError:
            old = None
    return write_result(results, title=title or (old or {}).get("title") or default_title(kind, reports),
                        module=module, columns=columns, rows=rows, argv=argv, before=before,
                        notes=[*kept, *notes] or default_notes(kind, reports))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=sorted(LAYOUTS), help="which command wrote the reports")
    p.add_argument("reports", nargs="+", type=Path,
                   help="report folders (their report.json) or JSON files (bench --json)")
    p.add_argument("--layout", default=None,
                   help="the table's shape: bench " + ", ".join(LAYOUTS["bench"]) + "; verify "
                        + ", ".join(LAYOUTS["verify"]) + " (default the first)")
    p.add_argument("--label", action="append", default=[],
                   help="a report's rows' name, one per report in order")
    p.add_argument("--title", default=None, help="the table's title (default from the report)")
    p.add_argument("--note", action="append", default=[], help="a note under the table (repeatable)")
    p.add_argument("--keep-notes", action="store_true", help="keep the result file's notes (not its load note)")
    p.add_argument("--merge", action="store_true",
                   help="keep the file's rows that these reports do not replace (check: by variant, "
                        "machine, Python and runtime)")
    add_option(p, "required")
    a = p.parse_args(argv)
    if a.results is None:
        p.error("--results FILE is required")
    convert(a.kind, a.reports, a.results, a.layout, a.label, a.title, a.note, a.keep_notes, a.merge,
            argv=sys.argv[1:] if argv is None else argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

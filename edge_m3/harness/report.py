"""The reports of verify and check: report.json, report.md for people, verify's plots, the
console tables; and the latency-by-length SVG that bench and docs/benchmarks.md draw."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.common.files import write_atomic
from edge_m3.spec import RSS_ALLOWANCE, RSS_GATE_MIN_BYTES


def _v(f: Mapping[str, Any] | None, path: str, spec: str) -> str:
    """A figure by dotted path, formatted; "n/a" when the bundle lacks that head."""
    value: Any = f
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return "n/a"
        value = value[part]
    return format(value, spec)


def write_report(out_dir: Path, report: Mapping[str, Any],
                 render: Callable[[Mapping[str, Any]], str] | None = None,
                 with_plots: bool = True) -> list[Path]:
    """report.json, report.md (verify's `markdown` unless `render`), and verify's plots
    cosine.png and latency.png (matplotlib: not on a runtime-only install); returns the paths."""
    paths = [out_dir / "report.json", out_dir / "report.md"]
    write_atomic(paths[0], json.dumps(report, indent=1, ensure_ascii=False) + "\n", "report")
    write_atomic(paths[1], (render or markdown)(report), "report")
    return paths + (plots(out_dir, report) if with_plots else [])


def _fmt(key: str, value: float) -> str:
    """Cosines need 7 decimals to be told apart, errors need exponents."""
    if key.startswith("dense_cosine"):
        return f"{value:.7f}"
    return f"{value:.2e}" if "err" in key else f"{value:.3f}"


def _texts_source(t: Mapping[str, Any]) -> str:
    c = t.get("corpus")
    if not c:
        return "the built-in retrieval set"
    sampled = f", stratified sample of {c['sample']} with seed {c['seed']}" if c.get("sample") else ""
    return f"the corpus {c['file']}{sampled}, {len(c.get('scripts', []))} scripts"


def markdown(r: Mapping[str, Any]) -> str:
    """The report for people: what was checked against what, every figure, the verdict."""
    t, th = r["texts"], r["thresholds"]
    refs = "; ".join(f"**{name}**{' (primary)' if name == r['primary_reference'] else ''}: "
                     f"{m['runtime']} {m['version']}, load {m['load_s']:.1f} s, peak RSS "
                     f"{m['peak_rss_mb']:.0f} MB{', cached' if m['cached'] else ''}"
                     for name, m in r["references"].items())
    lines = [f"# edge-m3 verify: {r['bundle']}", "",
             f"- variant: **{r['quant']}**; source: {r['source']}; reference checkpoint: "
             f"{r['reference_checkpoint']}",
             f"- references: {refs}",
             f"- runtimes checked: {', '.join(r['runtimes_checked'])} ({r['threads']} thread(s))",
             f"- texts: {t['total']} ({t['user']} from --texts, {t['queries']} queries and "
             f"{t['passages']} passages of {_texts_source(t)} in {len(t['languages'])} "
             f"languages), max_length {t['max_length']}",
             f"- thresholds: `{th['file']}` [{th['variant']}]",
             f"- result: **{'PASS' if r['passed'] else 'FAIL'}**", ""]
    kvf = r.get("keras_vs_reference") or r.get("keras_vs_flagembedding")
    if kvf:
        lines += [f"Keras fp32 re-implementation vs {r['primary_reference']}: dense cosine min "
                  f"{_v(kvf, 'dense_cosine.min', '.7f')}, lexical err "
                  f"{_v(kvf, 'lexical_abs_err', '.2e')}, ColBERT score err "
                  f"{_v(kvf, 'colbert_score_abs_err', '.2e')}, ids match "
                  f"{_v(kvf, 'input_ids_match', '.3f')}.", ""]
    sf = r.get("score_formulas_vs_flagembedding")
    if sf:
        lines += ["Score formulas vs FlagEmbedding's own `compute_lexical_matching_score` / "
                  f"`colbert_score` on its outputs: max diff {_v(sf, 'sparse', '.1e')} / "
                  f"{_v(sf, 'colbert', '.1e')}.", ""]
    ok = {rt: f for rt, f in r["runtimes"].items() if "error" not in f}
    lines += ["## Gate", "", "| threshold | limit | " + " | ".join(ok) + " |",
              "| --- | --- |" + " --- |" * len(ok)]
    from edge_m3.harness.metrics import gate_value

    for key, limit in th["limits"].items():
        cells = []
        for f in ok.values():
            value = gate_value(f, key.rpartition("_")[0])
            mark = "✗" if any(x.startswith(key + ":") for x in f["failed"]) else "✓"
            why = ("not gated: runtime or model size" if key.startswith("model_rss")
                   else "head not exported")
            cells.append(f"n/a ({why})" if value is None else f"{_fmt(key, value)} {mark}")
        lines.append(f"| {key} | {limit:g} | " + " | ".join(cells) + " |")
    for rt, f in r["runtimes"].items():
        if "error" in f:
            lines.append(f"\n**{rt}: {f['error']}**")
    lines += ["", "## Figures (vs the primary reference)", "",
              "| runtime | version | dense cos min/mean per text set | lexical top-10 "
              "overlap | lexical err max (p99) | key Jaccard | ColBERT err max (p99) | retrieval top-10 "
              "dense / sparse / colbert | recall@10 bundle (ref) | ids | load s (first run of each signature) "
              "| peak RSS MB (before load) |",
              "|" + " --- |" * 12]
    methods = ("dense", "sparse", "colbert")
    for rt, f in ok.items():
        per = ", ".join(f"{s} {_v(f, f'dense_cosine.{s}.min', '.6f')}/"
                        f"{_v(f, f'dense_cosine.{s}.mean', '.6f')}"
                        for s in ("user", "queries", "passages") if s in f.get("dense_cosine", {}))
        agr = " / ".join(_v(f, f"retrieval_top10_agreement.{m}", ".3f") for m in methods)
        recall = " / ".join(f"{_v(f, f'recall_at_10.bundle.{m}', '.2f')} "
                            f"({_v(f, f'recall_at_10.reference.{m}', '.2f')})" for m in methods)
        lines.append(
            f"| {rt} | {f['version']} | {per or 'n/a'} | {_v(f, 'lexical_top10_overlap.mean', '.3f')} "
            f"(min {_v(f, 'lexical_top10_overlap.min', '.2f')}) | {_v(f, 'lexical_abs_err', '.2e')} "
            f"({_v(f, 'lexical_abs_err_p99', '.2e')}) "
            f"| {_v(f, 'lexical_key_jaccard.mean', '.3f')} | {_v(f, 'colbert_score_abs_err', '.2e')} "
            f"({_v(f, 'colbert_score_abs_err_p99', '.2e')}) "
            f"| {agr} | {recall} | {f['input_ids_match']:.3f} | {f['load_s']:.2f} "
            f"({_v(f, 'warmup_s', '.2f')}) "
            f"| {f['peak_rss_mb']:.0f} ({f['rss_before_load_mb']:.0f}) |")
    lines += _worst_md(ok)
    if any("vs_keras" in f for f in ok.values()):
        lines += ["", "Against the Keras fp32 model (conversion and quantization only):", "",
                  "| runtime | dense cos min | lexical err | ColBERT err | retrieval top-10 min |",
                  "| --- | --- | --- | --- | --- |"]
        for rt, f in ok.items():
            k = f["vs_keras"]
            lines.append(f"| {rt} | {_v(k, 'dense_cosine.min', '.7f')} "
                         f"| {_v(k, 'lexical_abs_err', '.2e')} "
                         f"| {_v(k, 'colbert_score_abs_err', '.2e')} "
                         f"| {_v(k, 'retrieval_top10_agreement.min', '.3f')} |")
    lines += _per_language_md(ok)
    lines += ["", "## Memory and first-run cost", "",
              "| runtime | weight cache | model file MB | model peak RSS MB | x file | gated "
              "| open s | first call per signature ms |", "|" + " --- |" * 8]
    for rt, f in ok.items():
        m = f["memory"]
        first = ", ".join(f"{n}: {v:.0f}" for n, v in f["first_call_ms"].items())
        lines.append(f"| {rt} | {m['weight_cache']} | {m['model_mb']:.1f} | "
                     f"{m['model_peak_rss_mb']:.0f} | {m['model_rss_ratio']:.2f} | "
                     f"{'yes' if m['gated'] else 'no'} | {f['load_s']:.2f} | {first} |")
    lines += ["", "Model peak RSS: the process's peak from just before the model is opened "
              "(tokenizer and imports already loaded) over its RSS then, with every signature "
              f"run; x file: that, less the runtime's fixed {RSS_ALLOWANCE >> 20} MiB, over the "
              "model file's size (`model_rss_ratio`); gated on LiteRT and tflite-runtime for "
              f"model files of {RSS_GATE_MIN_BYTES >> 20} MiB and more."]
    lines += ["", "## Latency of the device step (tokenize + run + post-process), per signature", "",
              "| runtime | length | texts | p50 ms | p95 ms |", "| --- | --- | --- | --- | --- |"]
    for rt, f in ok.items():
        for n, v in f["latency"].items():
            lines.append(f"| {rt} | {n} | {v['texts']} | {v['p50_ms']:.2f} | {v['p95_ms']:.2f} |")
    lines += ["", "Peak RSS: each runtime and reference measured alone in its own process "
              "(VmHWM), interpreter and imports included; \"before load\" is its RSS once the "
              "runtime is imported, before the model is opened.",
              "Plots: `cosine.png` (dense cosine per text), `latency.png` (p50/p95 by length)"
              + (", `fidelity.png` (per language and per length)" if _has_corpus(ok) else "")
              + ".", ""]
    return "\n".join(lines)


def _worst_md(ok: Mapping[str, Any]) -> list[str]:
    """Where each runtime's largest lexical and ColBERT errors are: the text, or the pair."""
    rows = []
    for rt, f in ok.items():
        for figure, w in f.get("worst", {}).items():
            if figure not in ("lexical_abs_err", "colbert_score_abs_err"):
                continue
            if "query" in w:
                where = (f"query {w['query']} ({w['query_tokens']} tokens) x passage {w['passage']} "
                         f"({w['passage_tokens']} tokens)")
            else:
                where = f"text {w['text']} ({w['tokens']} tokens)"
            lang = f", {w['label']}" if "label" in w else ""
            snippet = f": {w['snippet']!r}" if w.get("snippet") else ""
            rows.append(f"| {rt} | {figure} | {w['value']:.3g} | {where}{lang}{snippet} |")
    if not rows:
        return []
    return ["", "Where the largest errors are (text numbers count user texts, then queries, then "
            "passages):", "", "| runtime | figure | value | where |", "| --- | --- | --- | --- |", *rows]


def _has_corpus(ok: Mapping[str, Any]) -> bool:
    return any("per_language" in f for f in ok.values())


def _per_language_md(ok: Mapping[str, Any]) -> list[str]:
    """With a corpus: each language's own figures, and dense cosine by token length."""
    if not _has_corpus(ok):
        return []
    ok = {rt: f for rt, f in ok.items() if "per_language" in f}
    lines = ["", "## Per language (the corpus)", "",
             "Cells: dense cosine min / lexical err / ColBERT err / top-10 agreement min (the "
             "language's queries against every passage).", "",
             "| language | texts (queries) | " + " | ".join(ok) + " |", "| --- | --- |" + " --- |" * len(ok)]
    langs = sorted({lang for f in ok.values() for lang in f["per_language"]})
    for lang in langs:
        first = next(f["per_language"][lang] for f in ok.values() if lang in f["per_language"])
        cells = [f"{_v(f['per_language'].get(lang), 'dense_cosine.min', '.5f')} / "
                 f"{_v(f['per_language'].get(lang), 'lexical_abs_err', '.3f')} / "
                 f"{_v(f['per_language'].get(lang), 'colbert_score_abs_err', '.3f')} / "
                 f"{_v(f['per_language'].get(lang), 'retrieval_top10_agreement.min', '.2f')}"
                 for f in ok.values()]
        lines.append(f"| {lang} | {first['texts']} ({first['queries']}) | " + " | ".join(cells) + " |")
    for rt, f in ok.items():
        if f.get("worse_languages"):
            lines.append(f"\n{rt}: languages past the gate on their own: "
                         + "; ".join(f["worse_languages"]))
    lines += ["", "Dense cosine by the reference's token count (min / 1st percentile):", "",
              "| tokens <= | " + " | ".join(ok) + " |", "| --- |" + " --- |" * len(ok)]
    buckets = sorted({int(b) for f in ok.values() for b in f["per_length"]})
    for b in buckets:
        cells = [f"{_v(f['per_length'].get(str(b)), 'min', '.5f')} / "
                 f"{_v(f['per_length'].get(str(b)), 'p1', '.5f')} "
                 f"({_v(f['per_length'].get(str(b)), 'texts', 'd')})" for f in ok.values()]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    return lines


def plots(out_dir: Path, r: Mapping[str, Any]) -> list[Path]:
    """cosine.png (distribution of 1 - cosine) and latency.png (by length and runtime)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = {rt: f for rt, f in r["runtimes"].items() if "error" not in f}
    cos_path, lat_path = out_dir / "cosine.png", out_dir / "latency.png"
    limit = r["thresholds"]["limits"].get("dense_cosine_min")
    fig, ax = plt.subplots(figsize=(7, 4))
    for rt, f in ok.items():
        if "dense_cosine" not in f:
            continue
        gap = np.sort(np.maximum(1.0 - np.asarray(f["dense_cosine"]["per_text"]), 1e-12))
        ax.plot(np.arange(1, len(gap) + 1) / len(gap), gap, marker=".", label=rt)
    if limit is not None:
        ax.axhline(max(1.0 - limit, 1e-12), color="red", linestyle="--",
                   label=f"threshold (cos {limit:g})")
    ax.set_yscale("log")
    ax.set_xlabel("share of texts")
    ax.set_ylabel("1 - dense cosine vs reference")
    ax.set_title(f"{r['quant']}: dense cosine distribution ({r['texts']['total']} texts)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(cos_path, dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    lengths = sorted({int(n) for f in ok.values() for n in f["latency"]})
    width = 0.8 / max(len(ok), 1)
    for i, (rt, f) in enumerate(ok.items()):
        xs = [j + i * width for j, n in enumerate(lengths) if str(n) in f["latency"]]
        p50 = [f["latency"][str(n)]["p50_ms"] for n in lengths if str(n) in f["latency"]]
        p95 = [f["latency"][str(n)]["p95_ms"] for n in lengths if str(n) in f["latency"]]
        ax.bar(xs, p50, width, label=rt,
               yerr=[np.zeros(len(p50)), np.subtract(p95, p50)], capsize=3)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(lengths))], [str(n) for n in lengths])
    ax.set_xlabel("signature length")
    ax.set_ylabel("ms (bar p50, whisker p95)")
    ax.set_title(f"{r['quant']}: device-step latency by length and runtime")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(lat_path, dpi=100)
    plt.close(fig)
    return [cos_path, lat_path] + ([_fidelity_plot(out_dir, r, ok, plt)] if _has_corpus(ok) else [])


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


def _fidelity_plot(out_dir: Path, r: Mapping[str, Any], ok: Mapping[str, Any], plt: Any) -> Path:
    """fidelity.png: 1 - dense cosine (worst text) per language, and per token length."""
    path = out_dir / "fidelity.png"
    ok = {rt: f for rt, f in ok.items() if "per_language" in f}
    langs = sorted({lang for f in ok.values() for lang in f["per_language"]})
    limit = r["thresholds"]["limits"].get("dense_cosine_min")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4), gridspec_kw={"width_ratios": [3, 1]})
    width = 0.8 / max(len(ok), 1)
    for i, (rt, f) in enumerate(ok.items()):
        gap = [max(1.0 - f["per_language"].get(lang, {}).get("dense_cosine", {}).get("min", 1.0),
                   1e-12) for lang in langs]
        ax.bar(np.arange(len(langs)) + i * width, gap, width, label=rt)
        buckets = sorted(f["per_length"], key=int)
        bx.plot([int(b) for b in buckets],
                [max(1.0 - f["per_length"][b]["min"], 1e-12) for b in buckets], marker="o", label=rt)
    for axis in (ax, bx):
        if limit is not None:
            axis.axhline(max(1.0 - limit, 1e-12), color="red", linestyle="--",
                         label=f"threshold (cos {limit:g})")
        axis.set_yscale("log")
    ax.set_xticks(np.arange(len(langs)) + 0.4 - width / 2, langs, rotation=60, fontsize=8)
    ax.set_ylabel("1 - dense cosine, worst text")
    ax.set_title(f"{r['quant']}: per language ({r['texts']['total']} texts)")
    ax.legend(fontsize=8)
    bx.set_xscale("log", base=2)
    bx.set_xlabel("tokens (reference), bucket upper bound")
    bx.set_title("per length")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def print_summary(r: Mapping[str, Any], report_dir: Path) -> None:
    """The compact table on stdout."""
    from rich.console import Console
    from rich.table import Table

    ref = r["references"][r["primary_reference"]]
    table = Table(title=f"verify {r['bundle']} ({r['quant']}) vs {ref['runtime']}")
    for col in ("runtime", "dense cos min / mean", "lex top10", "lex err", "colbert err",
                "retr. top10 d/s/c", "p50 ms by length", "load s", "model RSS MB (x file)",
                "gate"):
        table.add_column(col)
    for rt, f in r["runtimes"].items():
        if "error" in f:
            table.add_row(rt, *[""] * 8, f"[red]{f['error']}")
            continue
        table.add_row(
            rt, f"{_v(f, 'dense_cosine.all.min', '.6f')} / {_v(f, 'dense_cosine.all.mean', '.6f')}",
            _v(f, "lexical_top10_overlap.mean", ".3f"), _v(f, "lexical_abs_err", ".1e"),
            _v(f, "colbert_score_abs_err", ".1e"),
            "/".join(_v(f, f"retrieval_top10_agreement.{m}", ".2f")
                     for m in ("dense", "sparse", "colbert")),
            " ".join(f"{n}:{v['p50_ms']:.1f}" for n, v in f["latency"].items()),
            f"{f['load_s']:.2f}", f"{f['memory']['model_peak_rss_mb']:.0f} "
                                  f"({f['memory']['model_rss_ratio']:.2f}x)",
            "[green]pass" if not f["failed"] else "[red]FAIL " + "; ".join(f["failed"]))
    console = Console()
    if not console.is_terminal:  # logs and CI: do not squeeze the table into 80 columns
        console = Console(width=150)
    console.print(table)
    console.print(f"{'PASS' if r['passed'] else 'FAIL'}; report: {report_dir / 'report.md'}")


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
        lines.append(f"| {rt} | {res['version']} | {_v(g, 'dense_cosine_min', '.7f')} "
                     f"| {_v(g, 'dense_max_abs', '.2e')} | {_v(g, 'lexical_max_abs', '.2e')} "
                     f"| {_v(g, 'colbert_max_abs', '.2e')} | {_v(g, 'scores_max_abs', '.2e')} "
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
        table.add_row(rt, str(res["version"]), _v(g, "dense_cosine_min", ".6f"),
                      "/".join(_v(g, k, ".1e") for k in ("dense_max_abs", "lexical_max_abs",
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

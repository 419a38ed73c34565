"""verify's report: report.json, report.md for people, its plots and its console table (check's
and bench's, and the latency SVG, are edge_m3.device.report's)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.device.report import cell
from edge_m3.device.report import write_report as write_files
from edge_m3.spec import RSS_ALLOWANCE, RSS_GATE_MIN_BYTES


def write_report(out_dir: Path, report: Mapping[str, Any]) -> list[Path]:
    """verify's report.json, report.md (`markdown`) and its plots cosine.png and latency.png
    (matplotlib: not on a runtime-only install); returns the paths."""
    return write_files(out_dir, report, markdown) + plots(out_dir, report)


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
    ok = {rt: f for rt, f in r["runtimes"].items() if "error" not in f}
    lines = _summary_md(r) + _gate_md(r, ok) + _figures_md(ok) + _worst_md(ok) + _keras_md(ok)
    lines += _per_language_md(ok)
    lines += _memory_md(ok) + _latency_md(ok)
    return "\n".join(lines)


def _summary_md(r: Mapping[str, Any]) -> list[str]:
    """The title, what was checked against what, the verdict; Keras's and the formulas' checks."""
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
                  f"{cell(kvf, 'dense_cosine.min', '.7f')}, lexical err "
                  f"{cell(kvf, 'lexical_abs_err', '.2e')}, ColBERT score err "
                  f"{cell(kvf, 'colbert_score_abs_err', '.2e')}, ids match "
                  f"{cell(kvf, 'input_ids_match', '.3f')}.", ""]
    sf = r.get("score_formulas_vs_flagembedding")
    if sf:
        lines += ["Score formulas vs FlagEmbedding's own `compute_lexical_matching_score` / "
                  f"`colbert_score` on its outputs: max diff {cell(sf, 'sparse', '.1e')} / "
                  f"{cell(sf, 'colbert', '.1e')}.", ""]
    return lines


def _gate_md(r: Mapping[str, Any], ok: Mapping[str, Any]) -> list[str]:
    """Each threshold, its limit and every runtime's figure against it; the runtimes that failed."""
    th = r["thresholds"]
    lines = ["## Gate", "", "| threshold | limit | " + " | ".join(ok) + " |",
              "| --- | --- |" + " --- |" * len(ok)]
    from edge_m3.lab.metrics import gate_value

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
    return lines


def _figures_md(ok: Mapping[str, Any]) -> list[str]:
    """Every runtime's figures against the primary reference."""
    lines = ["", "## Figures (vs the primary reference)", "",
              "| runtime | version | dense cos min/mean per text set | lexical top-10 "
              "overlap | lexical err max (p99) | key Jaccard | ColBERT err max (p99) | retrieval top-10 "
              "dense / sparse / colbert | recall@10 bundle (ref) | ids | load s (first run of each signature) "
              "| peak RSS MB (before load) |",
              "|" + " --- |" * 12]
    methods = ("dense", "sparse", "colbert")
    for rt, f in ok.items():
        per = ", ".join(f"{s} {cell(f, f'dense_cosine.{s}.min', '.6f')}/"
                        f"{cell(f, f'dense_cosine.{s}.mean', '.6f')}"
                        for s in ("user", "queries", "passages") if s in f.get("dense_cosine", {}))
        agr = " / ".join(cell(f, f"retrieval_top10_agreement.{m}", ".3f") for m in methods)
        recall = " / ".join(f"{cell(f, f'recall_at_10.bundle.{m}', '.2f')} "
                            f"({cell(f, f'recall_at_10.reference.{m}', '.2f')})" for m in methods)
        lines.append(
            f"| {rt} | {f['version']} | {per or 'n/a'} | {cell(f, 'lexical_top10_overlap.mean', '.3f')} "
            f"(min {cell(f, 'lexical_top10_overlap.min', '.2f')}) | {cell(f, 'lexical_abs_err', '.2e')} "
            f"({cell(f, 'lexical_abs_err_p99', '.2e')}) "
            f"| {cell(f, 'lexical_key_jaccard.mean', '.3f')} | {cell(f, 'colbert_score_abs_err', '.2e')} "
            f"({cell(f, 'colbert_score_abs_err_p99', '.2e')}) "
            f"| {agr} | {recall} | {f['input_ids_match']:.3f} | {f['load_s']:.2f} "
            f"({cell(f, 'warmup_s', '.2f')}) "
            f"| {f['peak_rss_mb']:.0f} ({f['rss_before_load_mb']:.0f}) |")
    return lines


def _keras_md(ok: Mapping[str, Any]) -> list[str]:
    """Every runtime against the Keras fp32 model, when it ran."""
    lines: list[str] = []
    if any("vs_keras" in f for f in ok.values()):
        lines += ["", "Against the Keras fp32 model (conversion and quantization only):", "",
                  "| runtime | dense cos min | lexical err | ColBERT err | retrieval top-10 min |",
                  "| --- | --- | --- | --- | --- |"]
        for rt, f in ok.items():
            k = f["vs_keras"]
            lines.append(f"| {rt} | {cell(k, 'dense_cosine.min', '.7f')} "
                         f"| {cell(k, 'lexical_abs_err', '.2e')} "
                         f"| {cell(k, 'colbert_score_abs_err', '.2e')} "
                         f"| {cell(k, 'retrieval_top10_agreement.min', '.3f')} |")
    return lines


def _memory_md(ok: Mapping[str, Any]) -> list[str]:
    """The model's memory and the first call of each signature, per runtime."""
    lines = ["", "## Memory and first-run cost", "",
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
    return lines


def _latency_md(ok: Mapping[str, Any]) -> list[str]:
    """The device step's latency per signature, and what the figures and plots are."""
    lines = ["", "## Latency of the device step (tokenize + run + post-process), per signature", "",
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
    return lines


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
        cells = [f"{cell(f['per_language'].get(lang), 'dense_cosine.min', '.5f')} / "
                 f"{cell(f['per_language'].get(lang), 'lexical_abs_err', '.3f')} / "
                 f"{cell(f['per_language'].get(lang), 'colbert_score_abs_err', '.3f')} / "
                 f"{cell(f['per_language'].get(lang), 'retrieval_top10_agreement.min', '.2f')}"
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
        cells = [f"{cell(f['per_length'].get(str(b)), 'min', '.5f')} / "
                 f"{cell(f['per_length'].get(str(b)), 'p1', '.5f')} "
                 f"({cell(f['per_length'].get(str(b)), 'texts', 'd')})" for f in ok.values()]
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
    _save(fig, cos_path, plt)

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
    _save(fig, lat_path, plt)
    return [cos_path, lat_path] + ([_fidelity_plot(out_dir, r, ok, plt)] if _has_corpus(ok) else [])


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
    _save(fig, path, plt)
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
            rt, f"{cell(f, 'dense_cosine.all.min', '.6f')} / {cell(f, 'dense_cosine.all.mean', '.6f')}",
            cell(f, "lexical_top10_overlap.mean", ".3f"), cell(f, "lexical_abs_err", ".1e"),
            cell(f, "colbert_score_abs_err", ".1e"),
            "/".join(cell(f, f"retrieval_top10_agreement.{m}", ".2f")
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


def _save(fig: Any, path: Path, plt: Any) -> None:
    """Every verify plot's last step: laid out, written at 100 dpi, and its memory released."""
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

"""`verify`'s report: report.json, report.md and PNG plots, for people and for CI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_verify_report(out_dir: Path, report: dict[str, Any]) -> list[Path]:
    """Write the three artefacts; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "report.json", out_dir / "report.md"]
    paths[0].write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    paths[1].write_text(_markdown(report), encoding="utf-8")
    paths += _plots(out_dir, report)
    return paths


def _markdown(r: dict[str, Any]) -> str:
    lines = [f"# edge-m3 verify: {r['bundle']}", "",
             f"- variant: **{r['quant']}**; reference: {r['reference']} "
             f"(load {r['reference_load_s']:.1f} s, peak RSS {r['reference_peak_rss_mb']:.0f} MB)",
             f"- texts: {r['texts']} ({r['user_texts']} from --texts, {r['queries']} queries and "
             f"{r['passages']} passages of the built-in multilingual retrieval set)",
             f"- thresholds: `{json.dumps(r['thresholds'])}`",
             f"- result: **{'PASS' if r['passed'] else 'FAIL'}**", "",
             "| runtime | dense cos min | dense cos mean | lexical top-10 overlap | lexical max err "
             "| ColBERT score err | retrieval top-10 (dense/sparse/colbert) | ids = reference "
             "| load s | peak RSS MB | gate |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for rt, f in r["runtimes"].items():
        agr = f["retrieval_top10_agreement"]
        lines.append(
            f"| {rt} | {f['dense_cosine']['min']:.6f} | {f['dense_cosine']['mean']:.6f} "
            f"| {f['lexical_top10_overlap']['mean']:.3f} | {f['lexical_max_abs_err']:.2e} "
            f"| {f['colbert_score_abs_err_max']:.2e} "
            f"| {agr['dense']:.3f} / {agr['sparse']:.3f} / {agr['colbert']:.3f} "
            f"| {f['ids_match_reference']}/{f['texts']} | {f['load_s']:.2f} "
            f"| {f['peak_rss_mb']:.0f} | {'pass' if not f['failed'] else '; '.join(f['failed'])} |")
    lines += ["", "## Latency of the device step (tokenize + run + post-process)", "",
              "| runtime | length | texts | p50 ms | p95 ms |", "| --- | --- | --- | --- | --- |"]
    for rt, f in r["runtimes"].items():
        for n, v in f["latency"].items():
            lines.append(f"| {rt} | {n} | {v['n']} | {v['p50_ms']:.2f} | {v['p95_ms']:.2f} |")
    lines += ["", "Plots: `cosine.png` (dense cosine per text), `latency.png` (p50 by length).", ""]
    return "\n".join(lines)


def _plots(out_dir: Path, r: dict[str, Any]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cos_path, lat_path = out_dir / "cosine.png", out_dir / "latency.png"
    fig, ax = plt.subplots(figsize=(7, 4))
    for rt, f in r["runtimes"].items():
        ax.hist(f["dense_cosine"]["all"], bins=30, alpha=0.6, label=rt)
    ax.axvline(r["thresholds"].get("dense_cosine_min", 1.0), color="red", linestyle="--",
               label="threshold")
    ax.set_xlabel("dense cosine vs reference")
    ax.set_ylabel("texts")
    ax.set_title(f"{r['quant']}: dense cosine per text")
    ax.legend()
    fig.tight_layout()
    fig.savefig(cos_path, dpi=100)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4))
    runtimes = list(r["runtimes"])
    lengths = sorted({int(n) for f in r["runtimes"].values() for n in f["latency"]})
    width = 0.8 / max(len(runtimes), 1)
    for i, rt in enumerate(runtimes):
        lat = r["runtimes"][rt]["latency"]
        xs = [j + i * width for j, n in enumerate(lengths) if str(n) in lat]
        ax.bar(xs, [lat[str(n)]["p50_ms"] for n in lengths if str(n) in lat], width, label=rt)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(lengths))], [str(n) for n in lengths])
    ax.set_xlabel("signature length")
    ax.set_ylabel("p50 ms")
    ax.set_title("latency by length and runtime")
    ax.legend()
    fig.tight_layout()
    fig.savefig(lat_path, dpi=100)
    plt.close(fig)
    return [cos_path, lat_path]

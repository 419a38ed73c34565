"""`edge-m3 verify`: the bundle's device pipeline against the reference, gated, with a report.

References: FlagEmbedding's BGEM3FlagModel itself (torch fp32) when installed, the primary
one; and always the fp32 Keras model the bundle was converted from, so a failure can be placed
(conversion or quantization vs. the re-implementation). Reference outputs depend only on the
checkpoint, texts, length and reference code, so they are cached: verifying the fp32, fp16 and
int8 variants of one checkpoint computes them once.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.errors import EdgeM3Error
from edge_m3.harness import (
    load_outputs,
    load_thresholds,
    read_texts,
    retrieval_set,
    run_workers,
    select_runtimes,
    write_atomic,
)
from edge_m3.metrics import compare, gate

REFERENCE_NAMES = {"flag": "flagembedding", "keras": "keras"}
# Source files whose code decides the Keras reference's outputs (part of its cache key).
_KERAS_SOURCES = ("model.py", "checkpoint.py", "safeload.py", "tokenizer.py", "normalizer.py",
                  "unigram.py", "postprocess.py")


def flagembedding_installed() -> bool:
    return importlib.util.find_spec("FlagEmbedding") is not None


# --------------------------------------------------------------------------- reference cache


def default_cache_dir() -> Path:
    return Path(os.environ.get("EDGE_M3_CACHE") or Path.home() / ".cache" / "edge-m3")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "-"


def reference_key(kind: str, checkpoint_dir: Path, texts: Sequence[str], max_length: int,
                  pairs: Mapping[str, Sequence[int]] | None = None) -> str:
    """Checkpoint files (name, size, mtime), texts, length, and the reference's own code."""
    h = hashlib.sha256()
    h.update(json.dumps([kind, list(texts), max_length, pairs]).encode())
    for f in sorted(checkpoint_dir.iterdir()):
        if f.is_file():
            st = f.stat()
            h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns};".encode())
    if kind == "flag":
        deps = ("FlagEmbedding", "torch", "transformers", "tokenizers")
    else:
        deps = ("tensorflow-cpu", "tensorflow", "keras", "sentencepiece")
        here = Path(__file__).parent
        for name in _KERAS_SOURCES:
            if (here / name).is_file():
                h.update((here / name).read_bytes())
    h.update(json.dumps([_version(d) for d in deps]).encode())
    return f"{kind}-{h.hexdigest()[:20]}"


def _cache_get(cache: Path | None, key: str, dest: Path) -> bool:
    if cache is None:
        return False
    src = cache / "reference" / key
    if not (src.with_suffix(".json").is_file() and src.with_suffix(".npz").is_file()):
        return False
    for ext in (".npz", ".json"):
        shutil.copyfile(src.with_suffix(ext), dest.with_suffix(ext))
    return True


def _cache_put(cache: Path | None, key: str, src: Path) -> None:
    """Copy in, .npz before .json: the .json's presence marks a complete entry."""
    if cache is None:
        return
    try:
        (cache / "reference").mkdir(parents=True, exist_ok=True)
        for ext in (".npz", ".json"):
            dst = (cache / "reference" / key).with_suffix(ext)
            tmp = dst.with_name(dst.name + ".part")
            shutil.copyfile(src.with_suffix(ext), tmp)
            os.replace(tmp, dst)
    except OSError:
        pass  # a cache that cannot be written only costs time next run


def compute_references(checkpoint_dir: Path, texts: Sequence[str], max_length: int, work: Path,
                       cache: Path | None, pairs: Mapping[str, Sequence[int]]
                       ) -> dict[str, tuple[list[dict[str, Any]], dict[str, Any]]]:
    """Keras always, FlagEmbedding when installed; the missing ones run side by side.

    `pairs` (query and passage indexes) are scored by FlagEmbedding's own functions too.
    """
    kinds = ["flag", "keras"] if flagembedding_installed() else ["keras"]
    (work / "texts.json").write_text(json.dumps(list(texts)))
    (work / "pairs.json").write_text(json.dumps(dict(pairs)))
    jobs, cached = [], {}
    for kind in kinds:
        key = reference_key(kind, checkpoint_dir, texts, max_length,
                            dict(pairs) if kind == "flag" else None)
        cached[kind] = _cache_get(cache, key, work / kind)
        if not cached[kind]:
            jobs.append((kind, key))
    errors = run_workers([([kind, str(checkpoint_dir), str(work / "texts.json"), str(max_length),
                            str(work / kind), *([str(work / "pairs.json")] if kind == "flag" else [])],
                           f"reference {REFERENCE_NAMES[kind]}")
                          for kind, _ in jobs], parallel=True)
    for (kind, key), error in zip(jobs, errors, strict=True):
        if error:
            raise EdgeM3Error(error)
        _cache_put(cache, key, work / kind)
    out = {}
    for kind in kinds:
        outs, meta = load_outputs(work / kind)
        meta["cached"] = cached[kind]
        out[REFERENCE_NAMES[kind]] = (outs, meta)
    return out


# --------------------------------------------------------------------------- verify


def _latency(meta: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    return {n: {"p50_ms": 1e3 * float(np.percentile(v, 50)),
                "p95_ms": 1e3 * float(np.percentile(v, 95)), "texts": len(v)}
            for n, v in sorted(meta["latency"].items(), key=lambda kv: int(kv[0]))}


def _formula_check(refs: Mapping[str, Any], sets: Mapping[str, list[int]]) -> dict[str, float] | None:
    """Largest difference between our scores and FlagEmbedding's own, on its own outputs."""
    if "flagembedding" not in refs or not refs["flagembedding"][1].get("scores"):
        return None
    from edge_m3.metrics import score_matrices

    outs, meta = refs["flagembedding"]
    ours = score_matrices(outs, sets["queries"], sets["passages"])
    return {m: float(np.abs(ours[m] - np.asarray(v)).max(initial=0.0))
            for m, v in meta["scores"].items()}


def _brief(f: Mapping[str, Any]) -> dict[str, Any]:
    """The headline figures of a secondary comparison."""
    out = {k: f[k] for k in ("lexical_abs_err", "colbert_score_abs_err",
                             "retrieval_top10_agreement", "input_ids_match") if k in f}
    if "dense_cosine" in f:
        out["dense_cosine"] = f["dense_cosine"]["all"]
    return out


def _v(f: Mapping[str, Any] | None, path: str, spec: str) -> str:
    """A figure by dotted path, formatted; "n/a" when the bundle lacks that head."""
    value: Any = f
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return "n/a"
        value = value[part]
    return format(value, spec)


def run_verify(a: argparse.Namespace) -> int:
    """The whole `verify` command; 0 when every checked runtime meets every threshold, else 1."""
    from edge_m3.bundle import load_bundle
    from edge_m3.checkpoint import resolve_checkpoint

    bundle = load_bundle(a.bundle)  # refuses a bundle whose files do not match the manifest
    quant = bundle.manifest["quant"]
    limits, limits_source = load_thresholds(a.thresholds, quant)
    runtimes = select_runtimes(bundle, a.runtime)
    user = read_texts(a.texts) if a.texts else []
    ckpt_dir, _ = resolve_checkpoint(a.reference)
    rs = retrieval_set()
    queries, passages = [q["text"] for q in rs["queries"]], list(rs["passages"])
    texts = [*user, *queries, *passages]
    sets = {"user": list(range(len(user))),
            "queries": list(range(len(user), len(user) + len(queries))),
            "passages": list(range(len(user) + len(queries), len(texts)))}
    relevant = [int(q["relevant"]) for q in rs["queries"]]
    max_length = int(bundle.manifest["max_length"])
    cache = None if a.no_cache else Path(a.cache or default_cache_dir())
    report_dir = Path(a.report or Path("reports") / Path(a.bundle).resolve().name)

    with tempfile.TemporaryDirectory(prefix="edge-m3-verify-") as tmp_s:
        tmp = Path(tmp_s)
        refs = compute_references(Path(ckpt_dir), texts, max_length, tmp, cache,
                                  {"queries": sets["queries"], "passages": sets["passages"]})
        primary = "flagembedding" if "flagembedding" in refs else "keras"
        ref_outs = refs[primary][0]
        formulas = _formula_check(refs, sets)
        results: dict[str, Any] = {}
        for rt in runtimes:  # one after another, so latencies are not disturbed
            error = run_workers([(["bundle", str(bundle.path), rt, str(a.threads),
                                   str(tmp / "texts.json"), str(tmp / rt)], f"runtime {rt}")])[0]
            if error:
                results[rt] = {"error": error, "failed": [error]}
                continue
            outs, meta = load_outputs(tmp / rt)
            figures = compare(outs, ref_outs, sets, sets["queries"], sets["passages"], relevant)
            if primary != "keras":
                figures["vs_keras"] = _brief(compare(outs, refs["keras"][0], sets,
                                                     sets["queries"], sets["passages"]))
            figures.update(version=meta["version"], file=meta["file"], latency=_latency(meta),
                           load_s=meta["load_s"], import_s=meta["import_s"],
                           warmup_s=meta["warmup_s"],
                           peak_rss_mb=meta["peak_rss"] / 1e6,
                           rss_before_load_mb=meta["rss_before_load"] / 1e6,
                           failed=gate(figures, limits))
            results[rt] = figures
        keras_vs_flag = None
        if primary == "flagembedding":
            keras_vs_flag = _brief(compare(refs["keras"][0], ref_outs, sets, sets["queries"],
                                           sets["passages"]))
    report = {
        "bundle": str(bundle.path), "quant": quant, "threads": a.threads,
        "source": bundle.manifest.get("source", {}).get("id"),
        "reference_checkpoint": str(a.reference),
        "primary_reference": primary,
        "references": {name: {k: meta[k] for k in ("runtime", "version", "load_s", "cached")}
                       | {"peak_rss_mb": meta["peak_rss"] / 1e6} for name, (_, meta) in refs.items()},
        "keras_vs_flagembedding": keras_vs_flag,
        "score_formulas_vs_flagembedding": formulas,
        "texts": {"total": len(texts), "user": len(user), "queries": len(queries),
                  "passages": len(passages), "max_length": max_length,
                  "languages": sorted({q["lang"] for q in rs["queries"]})},
        "thresholds": {"file": limits_source, "variant": quant, "limits": limits},
        "runtimes_checked": list(runtimes),
        "runtimes": results,
        "passed": bool(results) and all(not r["failed"] for r in results.values()),
    }
    write_report(report_dir, report)
    print_summary(report, report_dir)
    return 0 if report["passed"] else 1


# --------------------------------------------------------------------------- report


def write_report(out_dir: Path, report: Mapping[str, Any]) -> list[Path]:
    """report.json, report.md, cosine.png, latency.png; returns their paths."""
    paths = [out_dir / "report.json", out_dir / "report.md"]
    write_atomic(paths[0], json.dumps(report, indent=1, ensure_ascii=False) + "\n", "--report")
    write_atomic(paths[1], markdown(report), "--report")
    return paths + plots(out_dir, report)


def _fmt(key: str, value: float) -> str:
    """Cosines need 7 decimals to be told apart, errors need exponents."""
    if key.startswith("dense_cosine"):
        return f"{value:.7f}"
    return f"{value:.2e}" if "err" in key else f"{value:.3f}"


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
             f"{t['passages']} passages of the built-in retrieval set in {len(t['languages'])} "
             f"languages), max_length {t['max_length']}",
             f"- thresholds: `{th['file']}` [{th['variant']}]",
             f"- result: **{'PASS' if r['passed'] else 'FAIL'}**", ""]
    kvf = r.get("keras_vs_flagembedding")
    if kvf:
        lines += [f"Keras fp32 re-implementation vs FlagEmbedding: dense cosine min "
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
    from edge_m3.metrics import gate_value

    for key, limit in th["limits"].items():
        cells = []
        for f in ok.values():
            value = gate_value(f, key.rpartition("_")[0])
            mark = "✗" if any(x.startswith(key + ":") for x in f["failed"]) else "✓"
            cells.append("n/a (head not exported)" if value is None else f"{_fmt(key, value)} {mark}")
        lines.append(f"| {key} | {limit:g} | " + " | ".join(cells) + " |")
    for rt, f in r["runtimes"].items():
        if "error" in f:
            lines.append(f"\n**{rt}: {f['error']}**")
    lines += ["", "## Figures (vs the primary reference)", "",
              "| runtime | version | dense cos min/mean per text set | lexical top-10 "
              "overlap | lexical err | key Jaccard | ColBERT err | retrieval top-10 "
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
            f"| {_v(f, 'lexical_key_jaccard.mean', '.3f')} | {_v(f, 'colbert_score_abs_err', '.2e')} "
            f"| {agr} | {recall} | {f['input_ids_match']:.3f} | {f['load_s']:.2f} "
            f"({_v(f, 'warmup_s', '.2f')}) "
            f"| {f['peak_rss_mb']:.0f} ({f['rss_before_load_mb']:.0f}) |")
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
    lines += ["", "## Latency of the device step (tokenize + run + post-process), per signature", "",
              "| runtime | length | texts | p50 ms | p95 ms |", "| --- | --- | --- | --- | --- |"]
    for rt, f in ok.items():
        for n, v in f["latency"].items():
            lines.append(f"| {rt} | {n} | {v['texts']} | {v['p50_ms']:.2f} | {v['p95_ms']:.2f} |")
    lines += ["", "Peak RSS: each runtime and reference measured alone in its own process "
              "(VmHWM), interpreter and imports included; \"before load\" is its RSS once the "
              "runtime is imported, before the model is opened.",
              "Plots: `cosine.png` (dense cosine per text), `latency.png` (p50/p95 by length).", ""]
    return "\n".join(lines)


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
    return [cos_path, lat_path]


def print_summary(r: Mapping[str, Any], report_dir: Path) -> None:
    """The compact table on stdout."""
    from rich.console import Console
    from rich.table import Table

    ref = r["references"][r["primary_reference"]]
    table = Table(title=f"verify {r['bundle']} ({r['quant']}) vs {ref['runtime']}")
    for col in ("runtime", "dense cos min / mean", "lex top10", "lex err", "colbert err",
                "retr. top10 d/s/c", "p50 ms by length", "load s", "RSS MB", "gate"):
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
            f"{f['load_s']:.2f}", f"{f['peak_rss_mb']:.0f}",
            "[green]pass" if not f["failed"] else "[red]FAIL " + "; ".join(f["failed"]))
    console = Console()
    if not console.is_terminal:  # logs and CI: do not squeeze the table into 80 columns
        console = Console(width=150)
    console.print(table)
    console.print(f"{'PASS' if r['passed'] else 'FAIL'}; report: {report_dir / 'report.md'}")

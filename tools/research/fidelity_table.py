"""Every variant against FlagEmbedding on the fidelity corpus: one markdown table (issue 26).

    python -m tools.inputs.make_fidelity_corpus     # ~/.cache/edge-m3/fidelity/corpus.jsonl
    python -m tools.research.fidelity_table --reference CKPT --sample 500 --seed 0 \\
        --out reports/fidelity BUNDLE[=RUNTIME,...] ...

Runs `edge-m3 verify --texts CORPUS [--sample N --seed S]` on each bundle (under the runtimes
named after `=`, else every installed one; a report already in `--out` is reused with
`--reuse`), then prints per variant and runtime: file size, dense cosine min, 1st percentile
and mean, the largest lexical weight error and its 99th percentile over texts, the
largest ColBERT score error and its 99th percentile over query x passage pairs, the top-10
retrieval agreement of every query against every passage (dense / sparse / ColBERT), and the
languages where the variant is worst (its lowest dense cosine and agreement by language) or
that miss a limit of the variant's gate on their own. The references are cached (`--cache`),
so FlagEmbedding runs once for every bundle of one checkpoint.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from edge_m3.harness.fidelity import default_corpus


def _verify(bundle: Path, runtimes: str | None, a: argparse.Namespace, report: Path) -> None:
    from edge_m3.cli import main

    args = ["verify", str(bundle), "--reference", str(a.reference), "--texts", str(a.texts),
            "--report", str(report), "--cache", str(a.cache)]
    if a.sample:
        args += ["--sample", str(a.sample), "--seed", str(a.seed)]
    if runtimes:
        args += ["--runtime", runtimes]
    code = main(args)
    if code == 2:
        raise SystemExit(f"verify {bundle}: bad input (above)")


def _worst(per: Mapping[str, Any], path: Sequence[str]) -> tuple[str, float] | None:
    vals = []
    for lang, f in per.items():
        v: Any = f
        for p in path:
            v = v.get(p) if isinstance(v, Mapping) else None
        if v is not None:
            vals.append((float(v), lang))
    return (min(vals)[1], min(vals)[0]) if vals else None


def rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per runtime of a verify report."""
    from edge_m3.runtime.registry import RUNTIMES

    out = []
    for rt, f in report["runtimes"].items():
        if "error" in f:
            out.append({"variant": f"{report['quant']} ({rt})", "error": f["error"]})
            continue
        fmt = RUNTIMES[rt].format
        per = f.get("per_language", {})
        dense = f["dense_cosine"]["all"]
        agree = f["retrieval_top10_agreement"]
        worst_cos = _worst(per, ("dense_cosine", "min"))
        worst_agree = _worst(per, ("retrieval_top10_agreement", "min"))
        out.append({
            "variant": f"{'ONNX' if fmt == 'onnx' else 'TFLite'} {Path(report['bundle']).name}",
            "runtime": f"{rt} {f['version']}", "file_mb": f["memory"]["model_mb"],
            "dense_min": dense["min"], "dense_p1": dense.get("p1"), "dense_mean": dense["mean"],
            "lexical_err": f.get("lexical_abs_err"), "colbert_err": f.get("colbert_score_abs_err"),
            "lexical_p99": f.get("lexical_abs_err_p99"), "colbert_p99": f.get("colbert_score_abs_err_p99"),
            "worst": {k: {x: w[x] for x in w if x != "snippet"} for k, w in f.get("worst", {}).items()},
            "agree": agree, "worst_cos": worst_cos, "worst_agree": worst_agree,
            "missed": f.get("worse_languages", []), "failed": f["failed"]})
    return out


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def table(reports: Sequence[Mapping[str, Any]]) -> str:
    head = ("| variant | runtime | file MB | dense cos min | p1 | mean | lexical err max (p99) "
            "| ColBERT err max (p99) "
            "| top-10 agreement d / s / c | worst language: dense min; agreement | languages past "
            "the gate on their own | gate |")
    lines = [head, "|" + " --- |" * 12]
    for r in reports:
        for row in rows(r):
            if "error" in row:
                lines.append(f"| {row['variant']} | {row['error']} |" + " |" * 10)
                continue
            a = row["agree"]
            wc, wa = row["worst_cos"], row["worst_agree"]
            lines.append(
                f"| {row['variant']} | {row['runtime']} | {row['file_mb']:.1f} | {row['dense_min']:.5f} "
                f"| {row['dense_p1']:.5f} | {row['dense_mean']:.5f} | {row['lexical_err']:.3f} "
                f"({_num(row['lexical_p99'])}) | {row['colbert_err']:.3f} ({_num(row['colbert_p99'])}) "
                f"| {a['dense']:.3f} / {a['sparse']:.3f} / {a['colbert']:.3f} "
                f"| {wc[0]} {wc[1]:.4f}; {wa[0]} {wa[1]:.2f} "
                f"| {', '.join(row['missed'][:6]) or '-'}{' ...' if len(row['missed']) > 6 else ''} "
                f"| {'pass' if not row['failed'] else 'FAIL: ' + '; '.join(row['failed'])} |")
    texts = reports[0]["texts"] if reports else {}
    corpus = texts.get("corpus") or {}
    sampled = f", sample {corpus['sample']} seed {corpus['seed']}" if corpus.get("sample") else ""
    lines += ["", f"{texts.get('total')} texts ({texts.get('queries')} queries x "
              f"{texts.get('passages')} passages, {len(texts.get('languages', []))} languages, "
              f"{len(corpus.get('scripts', []))} scripts) from {corpus.get('file')}"
              f"{sampled}, max_length {texts.get('max_length')}; reference "
              f"{reports[0]['primary_reference'] if reports else ''}."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from edge_m3.harness.references import default_cache_dir

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bundles", nargs="*", help="BUNDLE or BUNDLE=RUNTIME[,RUNTIME]")
    p.add_argument("--reference", type=Path, help="the checkpoint the bundles were built from")
    p.add_argument("--texts", type=Path, default=default_corpus(), help="the corpus (JSON lines)")
    p.add_argument("--sample", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("reports/fidelity"))
    p.add_argument("--cache", type=Path, default=default_cache_dir())
    p.add_argument("--reuse", action="store_true", help="keep reports already in --out")
    p.add_argument("--json", type=Path, help="also write the rows here")
    a = p.parse_args(argv)
    reports = []
    for spec in a.bundles:
        bundle, _, runtimes = spec.partition("=")
        tag = Path(bundle).name + (f"-{runtimes.replace(',', '-')}" if runtimes else "")
        report = a.out / tag
        if not (a.reuse and (report / "report.json").is_file()):
            if a.reference is None:
                p.error("--reference is needed to verify")
            _verify(Path(bundle), runtimes or None, a, report)
        reports.append(json.loads((report / "report.json").read_text("utf-8")))
    print(table(reports))
    if a.json:
        a.json.write_text(json.dumps([row for r in reports for row in rows(r)], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

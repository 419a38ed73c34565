"""One markdown table per model: every variant x runtime x thread count, as issue 7 asks.

    python -m tools.bench.bench_report demo/e5-small-{fp32,fp16,int8,int8-tflite214,int4} \\
        --reference demo/e5-small-bge-m3-layout --lengths 16,128,512 --threads 1,2

For each bundle it runs `edge-m3 verify` (dense cosine, lexical and ColBERT score errors and
retrieval agreement vs FlagEmbedding, per runtime) and `edge-m3 bench` (p50 latency of n real
tokens padded to the signature the device pipeline picks, load time, peak RSS, and
FlagEmbedding's torch fp32 timed in the same run, so each speedup compares two figures taken
minutes apart on the same machine state). Prints the table; `--json` keeps the raw figures;
`--results docs/results/speed_variants.json` (speed_onnx.json, speed_fullsize.json) writes the
table for docs/benchmarks.md (tools/bench/results.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tools.bench.results import Load, add_option, write_result

TORCH = "torch fp32 (FlagEmbedding)"


def edge_m3(*args: str) -> int:
    """One CLI call in its own process (each runtime inside runs in a child of its own)."""
    return subprocess.run([sys.executable, "-m", "edge_m3.cli", *args]).returncode


def default_runtimes(bundle: Path, exclude: list[str]) -> list[str]:
    """What verify/bench would pick by default (installed, not failed at build), minus exclude."""
    from edge_m3.bundle import load_bundle
    from edge_m3.runtime.choice import select_runtimes

    return [r.name for r in select_runtimes(load_bundle(bundle, verify=False), None)
            if r.name not in exclude]


def model_size(bundle: Path, fmt: str) -> int:
    from edge_m3.bundle import load_bundle

    b = load_bundle(bundle, verify=False)
    return b.manifest.model_bytes(b.model_entry(fmt))


def measure(bundle: Path, a: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """verify (unless --no-verify) then bench; both reports read back."""
    out: dict[str, Any] = {"bundle": str(bundle)}
    runtimes = a.runtimes or ",".join(default_runtimes(bundle, a.exclude.split(",")))
    if not a.no_verify:
        rc = edge_m3("verify", str(bundle), "--reference", a.reference, "--report",
                     str(tmp / bundle.name), "--runtime", runtimes)
        if rc not in (0, 1):  # 1 = a gate failed: the figures still stand
            raise SystemExit(f"verify {bundle} failed (exit {rc})")
        out["verify"] = json.loads((tmp / bundle.name / "report.json").read_text())
    bench_json = tmp / f"{bundle.name}-bench.json"
    rc = edge_m3("bench", str(bundle), "--reference", a.reference, "--threads", a.threads,
                 "--lengths", a.lengths, "--repeats", str(a.repeats), "--warmup", str(a.warmup),
                 "--json", str(bench_json), "--runtimes", runtimes)
    if rc != 0:
        raise SystemExit(f"bench {bundle} failed (exit {rc})")
    out["bench"] = json.loads(bench_json.read_text())
    return out


def gate_cells(f: dict[str, Any]) -> list[str]:
    """verify's figures for one runtime: dense cosine min / mean, lexical and ColBERT score
    errors, retrieval top-10 agreement (worst of dense/sparse/ColBERT); n/a without verify."""
    cos = f.get("dense_cosine", {}).get("all")
    if not cos:
        return ["n/a"] * 4
    return [f"{cos['min']:.4f} / {cos['mean']:.4f}", f"{f.get('lexical_abs_err', 0):.3f}",
            f"{f.get('colbert_score_abs_err', 0):.3f}",
            f"{f.get('retrieval_top10_agreement', {}).get('min', 1):.3f}"]


def table(results: list[dict[str, Any]], lengths: list[str]) -> str:
    """Markdown: torch rows first (from the first bundle's run), then each variant's rows."""
    head = ["variant", "runtime", "threads", "file", "load s",
            *[f"p50 @{n} tok (x torch)" for n in lengths], "peak RSS", "dense cos min / mean",
            "lexical err", "ColBERT score err", "retrieval top-10"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in results[0]["bench"]["rows"]:
        if row["runtime"] == TORCH:
            cells = [f"{row['lengths'][n]['p50_ms']:,.1f} ms" for n in lengths]
            lines.append(f"| reference | {TORCH} | {row['threads']} | | {row['load_s']:.2f} | "
                         + " | ".join(cells) + f" | {row['peak_rss_mb']:,.0f} MB | 1 | 0 | 0 | 1 |")
    for res in results:
        bundle = Path(res["bundle"])
        quant = res["bench"]["quant"]
        figures = res.get("verify", {}).get("runtimes", {})
        for row in res["bench"]["rows"]:
            rt = row["runtime"]
            if rt == TORCH:
                continue
            fmt = "onnx" if rt == "onnxruntime" else "tflite"
            cells = [f"{f['p50_ms']:,.1f} ms ({f['p50_speedup']:.1f}x)"
                     for f in (row["lengths"][n] for n in lengths)]
            cache = row.get("cache_mode")  # LiteRT runs twice: cold, then warm cache file
            label = f"{rt} {row.get('version') or ''}" + (f" ({cache} cache)" if cache not in
                                                          (None, "none") else "")
            lines.append(f"| {quant} {fmt} | {label} | {row['threads']} "
                         f"| {model_size(bundle, fmt) / 1e6:,.1f} MB | {row['load_s']:.2f} | "
                         + " | ".join(cells) + f" | {row['peak_rss_mb']:,.0f} MB | "
                         + " | ".join(gate_cells(figures.get(rt) or {})) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bundles", nargs="+", type=Path)
    p.add_argument("--reference", required=True, help="checkpoint for FlagEmbedding (torch fp32)")
    p.add_argument("--lengths", default="16,128,512", help="real tokens per input")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--runtimes", default=None,
                   help="default: every installed one the bundle runs on, less --exclude")
    p.add_argument("--exclude", default="tf", help="runtimes left out by default (TF is no "
                                                   "device runtime)")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--no-verify", action="store_true", help="latency and memory only")
    p.add_argument("--json", type=Path, default=None)
    add_option(p, "speed_variants.json")
    a = p.parse_args()
    load = Load()
    with tempfile.TemporaryDirectory(prefix="edge-m3-report-") as tmp:
        results = [measure(b, a, Path(tmp)) for b in a.bundles]
    if a.json:
        a.json.write_text(json.dumps(results, indent=1) + "\n")
    text = table(results, a.lengths.split(","))
    print(text)
    if a.results:
        head, _, *body = text.splitlines()
        cells = [[c.strip() for c in line.strip("|").split(" | ")] for line in (head, *body)]
        write_result(a.results, title=f"{', '.join(b.name for b in a.bundles)} against torch fp32",
                     module="tools.bench.bench_report", columns=cells[0], rows=cells[1:], load=load,
                     notes=[f"p50 of {a.repeats} runs after {a.warmup} warm-ups, n real tokens padded to the "
                            "signature the device pipeline picks; (x torch) = FlagEmbedding's p50 over ours, "
                            "timed in the same run" + ("" if a.no_verify else "; gate figures from "
                                                       "`edge-m3 verify` on the built-in retrieval set") + "."])


if __name__ == "__main__":
    main()

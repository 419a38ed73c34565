"""Scale benchmark of `edge-m3 build`: wall time, peak RSS and file sizes per variant.

    python -m tools.bench.bench_build checkpoints/bge-m3-random --quant int8,fp16
    python -m tools.bench.bench_build checkpoints/bge-m3-random-xlmr --quant int8 \
        --vocab-corpus build/vocab-corpus/corpus.txt

With --vocab-corpus each variant is built twice, untrimmed and trimmed to the corpus, and the
table gives the kept vocabulary rows next to the sizes.

Each build runs `edge-m3 build` as a child process and reads the peak RSS of the largest
process in its tree (the builder runs tracing and each conversion in children of its own).
`--results docs/results/build_fullsize.json` (build_onnx_fullsize.json, build_trim.json,
build_quant_fullsize.json) also writes the table for docs/benchmarks.md (tools/bench/results.py).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from edge_m3.spec import Manifest
from tools.bench.results import Load, add_option, write_result


def run_build(checkpoint: Path, quant: str, out: Path, extra: list[str]) -> dict[str, float]:
    """One build in a fresh process tree; wall time and the tree's peak RSS."""
    code = (
        "import json,resource,subprocess,sys,time;t=time.perf_counter();"
        "r=subprocess.run(sys.argv[1:]);w=time.perf_counter()-t;"
        "print(json.dumps({'rc':r.returncode,'wall':w,"
        "'peak_child':resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss*1024}))"
    )
    cmd = [sys.executable, "-c", code, sys.executable, "-m", "edge_m3.cli", "build",
           "--checkpoint", str(checkpoint), "--quant", quant, "--out", str(out), "--kits",
           "none", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    sys.stderr.write(proc.stderr[-3000:])
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    if res["rc"] != 0:
        raise SystemExit(f"build {quant} failed")
    return res


def manifest_rows(out: Path, label: str, res: dict[str, float],
                  rows_total: int) -> list[tuple[str, ...]]:
    """One table row per model file of the bundle at `out`; rows_total: the untrimmed rows."""
    manifest = Manifest.read(out / "manifest.json")
    vocab = manifest.tokenizer.vocab_map or {}
    rows = []
    for m in manifest.models:
        size = manifest.model_bytes(m)
        kept = vocab.get("kept", rows_total)
        rows.append((f"{m.format} {label}", f"{size / 1e6:,.1f} MB",
                     f"{kept:,}" if isinstance(kept, int) else str(kept),
                     f"{res['wall']:.0f} s", f"{res['peak_child'] / 1e9:.2f} GB",
                     ", ".join(f"{k} {v}" for k, v in m.oldest_runtime.items()
                               if k != "converter_min_runtime_version")))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", type=Path)
    p.add_argument("--quant", default="int8,fp16")
    p.add_argument("--formats", default="tflite")
    p.add_argument("--seq-lens", default=None, help="signature lengths (default: the checkpoint's)")
    p.add_argument("--out", type=Path, default=None, help="keep bundles here (default: temp)")
    p.add_argument("--vocab-corpus", action="append", default=[], type=Path,
                   help="also build trimmed to this corpus (repeatable)")
    add_option(p, "build_fullsize.json")
    a = p.parse_args()
    load = Load()
    rows = []
    trims = [("", [])]
    if a.vocab_corpus:
        trims.append(("-trimmed", [x for c in a.vocab_corpus for x in ("--vocab-corpus", str(c))]))
    vocab_rows = int(json.loads((a.checkpoint / "config.json").read_text())["vocab_size"])
    with tempfile.TemporaryDirectory() as tmp:
        root = a.out or Path(tmp)
        for quant in a.quant.split(","):
            for suffix, trim_args in trims:
                out = root / f"bge-m3-{quant}{suffix}"
                lens = ["--seq-lens", a.seq_lens] if a.seq_lens else []
                res = run_build(a.checkpoint, quant, out, ["--formats", a.formats, *lens, *trim_args])
                rows += manifest_rows(out, quant + suffix, res, vocab_rows)
    print(f"{'variant':<22}{'size':>12}{'vocab rows':>12}{'build wall':>12}{'peak RSS':>11}"
          "  oldest runtime")
    for r in rows:
        print(f"{r[0]:<22}{r[1]:>12}{r[2]:>12}{r[3]:>12}{r[4]:>11}  {r[5]}")
    print(f"(parent peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB)")
    if a.results:
        write_result(a.results, title=f"`edge-m3 build` of {a.checkpoint.name}: {a.formats}",
                     module="tools.bench.bench_build", load=load, rows=rows,
                     columns=["variant", "size", "vocabulary rows", "build wall", "peak RSS", "oldest runtime"],
                     notes=["One build per variant in a fresh process tree; peak RSS of its largest process."])


if __name__ == "__main__":
    main()

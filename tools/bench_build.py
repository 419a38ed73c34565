"""Scale benchmark of `edge-m3 build`: wall time, peak RSS and file sizes per variant.

    python tools/bench_build.py checkpoints/bge-m3-random --quant int8,fp16

Each build runs `edge-m3 build` as a child process and reads the peak RSS of the largest
process in its tree (the builder runs tracing and each conversion in children of its own).
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", type=Path)
    p.add_argument("--quant", default="int8,fp16")
    p.add_argument("--formats", default="tflite")
    p.add_argument("--out", type=Path, default=None, help="keep bundles here (default: temp)")
    a = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = a.out or Path(tmp)
        for quant in a.quant.split(","):
            out = root / f"bge-m3-{quant}"
            res = run_build(a.checkpoint, quant, out, ["--formats", a.formats])
            manifest = json.loads((out / "manifest.json").read_text())
            for m in manifest["models"]:
                size = manifest["files"][m["file"]]["size"]
                extra = sum(manifest["files"][f]["size"] for f in m.get("extra_files", []))
                rows.append((f"{m['format']} {quant}", f"{(size + extra) / 1e6:,.1f} MB",
                             f"{res['wall']:.0f} s", f"{res['peak_child'] / 1e9:.2f} GB",
                             ", ".join(f"{k} {v}" for k, v in m["oldest_runtime"].items()
                                       if k != "converter_min_runtime_version")))
    print(f"{'variant':<14}{'size':>12}{'build wall':>12}{'peak RSS':>11}  oldest runtime")
    for r in rows:
        print(f"{r[0]:<14}{r[1]:>12}{r[2]:>12}{r[3]:>11}  {r[4]}")
    print(f"(parent peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB)")


if __name__ == "__main__":
    main()

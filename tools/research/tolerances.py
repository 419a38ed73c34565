"""TOLERANCES (tests/support/spread.py): the spread of every quantized-parity figure the tests bound.

Measured over repeated builds and several random checkpoints, so each bound is set from it.

Run from the repository root: `python -m tools.research.tolerances [--seeds 0,1,2,3,4]
[--repeats 4] [--cpu native|avx2] [--json FILE]`; `--cpu avx2` runs the runtimes under QEMU
as an x86-64 with AVX2 and no AVX-512 (qemu-user-static), the other kind of CI machine.
Seed 0 is the suite's own tiny checkpoint; it is exported
`--repeats` times (tf2onnx orders nodes differently from run to run), the other seeds once.
Prints, per figure, the worst value seen, the bound in force and the margin (bound / worst).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

LENS = [8, 16, 32]
ONNX_QUANTS = ("fp32", "fp16", "int8")


# x86-64 with AVX2 and no AVX-512 (QEMU's TCG): the kernels an AVX2-only CI machine runs
# (onnxruntime's u8s8 int8 GEMM, XNNPACK) differ from a VNNI machine's.
AVX2 = ("qemu-x86_64-static", "-cpu", "max")
ROOT = Path(__file__).resolve().parents[2]

_ONNX_CHILD = r"""
import json, sys, numpy as np
from edge_m3.spec import ModelEntry
from edge_m3.runtime import RUNTIMES, open_runner
from tests.support.spread import onnx_errors
model, entry, cases = sys.argv[1], json.loads(open(sys.argv[2]).read()), np.load(sys.argv[3])
sigs = ModelEntry.from_json(entry, "entry").signatures
n = len([k for k in cases if k.startswith("ids")])
cs = [(cases[f"ids{i}"], cases[f"mask{i}"], {k.split("/")[1]: cases[k] for k in cases
       if k.startswith(f"want{i}/")}) for i in range(n)]
print(json.dumps(onnx_errors(open_runner(model, sigs, RUNTIMES["onnxruntime"], 1), cs)))
"""


def _onnx_in_child(model: Path, entry: dict[str, Any], cases: list, work: Path,
                   prefix: tuple[str, ...]) -> dict[str, float]:
    """`onnx_errors` in a child under `prefix` (an emulated CPU)."""
    import subprocess
    import sys

    import numpy as np

    arrays = {}
    for i, (ids, mask, want) in enumerate(cases):
        arrays |= {f"ids{i}": ids, f"mask{i}": mask, **{f"want{i}/{k}": v for k, v in want.items()}}
    np.savez(work / "cases.npz", **arrays)
    (work / "entry.json").write_text(json.dumps(entry))
    done = subprocess.run([*prefix, sys.executable, "-c", _ONNX_CHILD, str(model), str(work / "entry.json"),
                           str(work / "cases.npz")], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _onnx_runs(ckpt: Path, work: Path, repeats: int, prefix: tuple[str, ...] = ()
               ) -> list[dict[str, dict[str, float]]]:
    """ONNX fp32, fp16 and int8 vs Keras, one export per repeat (the test's computation)."""
    from edge_m3.checkpoint import load_checkpoint
    from edge_m3.export.onnx import EXTERNAL_DATA_THRESHOLD
    from edge_m3.export.trace import write_saved_model
    from edge_m3.export.worker import export_onnx
    from edge_m3.modeling import build_model
    from edge_m3.runtime import RUNTIMES, open_runner
    from edge_m3.spec import HEADS, RECIPES, ModelEntry
    from tests.support.spread import onnx_cases, onnx_errors

    model = build_model(load_checkpoint(ckpt))
    cases = onnx_cases(model, LENS)
    saved = work / "saved_model"
    write_saved_model(model, LENS, HEADS, saved, dynamic=True)
    runs = []
    for rep in range(repeats):
        run = {}
        for quant in ONNX_QUANTS:
            folder = work / f"onnx-{quant}-{rep}"
            folder.mkdir()
            entry = export_onnx(saved, folder, RECIPES[quant], LENS, list(HEADS), model.parameter_count(),
                                external_threshold=EXTERNAL_DATA_THRESHOLD)
            if prefix:
                run[quant] = _onnx_in_child(folder / entry["file"], entry, cases, folder, prefix)
            else:
                sigs = ModelEntry.from_json(entry, "entry").signatures
                ort = RUNTIMES["onnxruntime"]
                run[quant] = onnx_errors(open_runner(folder / entry["file"], sigs, ort, 1),
                                         cases)
        runs.append(run)
    return runs


def _tflite_runs(ckpt: Path, work: Path, repeats: int, prefix: tuple[str, ...] = ()
                 ) -> list[dict[str, float]]:
    """One TFLite file under tflite-runtime 2.14 and LiteRT, per variant and build."""
    from edge_m3.builder import BuildOptions, build
    from edge_m3.bundle import load_bundle
    from edge_m3.spec import recipes
    from tests.support.spread import run_in_child, runtimes_diff

    runs = []
    for rep in range(repeats):
        dirs = build(BuildOptions(checkpoint=str(ckpt), quants=recipes("fp32", "fp16", "int8-tflite214"),
                                  seq_lens=LENS, out=str(work / f"tfl-{rep}-{{quant}}"),
                                  self_check=False), quiet=True)
        run = {}
        for d in dirs:
            bundle = load_bundle(d)
            entry = bundle.model_entry("tflite")
            outs = {rt: run_in_child(d / entry.file, entry.signatures, rt, d, prefix)
                    for rt in ("tflite-runtime", "litert")}
            run[bundle.manifest.quant] = runtimes_diff(outs)
        runs.append(run)
    return runs


def _int4_runs(seeds: list[int], work: Path) -> list[float]:
    """int4 vs fp32 dense cosine on "Hello world", per random hidden-128 checkpoint
    (tests/test_build.py's int4 test uses seed 3)."""
    import numpy as np

    from edge_m3.builder import BuildOptions, build
    from edge_m3.bundle import load_bundle
    from edge_m3.runtime import RUNTIMES
    from edge_m3.runtime.pipeline import DevicePipeline
    from edge_m3.spec import recipes
    from tests.support.synthetic import make_checkpoint

    out = []
    for seed in seeds:
        ckpt = make_checkpoint(work / f"w128-{seed}", seed=seed, hidden_size=128, intermediate_size=256,
                               num_hidden_layers=6)
        i4, f32 = build(BuildOptions(checkpoint=str(ckpt), quants=recipes("int4", "fp32"), seq_lens=[8, 16],
                                     out=str(work / f"w128-{seed}-{{quant}}"), self_check=False), quiet=True)
        got = DevicePipeline(load_bundle(i4), RUNTIMES["litert"], 1).embed("Hello world")
        want = DevicePipeline(load_bundle(f32), RUNTIMES["litert"], 1).embed("Hello world")
        out.append(float(np.dot(got["dense_vecs"], want["dense_vecs"])))
    return out


def _table(onnx: list[dict[str, Any]], tflite: list[dict[str, float]], int4: list[float], cpu: str
           ) -> list[dict[str, Any]]:
    """Per figure: worst seen, the bound in force on this kind of CPU, margin."""
    from tests.support.spread import OUTPUTS, TOLERANCES

    rows = []
    if int4:
        worst, bound = min(int4), TOLERANCES["int4_dense_cosine_min"]
        rows.append({"figure": "int4 vs fp32 dense cosine (hidden 128, per seed)", "runs": len(int4),
                     "worst": worst, "bound": bound, "margin": (1 - bound) / max(1 - worst, 1e-12)})
    for quant in ONNX_QUANTS:
        for key in OUTPUTS:
            worst = max(r[quant][key] for r in onnx)
            bounds = TOLERANCES["onnx_vs_keras"]
            bound = (bounds.get(f"{quant}-{cpu}") or bounds[quant])[key]
            rows.append({"figure": f"onnx {quant} {key} max |diff| ({cpu})", "runs": len(onnx),
                         "worst": worst, "bound": bound, "margin": bound / max(worst, 1e-12)})
        worst = min(r[quant]["dense_cosine"] for r in onnx)
        bound = TOLERANCES["onnx_dense_cosine_min"][quant]
        rows.append({"figure": f"onnx {quant} dense cosine min", "runs": len(onnx), "worst": worst,
                     "bound": bound, "margin": (1 - bound) / max(1 - worst, 1e-12)})
    for quant in ("fp32", "fp16", "int8-tflite214"):
        worst = max(r[quant] for r in tflite)
        bound = TOLERANCES["tflite_runtimes"][quant]
        rows.append({"figure": f"tflite {quant} tflite-runtime vs litert max |diff|",
                     "runs": len(tflite), "worst": worst, "bound": bound,
                     "margin": bound / max(worst, 1e-12)})
    return rows


def main() -> int:
    from tests.support.synthetic import make_checkpoint

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--repeats", type=int, default=4, help="builds of seed 0 (others: one)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--cpu", choices=("native", "avx2"), default="native",
                    help="avx2: run the runtimes under QEMU as an AVX2-only x86-64 (no AVX-512)")
    ap.add_argument("--int4-seeds", default="",
                    help="comma list: also the int4-vs-fp32 cosine of these hidden-128 checkpoints")
    a = ap.parse_args()
    prefix = AVX2 if a.cpu == "avx2" else ()
    t0 = time.perf_counter()
    onnx, tflite = [], []
    with tempfile.TemporaryDirectory(prefix="edge-m3-spread-") as tmp_s:
        for seed in (int(s) for s in a.seeds.split(",")):
            work = Path(tmp_s) / f"seed{seed}"
            ckpt = make_checkpoint(work / "ckpt", seed=seed)
            reps = a.repeats if seed == 0 else 1
            onnx += _onnx_runs(ckpt, work, reps, prefix)
            tflite += _tflite_runs(ckpt, work, min(reps, 2), prefix)
            print(f"seed {seed}: {reps} build(s), {time.perf_counter() - t0:.0f} s", flush=True)
        int4 = _int4_runs([int(s) for s in a.int4_seeds.split(",") if s], Path(tmp_s))
    from tests.support.spread import cpu_kind

    if a.json:  # the raw figures first: a table that cannot be made loses nothing measured
        a.json.write_text(json.dumps({"onnx": onnx, "tflite": tflite, "int4": int4}, indent=1))
    rows = _table(onnx, tflite, int4, "avx2" if prefix else cpu_kind())
    print("| figure | runs | worst | bound | margin |\n| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['figure']} | {r['runs']} | {r['worst']:.3g} | {r['bound']:.3g} | {r['margin']:.1f}x |")
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "onnx": onnx, "tflite": tflite, "int4": int4},
                                     indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

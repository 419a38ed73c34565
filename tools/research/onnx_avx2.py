"""ONNX int8 candidates on an AVX2-only x86-64 (QEMU) and natively, against the fp32 ONNX file.

    python -m tools.research.onnx_avx2 --fp32 e5-fp32 --texts edge_m3/data/fidelity_sample.jsonl --n 60

Why: onnxruntime's u8 x s8 int8 GEMM adds pairs of products in int16 with saturation on CPUs
without VNNI (`vpmaddubsw`), exactly with VNNI. Activations quantized per row use the whole
[0, 255] range on every row, so on AVX2 the sums saturate where a per-tensor scale (most rows
far below the tensor's maximum) rarely did: the per-row recipe loses there what it gains on
VNNI. Each candidate (tools/research/recipe_search.py's ONNX_CANDIDATES, `--only`) is made from
the fp32 bundle's ONNX file and run on the first `--n` texts of the corpus at `--length`
tokens, under `qemu-x86_64-static -cpu max` (AVX2 and FMA, no AVX-512; the emulator
tools/research/tolerance_spread.py uses) and natively; figures against the fp32 file run
natively: dense cosine min / mean, largest sparse weight and ColBERT vector error.
`--time R` also times the candidates natively, one thread, R repeats interleaved (a ratio on a
shared machine, not a speed): uint8 weights run onnxruntime's slower u8 x u8 kernel.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
_CHILD = r"""
import sys, numpy as np, onnxruntime as ort
model, feeds, out = sys.argv[1:4]
z = np.load(feeds)
opts = ort.SessionOptions(); opts.intra_op_num_threads = 1; opts.log_severity_level = 3
sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
names = [o.name for o in sess.get_outputs()]
res = {}
for i in range(len([k for k in z if k.startswith("ids")])):
    got = sess.run(names, {"input_ids": z[f"ids{i}"], "attention_mask": z[f"mask{i}"]})
    res |= {f"{n}{i}": v for n, v in zip(names, got)}
np.savez(out, **res)
"""


def _err(got: dict[str, np.ndarray], ref: dict[str, np.ndarray], key: str, n: int) -> float:
    """Largest |difference| over the first n positions (the real tokens)."""
    return float(np.abs(got[key][0, :n] - ref[key][0, :n]).max())


def _time(tmp: Path, names: list[str], arrays: dict[str, np.ndarray], repeats: int) -> None:
    """Median ms of one text per candidate file, natively, one thread, interleaved."""
    import time

    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.log_severity_level = 1, 3
    sess = [ort.InferenceSession(str(tmp / f"c{c}.onnx"), opts, providers=["CPUExecutionProvider"])
            for c in range(len(names))]
    feeds = {"input_ids": arrays["ids0"], "attention_mask": arrays["mask0"]}
    times: list[list[float]] = [[] for _ in sess]
    for s in sess:
        s.run(None, feeds)  # warm-up
    for _ in range(repeats):
        for s, t in zip(sess, times, strict=True):
            t0 = time.perf_counter()
            s.run(None, feeds)
            t.append(time.perf_counter() - t0)
    med = [float(np.median(t)) * 1e3 for t in times]
    for name, m in zip(names, med, strict=True):
        print(f"| {name} | native, 1 thread | {m:.1f} ms | {m / med[0]:.2f}x |")


def main(argv: list[str] | None = None) -> int:
    from edge_m3.bundle import load_bundle
    from edge_m3.harness.fidelity import read_corpus
    from tools.research.recipe_search import ONNX_CANDIDATES, onnx_file
    from tools.research.tolerance_spread import AVX2

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fp32", type=Path, required=True, help="an fp32 bundle built with --formats onnx")
    p.add_argument("--texts", type=Path, default=ROOT / "edge_m3/data/fidelity_sample.jsonl")
    p.add_argument("--n", type=int, default=60)
    p.add_argument("--length", type=int, default=128)
    p.add_argument("--only", default="shipped,7-bit,int8 weights")
    p.add_argument("--time", type=int, default=0, metavar="R", help="also time natively, R repeats")
    p.add_argument("--skip-avx2", action="store_true", help="native runs only (with --time)")
    a = p.parse_args(argv)
    bundle = load_bundle(a.fp32)
    tok = bundle.tokenizer()
    texts = [r["text"] for r in read_corpus(a.texts).records][: a.n]
    arrays, lens = {}, []
    for i, text in enumerate(texts):
        ids = tok.encode(text, max_length=a.length)
        x, mask = tok.pad(tok.to_model_ids(ids), a.length)
        arrays |= {f"ids{i}": x[None], f"mask{i}": mask[None]}
        lens.append(len(ids))
    only = [s for s in a.only.split(",") if s]
    cands = {k: v for k, v in ONNX_CANDIDATES.items() if any(o in k for o in only)}
    with tempfile.TemporaryDirectory(prefix="edge-m3-avx2-") as tmp_s:
        tmp = Path(tmp_s)
        np.savez(tmp / "feeds.npz", **arrays)

        def run(model: Path, prefix: tuple[str, ...], tag: str) -> dict[str, np.ndarray]:
            subprocess.run([*prefix, sys.executable, "-c", _CHILD, str(model), str(tmp / "feeds.npz"),
                            str(tmp / f"{tag}.npz")], check=True, cwd=ROOT)
            return dict(np.load(tmp / f"{tag}.npz"))

        ref = run(a.fp32 / bundle.model_entry("onnx").file, (), "ref")
        print("| candidate | CPU | dense cos min / mean | sparse err | ColBERT err |\n"
              "| --- | --- | --- | --- | --- |", flush=True)
        for c, (name, rewrite) in enumerate(cands.items()):
            model = tmp / f"c{c}.onnx"
            onnx_file(a.fp32, rewrite, model, "int8")
            for cpu, prefix in (("AVX2 (QEMU)", AVX2), ("native", ()))[a.skip_avx2:]:
                got = run(model, prefix, f"c{c}{cpu[:3]}")
                cos = [float(got[f"dense_vecs{i}"][0] @ ref[f"dense_vecs{i}"][0]) for i in range(len(texts))]
                lex = max(_err(got, ref, f"sparse_weights{i}", n) for i, n in enumerate(lens))
                col = max(_err(got, ref, f"colbert_vecs{i}", n - 1) for i, n in enumerate(lens))
                print(f"| {name} | {cpu} | {min(cos):.5f} / {np.mean(cos):.5f} | {lex:.3f} | {col:.3f} |",
                      flush=True)
        if a.time:
            _time(tmp, list(cands), arrays, a.time)
    print(f"\n{len(texts)} texts of {a.texts} at {a.length} tokens; reference: the fp32 ONNX file, native.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

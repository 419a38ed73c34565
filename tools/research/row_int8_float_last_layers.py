"""ROW_INT8_FLOAT_LAST_LAYERS (edge_m3/export/onnx.py): ONNX int8 recipe attempts, which weight
MatMuls to leave in float and what each costs.

    python -m tools.research.row_int8_float_last_layers demo/e5-small-fp32

Quantizes the bundle's fp32 ONNX file with onnxruntime's dynamic int8 (per-channel weights,
as the build does) once per recipe, each time excluding a group of MatMuls, and compares
every recipe with the fp32 file on the built-in retrieval set at 128 tokens: dense cosine,
the largest per-token sparse-weight error, the largest ColBERT vector error, file size and
p50 latency (1 thread). Which group matters says where int8 loses accuracy on real weights.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROW = "per row"
RECIPES = {  # name -> substrings of the MatMul node names left in float (ROW: see below)
    "all int8 (per-tensor activations)": (),
    "all int8, one activation scale per row (MatMulInteger)": ROW,
    "per row, tables one scale per row too": ROW + " tables",
    "per row, tables in float": ROW + " float tables",
    "per row + tables, last layer in float": ROW + " last1 tables",
    "per row + tables, last 2 layers' FFN in float": ROW + " last2ffn tables",
    "per row + tables, last 2 layers in float (the build's `int8`)": ROW + " last2 tables",
    "heads in float": ("sparse_linear", "colbert_linear"),
    "attention (q, k, v, out) in float": ("query", "key", "value", "attn_out"),
    "FFN output in float": ("ffn_out",),
    "FFN in + out in float": ("ffn_in", "ffn_out"),
}
LENGTH = 128


def _feeds(bundle_dir: Path) -> list[tuple[dict[str, np.ndarray], int]]:
    """The retrieval set as the device pipeline feeds it: truncated keeping `</s>`, padded with
    the bundle's own pad id, trimmed vocabularies mapped to rows."""
    from edge_m3.bundle import load_bundle
    from edge_m3.harness.inputs import retrieval_set
    from edge_m3.spec import ATTENTION_MASK, INPUT_IDS

    bundle = load_bundle(bundle_dir)
    tok = bundle.tokenizer()
    rs = retrieval_set()
    out = []
    for text in [q["text"] for q in rs["queries"]] + list(rs["passages"]):
        ids = tok.encode(text, max_length=LENGTH)
        a, mask = tok.pad(tok.to_model_ids(ids), LENGTH)
        out.append(({INPUT_IDS: a[None], ATTENTION_MASK: mask[None]}, len(ids)))
    return out


def _run(path: Path, feeds: list[Any]) -> tuple[list[dict[str, np.ndarray]], float]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.log_severity_level = 1, 3
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    outs = [dict(zip(names, sess.run(names, f), strict=True)) for f, _ in feeds]
    times = []
    for f, _ in feeds[:20]:
        t0 = time.perf_counter()
        sess.run(names, f)
        times.append(time.perf_counter() - t0)
    return outs, 1e3 * float(np.median(times))


def main() -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bundle", type=Path, help="an fp32 bundle built with --formats onnx")
    a = p.parse_args()
    src = a.bundle / "model_fp32.onnx"
    model = onnx.load(str(src), load_external_data=False)
    weights = {t.name for t in model.graph.initializer}
    matmuls = [n.name for n in model.graph.node
               if n.op_type == "MatMul" and any(i in weights for i in n.input)]
    feeds = _feeds(a.bundle)
    ref, _ = _run(src, feeds)
    print(f"| recipe | MatMuls in float | dense cos min / mean | sparse err | ColBERT err | "
          f"size | p50 @{LENGTH} |\n| --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for name, keys in RECIPES.items():
            dst = Path(tmp) / "q.onnx"
            if isinstance(keys, str) and keys.startswith(ROW):  # edge_m3.export.onnx's
                from edge_m3.export.onnx import (
                    last_layers,
                    per_row_int8_matmuls,
                    per_row_int8_tables,
                    quantize_int8,
                )

                rows = onnx.load(str(src))
                keep: list[str] = []
                if " last" in keys:
                    parts = ("ffn_in", "ffn_out") if "ffn" in keys else ("",)
                    keep = [f"{layer}1/{p}" for layer in last_layers(
                        rows, 2 if " last2" in keys else 1) for p in parts]
                per_row_int8_matmuls(rows, keep)
                kept = [n for n in matmuls if any(k in n for k in keep)]
                if keys.endswith(" tables"):
                    if not keys.endswith("float tables"):
                        per_row_int8_tables(rows)
                    onnx.save_model(rows, str(dst))
                else:
                    onnx.save_model(rows, str(Path(tmp) / "rows.onnx"))
                    onnx.save_model(quantize_int8(Path(tmp) / "rows.onnx", Path(tmp), ["Gather"]),
                                    str(dst))
                exclude: list[str] = kept
            else:
                exclude = [n for n in matmuls if any(k in n for k in keys)]
                quantize_dynamic(str(src), str(dst), op_types_to_quantize=["MatMul", "Gather"],
                                 per_channel=True, weight_type=QuantType.QInt8,
                                 nodes_to_exclude=exclude)
            outs, ms = _run(dst, feeds)
            cos = [float(o["dense_vecs"][0] @ r["dense_vecs"][0]) for o, r in zip(outs, ref, strict=True)]
            lex = max(float(np.abs(o["sparse_weights"][0, :n] - r["sparse_weights"][0, :n]).max())
                      for o, r, (_, n) in zip(outs, ref, feeds, strict=True))
            col = max(float(np.abs(o["colbert_vecs"][0, :n - 1] - r["colbert_vecs"][0, :n - 1]).max())
                      for o, r, (_, n) in zip(outs, ref, feeds, strict=True))
            print(f"| {name} | {len(exclude)} of {len(matmuls)} | {min(cos):.5f} / "
                  f"{np.mean(cos):.5f} | {lex:.3f} | {col:.3f} | {dst.stat().st_size / 1e6:.1f} MB "
                  f"| {ms:.1f} ms |", flush=True)
            dst.unlink()


if __name__ == "__main__":
    main()

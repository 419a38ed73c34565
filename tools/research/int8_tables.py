"""Does the TFLite int8 file lose its fidelity in the embedding tables? (issue 36, item 1)

The converter's dynamic-range recipe stores every GATHER table (the word and position
embeddings) as int8 with ONE scale for the whole table (e5-small's word table: 0.0106, its
largest element over 127), while the ONNX recipe and bge-m3-lite keep one scale per row. This
rewrites a built int8 `.tflite` so that each such table has one scale per row, requantized from
the checkpoint's float table: GATHER (int8 rows, scale 1) -> DEQUANTIZE -> MUL by the rows'
scales (a second GATHER from a float [V, 1] vector). Then it runs both files through the
harness's bundle worker on the fidelity corpus and prints peer_int8's figures side by side.

    python -m tools.research.int8_tables --checkpoint /work/peer-run/e5ckpt \\
        --bundle /work/peer-run/ours-int8 --work /work/peer-run
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def row_scaled_tables(data: bytes, floats: Sequence[np.ndarray],
                      column_scales: bool = False) -> tuple[bytes, int]:
    """`data` with every per-tensor int8 GATHER table that is one of `floats` (same shape, and
    its int8 values within half a step of it) requantized with one scale per row (and, with
    `column_scales`, each column first divided by its widest value, as
    edge_m3.export.onnx.per_row_int8_tables does, and the rows multiplied back by them)."""
    from tensorflow.lite.python import schema_py_generated as schema

    from edge_m3.export.tflite import operator_code, pack_aligned

    ops, types = schema.BuiltinOperator, schema.TensorType
    model = schema.ModelT.InitFromPackedBuf(data, 0)

    def code(op: Any) -> int:
        c = model.operatorCodes[op.opcodeIndex]
        return max(c.builtinCode, c.deprecatedBuiltinCode)

    def opcode(builtin: int, version: int) -> int:
        return operator_code(model, builtin, version)

    done: dict[int, int] = {}  # table buffer -> its row-scale buffer
    col_bufs: dict[int, int] = {}  # table buffer -> its column-scale buffer

    def requantize(buf: int, shape: tuple[int, ...], scale: float) -> int | None:
        if buf in done:
            return done[buf]
        q = np.frombuffer(np.asarray(model.buffers[buf].data, np.uint8).tobytes(), np.int8).reshape(shape)
        match = [f for f in floats if f.shape == shape
                 and np.abs(f / scale - q).max() <= 0.5 + 1e-3]
        if len(match) != 1:
            return None
        f = match[0].astype(np.float64)
        if column_scales:
            widest = np.abs(f).max(axis=0)
            cols = np.where(widest > 0, widest / widest[widest > 0].mean(), 1.0)
            f = f / cols
            cb = schema.BufferT()
            cb.data = np.frombuffer(cols.astype(np.float32).tobytes(), np.uint8)
            model.buffers.append(cb)
            col_bufs[buf] = len(model.buffers) - 1
        s = np.abs(f).max(axis=1) / 127.0
        s[s == 0] = 1.0
        rows = np.clip(np.round(f / s[:, None]), -127, 127).astype(np.int8)
        model.buffers[buf].data = np.frombuffer(rows.tobytes(), np.uint8)
        b = schema.BufferT()
        b.data = np.frombuffer(s.astype(np.float32).tobytes(), np.uint8)
        model.buffers.append(b)
        done[buf] = len(model.buffers) - 1
        return done[buf]

    def unit_quant() -> Any:
        q = schema.QuantizationParametersT()
        q.scale, q.zeroPoint = np.array([1.0], np.float32), np.array([0], np.int64)
        return q

    rewritten = 0
    for graph in model.subgraphs:
        readers: dict[int, list[Any]] = {}
        for op in graph.operators:
            for t in op.inputs:
                readers.setdefault(int(t), []).append(op)
        out_ops = []
        pending: dict[int, tuple[Any, int]] = {}  # gathered int8 rows -> (gather op, scale tensor)
        for op in graph.operators:
            out_ops.append(op)
            if code(op) == ops.GATHER:
                table = graph.tensors[int(op.inputs[0])]
                q = table.quantization
                if (table.type != types.INT8 or model.buffers[table.buffer].data is None
                        or q is None or q.scale is None or len(q.scale) != 1):
                    continue
                rows_t = int(op.outputs[0])
                deq = readers.get(rows_t, [])
                if len(deq) != 1 or code(deq[0]) != ops.DEQUANTIZE:
                    continue
                sbuf = requantize(table.buffer, tuple(int(x) for x in table.shape), float(q.scale[0]))
                if sbuf is None:
                    continue
                table.quantization = unit_quant()
                graph.tensors[rows_t].quantization = unit_quant()
                st = schema.TensorT()
                st.shape, st.type, st.buffer = np.array([table.shape[0], 1], np.int32), types.FLOAT32, sbuf
                st.name = "row_scales"
                graph.tensors.append(st)
                pending[rows_t] = (op, len(graph.tensors) - 1, col_bufs.get(table.buffer))
            elif code(op) == ops.DEQUANTIZE and int(op.inputs[0]) in pending:
                gather, st, cbuf = pending.pop(int(op.inputs[0]))
                final = graph.tensors[int(op.outputs[0])]
                new = []
                for suffix, last in (("/unit", None), ("/row_scale", 1)):
                    t = schema.TensorT()
                    shape = list(final.shape)
                    sig = None if final.shapeSignature is None else list(final.shapeSignature)
                    if last is not None:
                        shape[-1] = last
                        if sig is not None:
                            sig[-1] = last
                    t.shape = np.array(shape, np.int32)
                    t.shapeSignature = None if sig is None else np.array(sig, np.int32)
                    t.type, t.buffer, t.hasRank = types.FLOAT32, 0, final.hasRank
                    name = final.name.decode() if isinstance(final.name, bytes) else final.name
                    t.name = name + suffix
                    graph.tensors.append(t)
                    new.append(len(graph.tensors) - 1)
                unit, gs = new
                final_idx = int(op.outputs[0])
                op.outputs = np.array([unit], np.int32)
                g2 = schema.OperatorT()
                g2.opcodeIndex = opcode(ops.GATHER, 1)
                g2.builtinOptionsType, g2.builtinOptions = gather.builtinOptionsType, gather.builtinOptions
                g2.inputs, g2.outputs = np.array([st, *gather.inputs[1:]], np.int32), np.array([gs], np.int32)
                mul = schema.OperatorT()
                mul.opcodeIndex = opcode(ops.MUL, 1)
                mul.builtinOptionsType = schema.BuiltinOptions.MulOptions
                mul.builtinOptions = schema.MulOptionsT()
                mul.inputs, mul.outputs = np.array([unit, gs], np.int32), np.array([final_idx], np.int32)
                out_ops += [g2, mul]
                if cbuf is not None:  # rows x row scales -> `scaled`, then x column scales
                    scaled = schema.TensorT()
                    scaled.shape, scaled.type, scaled.buffer = final.shape, types.FLOAT32, 0
                    scaled.shapeSignature, scaled.hasRank = final.shapeSignature, final.hasRank
                    scaled.name = graph.tensors[unit].name + b"/rows" if isinstance(
                        graph.tensors[unit].name, bytes) else graph.tensors[unit].name + "/rows"
                    graph.tensors.append(scaled)
                    ct = schema.TensorT()
                    ct.shape = np.array([final.shape[-1]], np.int32)
                    ct.type, ct.buffer, ct.name = types.FLOAT32, cbuf, "column_scales"
                    graph.tensors.append(ct)
                    mul.outputs = np.array([len(graph.tensors) - 2], np.int32)
                    mul2 = schema.OperatorT()
                    mul2.opcodeIndex = opcode(ops.MUL, 1)
                    mul2.builtinOptionsType = schema.BuiltinOptions.MulOptions
                    mul2.builtinOptions = schema.MulOptionsT()
                    mul2.inputs = np.array([len(graph.tensors) - 2, len(graph.tensors) - 1], np.int32)
                    mul2.outputs = np.array([final_idx], np.int32)
                    out_ops.append(mul2)
                rewritten += 1
        graph.operators = out_ops

    return pack_aligned(model, len(data)), rewritten


def main(argv: Sequence[str] | None = None) -> int:
    from edge_m3.harness.fidelity import default_corpus

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--bundle", type=Path, required=True, help="a built int8 bundle")
    p.add_argument("--work", type=Path, required=True, help="peer_int8's work folder (reused)")
    p.add_argument("--texts", type=Path, default=default_corpus())
    p.add_argument("--max-length", type=int, default=512)
    p.add_argument("--columns", action="store_true",
                   help="also each column divided by its widest value first (the ONNX recipe's tables)")
    a = p.parse_args(argv)

    from edge_m3.checkpoint import load_checkpoint
    from edge_m3.contract import model_file
    from edge_m3.harness.fidelity import read_corpus
    from edge_m3.harness.verify import formula_pairs
    from tools.research.peer_int8 import HEAD, figures, flag_reference, our_outputs, row
    from tools.research.recipe_search import bundle_with

    out = a.work / ("ours-int8-rowcoltables" if a.columns else "ours-int8-rowtables")
    name = model_file("int8", "tflite")
    if not (out / "manifest.json").is_file():
        t = load_checkpoint(a.checkpoint).tensors
        floats = [np.asarray(t[k], np.float32) for k in t if k.endswith("embeddings.weight")]
        data, n = row_scaled_tables((a.bundle / name).read_bytes(), floats, a.columns)
        print(f"# tables rewritten: {n} (gathers over every signature)", file=sys.stderr)
        made = a.work / "rowtables.tflite"
        made.write_bytes(data)
        bundle_with(a.bundle, name, made, out)
    corpus = read_corpus(a.texts)
    records = [*corpus.queries, *corpus.passages]
    texts = [r["text"] for r in records]
    nq = len(corpus.queries)
    sets = {"user": [], "queries": list(range(nq)), "passages": list(range(nq, len(texts)))}
    ref = flag_reference(a.checkpoint, texts, a.max_length, formula_pairs(sets))
    print(HEAD)
    for label, b, tag in (("ours TFLite int8 (LiteRT)", a.bundle, "ours"),
                          ("ours TFLite int8, tables one scale per row"
                           + (" and per column" if a.columns else "") + " (LiteRT)", out, out.name)):
        f = figures(our_outputs(b, "litert", texts, a.work, tag), ref, nq, corpus.relevant())
        print(row(label, (b / name).stat().st_size / 1e6, f), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

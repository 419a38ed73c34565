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

`--float-fc REGEX` asks the other question, where the FULLY_CONNECTED ops lose it: the int8
filters of the ops whose output names match are stored float32 (the checkpoint's matrices, or
with `--dequantized` their int8 values times their scales: int8 weights, float compute), with
`--columns` the tables rewritten as above too, with `--asymmetric` every FULLY_CONNECTED's
`asymmetric_quantize_inputs` set. E.g. `--float-fc . --dequantized` (weight-only int8 throughout),
`--float-fc '/layer_(10|11)_1/'` (the ONNX recipe's float layers). `--bias-correct` adds each
int8 FULLY_CONNECTED's weight-rounding error on its mean input (from the calibration slice,
`sample(corpus, 200, seed 36)`) to its bias, and prints the gate part's figures too.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
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

    from edge_m3.export.tflite import builtin_code, operator_code, pack_aligned

    ops, types = schema.BuiltinOperator, schema.TensorType
    model = schema.ModelT.InitFromPackedBuf(data, 0)

    def code(op: Any) -> int:
        return builtin_code(model, op)

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


def _fully_connected(model: Any) -> Iterator[tuple[Any, Any]]:
    """(subgraph, op) for every FULLY_CONNECTED of an object-API model, every signature's."""
    from tensorflow.lite.python import schema_py_generated as schema

    from edge_m3.export.tflite import builtin_code

    for graph in model.subgraphs:
        for op in graph.operators:
            if builtin_code(model, op) == schema.BuiltinOperator.FULLY_CONNECTED:
                yield graph, op


def asymmetric_inputs(data: bytes) -> tuple[bytes, int]:
    """`data` with every FULLY_CONNECTED's `asymmetric_quantize_inputs` set: TF Lite's hybrid
    kernel then quantizes each input row with a zero point, not symmetrically (the converter
    leaves it off)."""
    from tensorflow.lite.python import schema_py_generated as schema

    from edge_m3.export.tflite import pack_aligned

    model = schema.ModelT.InitFromPackedBuf(data, 0)
    n = 0
    for _, op in _fully_connected(model):
        op.builtinOptions.asymmetricQuantizeInputs = True
        n += 1
    return pack_aligned(model, len(data)), n


def checkpoint_matrix(q: np.ndarray, scale: np.ndarray,
                      floats: Sequence[np.ndarray]) -> tuple[np.ndarray, float]:
    """The checkpoint matrix an int8 per-channel filter `q` (scales `scale`) was quantized
    from, and its factor: the one of `floats` within half a step of it per row, up to one
    factor per matrix (the query's folded 1/sqrt(d))."""
    deq = q.astype(np.float64) * scale[:, None]
    for f in floats:
        if f.shape != q.shape:
            continue
        k = float(np.abs(deq).max() / max(np.abs(f).max(), 1e-30))
        if np.all(np.abs(f * k - deq) <= 0.5 * scale[:, None] + 1e-6):
            return f, k
    raise SystemExit(f"no checkpoint matrix matches a {q.shape} filter")


def float_projections(data: bytes, pattern: str, floats: Sequence[np.ndarray],
                      dequantized: bool = False) -> tuple[bytes, int]:
    """`data` with the int8 per-channel filter of every FULLY_CONNECTED whose output name
    matches `pattern` stored float32: the checkpoint's matrix it was quantized from (the one of
    `floats` within half a step of it per row, up to one factor per matrix, for the query's
    folded 1/sqrt(d)), or with `dequantized` its int8 values times their scales (int8 weights,
    float compute: which of the two quantizations costs the worst texts)."""
    import re

    from tensorflow.lite.python import schema_py_generated as schema

    from edge_m3.export.tflite import pack_aligned

    types = schema.TensorType
    model = schema.ModelT.InitFromPackedBuf(data, 0)
    made: dict[int, int] = {}  # int8 buffer -> its float buffer
    rx = re.compile(pattern)
    rewritten = 0

    def source(q: np.ndarray, scale: np.ndarray) -> np.ndarray:
        if dequantized:
            return q.astype(np.float64) * scale[:, None]
        f, k = checkpoint_matrix(q, scale, floats)
        return f * k

    for graph, op in _fully_connected(model):
        out = graph.tensors[int(op.outputs[0])].name
        if not rx.search(out.decode() if isinstance(out, bytes) else out):
            continue
        w = graph.tensors[int(op.inputs[1])]
        if w.type != types.INT8 or w.quantization is None or w.quantization.scale is None:
            continue
        if w.buffer not in made:
            q = np.frombuffer(np.asarray(model.buffers[w.buffer].data, np.uint8).tobytes(),
                              np.int8).reshape(tuple(int(x) for x in w.shape))
            scale = np.asarray(w.quantization.scale, np.float64)
            b = schema.BufferT()
            b.data = np.frombuffer(source(q, scale).astype(np.float32).tobytes(), np.uint8)
            model.buffers.append(b)
            made[w.buffer] = len(model.buffers) - 1
        w.buffer, w.type, w.quantization = made[w.buffer], types.FLOAT32, None
        rewritten += 1
    return pack_aligned(model, len(data)), rewritten


def dequantize_op_filters(data: bytes, pattern: str) -> tuple[bytes, int]:
    """`data` with the int8 filter of every FULLY_CONNECTED whose output name matches `pattern`
    read through a DEQUANTIZE op into a float32 tensor: int8 weights in the file, float compute
    (what `float_projections(..., dequantized=True)` computes, without the file growing)."""
    import re

    from tensorflow.lite.python import schema_py_generated as schema

    from edge_m3.export.tflite import builtin_code, operator_code, pack_aligned

    ops, types = schema.BuiltinOperator, schema.TensorType
    model = schema.ModelT.InitFromPackedBuf(data, 0)
    rx = re.compile(pattern)
    n = 0
    for graph in model.subgraphs:
        out_ops = []
        made: dict[int, int] = {}  # int8 filter tensor -> its float tensor, in this subgraph
        for op in graph.operators:
            if builtin_code(model, op) == ops.FULLY_CONNECTED:
                out = graph.tensors[int(op.outputs[0])].name
                w_i = int(op.inputs[1])
                w = graph.tensors[w_i]
                if rx.search(out.decode() if isinstance(out, bytes) else out) and w.type == types.INT8:
                    if w_i not in made:
                        t = schema.TensorT()
                        t.shape, t.type, t.buffer, t.hasRank = w.shape, types.FLOAT32, 0, True
                        name = w.name.decode() if isinstance(w.name, bytes) else w.name
                        t.name = name + "/dequantized"
                        graph.tensors.append(t)
                        made[w_i] = len(graph.tensors) - 1
                        d = schema.OperatorT()
                        d.opcodeIndex = operator_code(model, ops.DEQUANTIZE, 4)
                        d.inputs, d.outputs = np.array([w_i], np.int32), np.array([made[w_i]], np.int32)
                        out_ops.append(d)
                    op.inputs = np.array([op.inputs[0], made[w_i], *op.inputs[2:]], np.int32)
                    n += 1
            out_ops.append(op)
        graph.operators = out_ops
    return pack_aligned(model, len(data)), n


def fc_input_means(data: bytes, bundle: Path, texts: Sequence[str]) -> dict[int, np.ndarray]:
    """Each int8 FULLY_CONNECTED filter's (by buffer) mean input row over the texts' real
    tokens, as `data` itself computes them (its own int8 upstream; LiteRT's builtin kernels,
    since XNNPACK's partitions keep no intermediate tensor): what bias correction needs."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    from tensorflow.lite.python import schema_py_generated as schema

    from edge_m3.bundle.bundle import load_bundle
    from edge_m3.export.tflite import builtin_code
    from edge_m3.runtime.pipeline import DevicePipeline
    from edge_m3.runtime.registry import RUNTIMES

    model = schema.ModelT.InitFromPackedBuf(data, 0)
    sites: dict[int, list[tuple[int, int]]] = {}  # subgraph -> [(input tensor, filter buffer)]
    fc = schema.BuiltinOperator.FULLY_CONNECTED
    for gi, graph in enumerate(model.subgraphs):
        for op in graph.operators:
            w = graph.tensors[int(op.inputs[1])] if builtin_code(model, op) == fc else None
            if w is not None and w.type == schema.TensorType.INT8:
                sites.setdefault(gi, []).append((int(op.inputs[0]), int(w.buffer)))
    pipe = DevicePipeline(load_bundle(bundle), RUNTIMES["litert"], open_model=False)
    it = Interpreter(model_content=data, experimental_preserve_all_tensors=True, num_threads=2,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    sums: dict[int, np.ndarray] = {}
    counts: dict[int, int] = {}
    for i, text in enumerate(texts):
        enc = pipe.encode(text)
        ids, mask = pipe.model_inputs(enc)
        runner = it.get_signature_runner(enc.signature)
        runner(input_ids=ids, attention_mask=mask)
        gi = runner._subgraph_index
        n = len(enc.input_ids)
        for t, buf in sites[gi]:
            x = np.asarray(it.get_tensor(t, gi), np.float64)
            x = x.reshape(-1, x.shape[-1])
            if x.shape[0] == enc.seq_len:  # token rows: the real ones only
                x = x[:n]
            sums[buf] = sums.get(buf, 0.0) + x.sum(axis=0)
            counts[buf] = counts.get(buf, 0) + x.shape[0]
        if (i + 1) % 50 == 0:
            print(f"# means: {i + 1} / {len(texts)} texts", file=sys.stderr, flush=True)
    return {b: sums[b] / counts[b] for b in sums}


def bias_corrected(data: bytes, means: dict[int, np.ndarray],
                   floats: Sequence[np.ndarray]) -> tuple[bytes, int]:
    """`data` with each int8 FULLY_CONNECTED's bias plus (W - deq(Q(W))) E[x]: the weights'
    rounding error on the mean input, which per-channel rounding leaves whenever an input
    channel has a large mean (e5-small's outlier dimensions). W is the checkpoint's matrix
    (as `float_projections` finds it); E[x] from `fc_input_means`."""
    from tensorflow.lite.python import schema_py_generated as schema

    from edge_m3.export.tflite import pack_aligned

    model = schema.ModelT.InitFromPackedBuf(data, 0)
    done: set[int] = set()
    owner: dict[int, int] = {}  # bias buffer -> its filter's buffer
    shift: dict[int, np.ndarray] = {}
    for graph, op in _fully_connected(model):
        w = graph.tensors[int(op.inputs[1])]
        if w.type != schema.TensorType.INT8 or int(w.buffer) not in means:
            continue
        if len(op.inputs) < 3 or int(op.inputs[2]) < 0:
            raise SystemExit(f"a FULLY_CONNECTED without a bias: {graph.tensors[int(op.outputs[0])].name}")
        if w.buffer not in shift:
            q = np.frombuffer(np.asarray(model.buffers[w.buffer].data, np.uint8).tobytes(),
                              np.int8).reshape(tuple(int(x) for x in w.shape))
            scale = np.asarray(w.quantization.scale, np.float64)
            deq = q.astype(np.float64) * scale[:, None]
            f, k = checkpoint_matrix(q, scale, floats)
            shift[w.buffer] = (f.astype(np.float64) * k - deq) @ means[int(w.buffer)]
        b = graph.tensors[int(op.inputs[2])]
        if owner.setdefault(int(b.buffer), int(w.buffer)) != int(w.buffer):
            raise SystemExit("two filters share one bias buffer: correct them apart first")
        if b.buffer in done:
            continue
        bias = np.frombuffer(np.asarray(model.buffers[b.buffer].data, np.uint8).tobytes(), np.float32)
        model.buffers[b.buffer].data = np.frombuffer(
            (bias.astype(np.float64) + shift[w.buffer]).astype(np.float32).tobytes(), np.uint8)
        done.add(int(b.buffer))
    return pack_aligned(model, len(data)), len(done)


def main(argv: Sequence[str] | None = None) -> int:
    import hashlib

    from edge_m3.harness.fidelity import default_corpus

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--bundle", type=Path, required=True, help="a built int8 bundle")
    p.add_argument("--work", type=Path, required=True, help="peer_int8's work folder (reused)")
    p.add_argument("--texts", type=Path, default=default_corpus())
    p.add_argument("--max-length", type=int, default=512)
    p.add_argument("--columns", action="store_true",
                   help="also each column divided by its widest value first (the ONNX recipe's tables)")
    p.add_argument("--float-fc", default="", metavar="REGEX",
                   help="instead: FULLY_CONNECTED filters whose output name matches stored float32")
    p.add_argument("--dequantized", action="store_true",
                   help="with --float-fc: their int8 values dequantized (int8 weights, float compute)")
    p.add_argument("--dequantize-op", action="store_true",
                   help="with --float-fc: int8 filters read through a DEQUANTIZE op (the file keeps int8)")
    p.add_argument("--asymmetric", action="store_true",
                   help="also every FULLY_CONNECTED's inputs quantized asymmetrically")
    p.add_argument("--bias-correct", action="store_true",
                   help="also every int8 FULLY_CONNECTED's bias corrected for its weights' rounding on the "
                        "mean input of the calibration slice; figures on the gate part then")
    a = p.parse_args(argv)

    from edge_m3.checkpoint import load_checkpoint
    from edge_m3.contract import model_file
    from edge_m3.harness.fidelity import read_corpus
    from edge_m3.harness.verify import formula_pairs
    from tools.research.peer_int8 import (
        CALIBRATION,
        CALIBRATION_SEED,
        HEAD,
        _subset,
        figures,
        flag_reference,
        our_outputs,
        row,
        split_corpus,
    )
    from tools.research.recipe_search import bundle_with

    name = model_file("int8", "tflite")
    corpus = read_corpus(a.texts)
    records = [*corpus.queries, *corpus.passages]
    calib_groups, gate_idx = split_corpus(corpus, CALIBRATION, CALIBRATION_SEED)
    calibration = [r for r in records if r["group"] in calib_groups]
    if a.float_fc or a.asymmetric or a.bias_correct:
        spec = (f"{a.bundle.name}|{a.float_fc}|{a.dequantized}|{a.columns}|{a.asymmetric}|{a.bias_correct}"
                + ("|dequantize-op" if a.dequantize_op else ""))
        key = hashlib.sha256(spec.encode()).hexdigest()[:8]
        out = a.work / f"ours-int8-floatfc-{key}"
        table_part = (", tables per row and column" if a.columns
                      else "" if a.float_fc or a.bias_correct else ", tables one scale per row")
        label = ("ours TFLite int8"
                 + (f", FC {a.float_fc!r} " + ("through DEQUANTIZE" if a.dequantize_op
                                             else "dequantized" if a.dequantized else "float")
                    if a.float_fc else "")
                 + table_part + (", inputs asymmetric" if a.asymmetric else "")
                 + (", biases corrected on the slice" if a.bias_correct else ""))
    else:
        out = a.work / ("ours-int8-rowcoltables" if a.columns else "ours-int8-rowtables")
        label = ("ours TFLite int8, tables one scale per row"
                 + (" and per column" if a.columns else "") + " (LiteRT)")
    if not (out / "manifest.json").is_file():
        # One pipeline: filters (--float-fc), inputs (--asymmetric), then the tables (always
        # without --float-fc; with it, only when --columns asks).
        t = load_checkpoint(a.checkpoint).tensors
        data = (a.bundle / name).read_bytes()
        if a.float_fc:
            floats = [np.asarray(t[k], np.float32) for k in t if np.asarray(t[k]).ndim == 2]
            data, n = (dequantize_op_filters(data, a.float_fc) if a.dequantize_op
                       else float_projections(data, a.float_fc, floats, a.dequantized))
            print(f"# filters stored float: {n}", file=sys.stderr)
        if a.asymmetric:
            data, n = asymmetric_inputs(data)
            print(f"# FULLY_CONNECTED inputs asymmetric: {n}", file=sys.stderr)
        if a.columns or not (a.float_fc or a.bias_correct):
            tables = [np.asarray(t[k], np.float32) for k in t if k.endswith("embeddings.weight")]
            data, n = row_scaled_tables(data, tables, a.columns)
            print(f"# tables rewritten: {n} (gathers over every signature)", file=sys.stderr)
        if a.bias_correct:  # last: the means are the final file's own activations
            calib = [r["text"] for r in calibration]
            floats = [np.asarray(t[k], np.float32) for k in t if np.asarray(t[k]).ndim == 2]
            data, n = bias_corrected(data, fc_input_means(data, a.bundle, calib), floats)
            print(f"# biases corrected: {n} (on {len(calib)} calibration texts)", file=sys.stderr)
        made = a.work / f"{out.name}.tflite"
        made.write_bytes(data)
        bundle_with(a.bundle, name, made, out)
    texts = [r["text"] for r in records]
    nq = len(corpus.queries)
    sets = {"user": [], "queries": list(range(nq)), "passages": list(range(nq, len(texts)))}
    ref = flag_reference(a.checkpoint, texts, a.max_length, formula_pairs(sets))
    gate_nq = sum(i < nq for i in gate_idx)
    gate_corpus = type(corpus)(tuple(records[i] for i in gate_idx))
    print(HEAD)
    # peer_int8 caches the shipped int8 bundle's outputs as "ours"; any other base by its name.
    base_tag = "ours" if a.bundle.name == "ours-int8" else a.bundle.name
    for what, b, tag in ((f"{a.bundle.name} TFLite int8 (LiteRT)", a.bundle, base_tag),
                         (label, out, out.name)):
        outs = our_outputs(b, "litert", texts, a.work, tag)
        f = figures(outs, ref, nq, corpus.relevant())
        print(row(what + ", whole corpus", (b / name).stat().st_size / 1e6, f), flush=True)
        if a.bias_correct:  # the gate part: the corpus minus the calibration slice
            f = figures(_subset(outs, gate_idx), _subset(ref, gate_idx), gate_nq, gate_corpus.relevant())
            print(row(what + f", gate part ({len(gate_idx)})", (b / name).stat().st_size / 1e6, f),
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

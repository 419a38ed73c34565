"""Keras SavedModel -> one ONNX file per quant variant, with a symbolic sequence axis.

ONNX has no multi-signature files. One graph whose sequence axis is the symbol `seq`, with the
supported lengths declared in the manifest (and in the file's metadata_props), keeps a single
copy of the weights; one file per length would repeat ~570M weights per length. Apps still pad
to one of the declared lengths, exactly as with TFLite.

Everything heavy runs in a child process (edge_m3.export.worker), so neither TensorFlow's nor
the quantizer's memory stays in the builder.

The conversion itself (tf2onnx with the weights lifted out of the graph, so that its memory
does not scale with the weights) is edge_m3.export.onnx_lift; this module quantizes, checks
and describes the file for the manifest.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_m3.common.options import version_tuple
from edge_m3.export.onnx_lift import copy_value_info, run_tf2onnx
from edge_m3.spec import (
    ATTENTION_MASK,
    COLBERT_VECS,
    DENSE_VECS,
    HEAD_OUTPUTS,
    INPUT_IDS,
    INPUTS,
    SPARSE_WEIGHTS,
    CheckResult,
    QuantRecipe,
    model_file,
    signature_name,
)

# onnxruntime implements opset 17 (and IR version 8) from 1.12 on; only the installed one is run.
ORT_MIN_FOR_OPSET = {17: "1.12.0"}
ORT_MIN_FOR_IR = {8: "1.10.0"}
SEQ_AXIS = "seq"
SEQ_AXIS_MINUS_1 = "seq_minus_1"
SEQUENCE_AXIS = "symbolic, declared lengths only"
# Protobuf refuses to serialize a message over 2 GiB; stay clear of it (graph bytes included).
EXTERNAL_DATA_THRESHOLD = 2_000_000_000
# Tensors below this many bytes stay inline even when the rest goes to the .data file.
EXTERNAL_MIN_TENSOR = 1024
INT8_OP_TYPES = ["MatMul", "Gather"]
ROW_INT8_MIN_ELEMENTS = 1024  # the TFLite converter's floor for quantizing a weight
# Encoder layers at the end that int8 ONNX keeps in float: on real weights (e5-small) the
# lexical error is 0.050 with none, 0.046 with one, 0.041 with two (gate 0.05; +9% size;
# tools/research/row_int8_float_last_layers.py).
ROW_INT8_FLOAT_LAST_LAYERS = 2
# SmoothQuant on the projections a LayerNorm feeds (the Keras layers' names: XLM-R/BERT's
# query, key, value and ffn_in; ModernBERT's wqkv and ffn_in), alpha 0.5: their inputs' outlier
# channels cost int8's worst texts most (tools/research/smoothed_projections.py: dense min on
# 1,967 texts 0.99730 -> 0.99824, bge-m3-lite's 0.99815); smoothing the other two projections as
# well gained nothing.
SMOOTHED_PROJECTIONS = ("query", "key", "value", "wqkv", "ffn_in")
SMOOTH_ALPHA = 0.5


def _rename_value(graph: Any, old: str, new: str) -> None:
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new
        for i, name in enumerate(node.output):
            if name == old:
                node.output[i] = new
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        if vi.name == old:
            vi.name = new


def _set_dims(vi: Any, dims: Sequence[int | str]) -> None:
    shape = vi.type.tensor_type.shape
    del shape.dim[:]
    for d in dims:
        dim = shape.dim.add()
        if isinstance(d, str):
            dim.dim_param = d
        else:
            dim.dim_value = int(d)


def _static_last_dim(vi: Any) -> int:
    dims = vi.type.tensor_type.shape.dim
    if not dims or not dims[-1].HasField("dim_value"):
        raise RuntimeError(f"ONNX output {vi.name}: last dimension is not static")
    return int(dims[-1].dim_value)


def fix_io(model: Any, heads: Sequence[str]) -> dict[str, int]:
    """Exact names, order and shapes the bundle contract promises: `[1, seq]` int32 in,
    `dense_vecs [1, H]`, `sparse_weights [1, seq]`, `colbert_vecs [1, seq_minus_1, D]` out.

    tf2onnx orders inputs alphabetically and names every dimension `unk__N`. Returns the
    static widths of the outputs (H, D) read from the graph.
    """
    import onnx

    graph = model.graph
    wanted_out = [HEAD_OUTPUTS[h] for h in HEAD_OUTPUTS if h in heads]
    for vi in [*graph.input, *graph.output]:
        base = vi.name.split(":")[0]
        if base != vi.name and base in (*INPUTS, *wanted_out):
            _rename_value(graph, vi.name, base)
    inputs = {vi.name: vi for vi in graph.input}
    outputs = {vi.name: vi for vi in graph.output}
    if set(inputs) != set(INPUTS) or set(outputs) != set(wanted_out):
        raise RuntimeError(f"tf2onnx gave inputs {sorted(inputs)} and outputs {sorted(outputs)}; "
                           f"expected {list(INPUTS)} and {wanted_out}")
    for vi in inputs.values():
        if vi.type.tensor_type.elem_type != onnx.TensorProto.INT32:
            raise RuntimeError(f"ONNX input {vi.name} is not int32")
        _set_dims(vi, [1, SEQ_AXIS])
    widths: dict[str, int] = {}
    for name, vi in outputs.items():
        if name == DENSE_VECS:
            widths[name] = _static_last_dim(vi)
            _set_dims(vi, [1, widths[name]])
        elif name == SPARSE_WEIGHTS:
            _set_dims(vi, [1, SEQ_AXIS])
        else:
            widths[name] = _static_last_dim(vi)
            _set_dims(vi, [1, SEQ_AXIS_MINUS_1, widths[name]])
    new_in = [copy_value_info(inputs[n]) for n in INPUTS]
    new_out = [copy_value_info(outputs[n]) for n in wanted_out]
    del graph.input[:]
    graph.input.extend(new_in)
    del graph.output[:]
    graph.output.extend(new_out)
    return widths


def finish(model: Any, quant: str, seq_lens: Sequence[int], heads: Sequence[str]) -> None:
    """Drop unused opset domains; record lengths, heads and quant as metadata_props."""
    used = {n.domain for n in model.graph.node} | {""}
    keep = [o for o in model.opset_import if o.domain in used or o.domain == "ai.onnx"]
    del model.opset_import[:]
    model.opset_import.extend(keep)
    meta = {"edge_m3.seq_lens": ",".join(map(str, seq_lens)), "edge_m3.heads": ",".join(heads),
            "edge_m3.quant": quant, "edge_m3.sequence_axis": SEQ_AXIS}
    for prop in list(model.metadata_props):
        if prop.key in meta:
            model.metadata_props.remove(prop)
    for key, value in meta.items():
        model.metadata_props.add(key=key, value=value)
    model.doc_string = ("BGE-M3 encoder + dense/sparse/ColBERT heads (edge-m3). Sequence axis "
                        f"'{SEQ_AXIS}': pad inputs to one of {','.join(map(str, seq_lens))}.")


def fp16_weights(model: Any) -> int:
    """Store every float32 matrix (ndim >= 2) as float16 behind a Cast back to float32.

    The file halves, compute stays float32 (like the TFLite fp16 variant on CPU). A full
    float16 graph would also compute LayerNorm statistics in float16, which tf2onnx spells as
    mean((x - mean)^2): squares over 65504 overflow on real activations. Returns tensors cast.
    """
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    casts = []
    for tensor in model.graph.initializer:
        if tensor.data_type != onnx.TensorProto.FLOAT or len(tensor.dims) < 2:
            continue
        name = tensor.name
        half = np.clip(numpy_helper.to_array(tensor), -65504.0, 65504.0).astype(np.float16)
        tensor.CopyFrom(numpy_helper.from_array(half, name + "_fp16"))
        del half
        casts.append(helper.make_node("Cast", [name + "_fp16"], [name], name=name + "_to_fp32",
                                      to=onnx.TensorProto.FLOAT))
    nodes = list(model.graph.node)
    del model.graph.node[:]
    model.graph.node.extend([*casts, *nodes])  # Casts first keeps the node list topological
    return len(casts)


def tensor_bytes(model: Any) -> int:
    """Bytes of the initializers held in memory: what decides if external data is needed."""
    return sum(len(t.raw_data) for t in model.graph.initializer)


def save(model: Any, path: Path, threshold: int) -> list[str]:
    """Save as one file, or with one `<file>.data` beside it when the tensors exceed threshold.

    Returns the external data file names (relative to path's folder).
    """
    import onnx

    data = path.with_name(path.name + ".data")
    data.unlink(missing_ok=True)  # onnx appends to an existing data file
    if tensor_bytes(model) > threshold:
        onnx.save_model(model, str(path), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=data.name,
                        size_threshold=EXTERNAL_MIN_TENSOR)
        return [data.name]
    onnx.save_model(model, str(path))
    return []


def quantize_int8(src: Path, work: Path, op_types: Sequence[str] = INT8_OP_TYPES) -> Any:
    """onnxruntime's dynamic-range int8 of the fp32 model saved at src: int8 per-channel
    MatMul weights, 8-bit embedding Gathers (`op_types` of them). The `int8` recipe before
    issue 13; tools/research/row_int8_float_last_layers.py still compares against it.

    Activations stay float and are quantized per call (DynamicQuantizeLinear: one scale per
    tensor), so no calibration data is needed; every op stays in the standard ONNX domain.
    Takes a file, not a model, so that the caller's fp32 copy is gone while the quantizer
    holds its own.
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    dst = work / "int8.onnx"
    quantize_dynamic(str(src), str(dst), op_types_to_quantize=list(op_types), per_channel=True,
                     weight_type=QuantType.QInt8, use_external_data_format=True)
    return onnx.load(str(dst))


def per_row_int8_matmuls(model: Any, keep_float: Sequence[str] = (), levels: int = 255,
                         weight_levels: int = 127, unsigned_weights: bool = False) -> int:
    """Every MatMul by a float weight matrix becomes a uint8 x int8 (or uint8) MatMulInteger
    with one weight scale per output column and one activation scale and zero point per row
    (token), computed per call: TFLite's hybrid arithmetic, in standard ops.

    onnxruntime's dynamic quantization scales a whole activation tensor at once; on real
    weights the feed-forward inputs' outliers then cost the lexical weights 0.13 (the gate is
    0.05), where TFLite's kernels, which scale each row, pass. Per row:
    `q = round(x / s) + z` in [0, 255] with `s = (max(x, 0) - min(x, 0)) / 255`,
    `z = round(-min / s)`; then `y = s * (q @ Wq - z * colsum(Wq)) * w_scale`, the zero-point
    term folded into a constant column sum (MatMulInteger takes only a scalar zero point).
    uint8 x int8 is onnxruntime's fast integer path. Weights under ROW_INT8_MIN_ELEMENTS
    values (the sparse head's [H, 1]) stay float, as the TFLite converter keeps them: the
    lexical weights come straight out of that product; so do MatMuls whose node name holds
    one of `keep_float`. Returns how many MatMuls it rewrote.

    `levels` 127 keeps activations to 7 bits ([0, 127]): on x86 CPUs without VNNI,
    onnxruntime's u8 x s8 kernel adds pairs of products in int16 with saturation
    (`vpmaddubsw`), which 2 x 255 x 127 overflows and 2 x 127 x 127 does not.
    `weight_levels` 63 (or 64, onnxruntime's `reduce_range`) keeps the weights to 7 bits
    instead: 2 x 255 x 64 fits too. `unsigned_weights` stores the same int8 codes plus 128 as
    uint8 with a zero point of 128, so the products are bit for bit the same; onnxruntime then
    runs its u8 x u8 kernel, which widens to int16 before multiplying and never saturates.
    """
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    consts = {"edge_m3_row_eps": 1e-12, "edge_m3_row_0": 0.0, f"edge_m3_row_{levels}": float(levels)}
    graph.initializer.extend(numpy_helper.from_array(np.array(v, np.float32), k)
                             for k, v in consts.items())
    eps, zero, top = consts
    done: dict[str, tuple[str, str, str]] = {}
    nodes, count = [], 0
    for node in graph.node:
        w = inits.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) == 2 else None
        if (w is None or len(w.dims) != 2 or w.data_type != onnx.TensorProto.FLOAT
                or int(np.prod(w.dims)) < ROW_INT8_MIN_ELEMENTS
                or any(k in node.name for k in keep_float)):
            nodes.append(node)
            continue
        name = node.input[1]
        if name not in done:  # a weight shared by several MatMuls is quantized once
            weight = numpy_helper.to_array(w)
            wl = float(weight_levels)
            scale = (np.maximum(np.abs(weight).max(axis=0), 1e-30) / wl).astype(np.float32)
            q = np.clip(np.round(weight / scale), -wl, wl).astype(np.int8)
            stored = (q.astype(np.int16) + 128).astype(np.uint8) if unsigned_weights else q
            w.CopyFrom(numpy_helper.from_array(stored, name + "_int8"))
            graph.initializer.extend([
                numpy_helper.from_array(scale, name + "_scale"),
                numpy_helper.from_array(q.astype(np.float32).sum(axis=0), name + "_colsum")])
            done[name] = (name + "_int8", name + "_scale", name + "_colsum")
            if unsigned_weights and "edge_m3_row_w128" not in inits:
                inits["edge_m3_row_w128"] = numpy_helper.from_array(np.array(128, np.uint8),
                                                                    "edge_m3_row_w128")
                graph.initializer.append(inits["edge_m3_row_w128"])
        wq, ws, colsum = done[name]
        zp_w = ["", "edge_m3_row_w128"] if unsigned_weights else []
        x, y = node.input[0], node.output[0]
        p = (node.name or y) + "/row_int8"

        def op(kind: str, inputs: list[str], out: str, p: str = p, **attrs: Any) -> str:
            nodes.append(helper.make_node(kind, inputs, [p + out], name=p + out, **attrs))
            return p + out

        hi = op("Max", [op("ReduceMax", [x], "/max", axes=[-1], keepdims=1), zero], "/hi")
        lo = op("Min", [op("ReduceMin", [x], "/min", axes=[-1], keepdims=1), zero], "/lo")
        s = op("Div", [op("Max", [op("Sub", [hi, lo], "/range"), eps], "/range1"), top], "/s")
        z = op("Round", [op("Neg", [op("Div", [lo, s], "/lo_s")], "/neg")], "/z")
        q = op("Add", [op("Round", [op("Div", [x, s], "/x_s")], "/round"), z], "/shift")
        q = op("Cast", [op("Clip", [q, zero, top], "/clip")], "/q", to=onnx.TensorProto.UINT8)
        acc = op("Cast", [op("MatMulInteger", [q, wq, *zp_w], "/mm")], "/acc", to=onnx.TensorProto.FLOAT)
        acc = op("Sub", [acc, op("Mul", [z, colsum], "/zsum")], "/centred")
        nodes.append(helper.make_node("Mul", [op("Mul", [acc, s], "/rows"), ws], [y],
                                      name=p + "/cols"))
        count += 1
    del graph.node[:]
    graph.node.extend(nodes)
    return count


@dataclass(frozen=True)
class OnnxCalibration:
    """What a calibrated ONNX recipe measures activations on: token ids, each text at its own
    length, and a folder for the float model's copy that onnxruntime runs."""

    ids: Sequence[Sequence[int]]
    work: Path


def _reshape_source(made_by: dict[str, Any], tensor: str) -> str:
    """The tensor that `tensor` is a Reshape (chain) of (`made_by`: each output's node):
    tf2onnx gives each of Q, K and V its own Reshape of the same hidden state, and the three
    share one smoothing scale."""
    while tensor in made_by and made_by[tensor].op_type == "Reshape":
        tensor = made_by[tensor].input[0]
    return tensor


def activation_maxima(model: Any, tensors: Sequence[str], calib: OnnxCalibration) -> dict[str, Any]:
    """max |x| per channel (last axis) of each of `tensors` over the calibration texts, from the
    float model run by onnxruntime (each text alone, no padding). The model is saved beside
    `calib.work` with its weights in a .data file (so past 2 GB too) and read back unchanged."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import helper

    graph = model.graph
    added = [helper.make_tensor_value_info(t, onnx.TensorProto.FLOAT, None) for t in tensors]
    graph.output.extend(added)
    path = calib.work / "calibration.onnx"
    try:
        onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=path.name + ".data", size_threshold=EXTERNAL_MIN_TENSOR)
        onnx.load_external_data_for_model(model, str(calib.work))  # the weights back in memory
    finally:
        for vi in added:
            graph.output.remove(vi)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the tensors as named
    session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    dtype = {"tensor(int32)": np.int32, "tensor(int64)": np.int64}[session.get_inputs()[0].type]
    maxima: dict[str, Any] = {}
    for ids in calib.ids:  # inside the builder's timed "export ONNX" step (a child process)
        a = np.asarray([list(ids)], dtype)
        for name, x in zip(tensors, session.run(list(tensors), {INPUT_IDS: a, ATTENTION_MASK: np.ones_like(a)}),
                           strict=True):
            m = np.abs(x).reshape(-1, x.shape[-1]).max(axis=0)
            maxima[name] = m if name not in maxima else np.maximum(maxima[name], m)
    del session
    path.unlink()
    path.with_name(path.name + ".data").unlink()
    return maxima


def smooth_projections(model: Any, calib: OnnxCalibration, alpha: float = SMOOTH_ALPHA,
                       names: Sequence[str] = SMOOTHED_PROJECTIONS) -> int:
    """SmoothQuant (Xiao et al., 2023) on each MatMul by a float weight whose node sits in a
    Keras layer named in `names`: per input channel s = max|X|^alpha / max|W|^(1 - alpha)
    (clipped to [0.01, 100]; X over the calibration texts, W over every MatMul fed the same
    hidden state), a Mul by 1/s before the MatMul and the weight's rows times s. Exact in
    float; per-row int8 activations then lose less to the few wide channels. A Mul, not a fold
    into the LayerNorm: post-LN encoders reuse its output as the residual. Returns how many
    MatMuls it smoothed."""
    import re

    import numpy as np
    from onnx import helper, numpy_helper

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    alternatives = "|".join(map(re.escape, names))
    site = re.compile(rf"/({alternatives})(_\d+)?/")
    chosen = [n for n in graph.node if n.op_type == "MatMul" and len(n.input) == 2
              and n.input[1] in inits and len(inits[n.input[1]].dims) == 2 and site.search(n.name)]
    if not chosen:
        return 0
    maxima = activation_maxima(model, sorted({n.input[0] for n in chosen}), calib)
    made_by = {o: n for n in graph.node for o in n.output}  # once, not per projection
    groups: dict[str, list[Any]] = {}
    for n in chosen:
        groups.setdefault(_reshape_source(made_by, n.input[0]), []).append(n)
    muls: dict[str, Any] = {}
    for members in groups.values():
        weights = [numpy_helper.to_array(inits[n.input[1]]) for n in members]
        x_max = np.max([maxima[n.input[0]] for n in members], axis=0)
        w_max = np.max([np.abs(w).max(axis=1) for w in weights], axis=0)
        s = np.clip(np.maximum(x_max, 1e-5) ** alpha / np.maximum(w_max, 1e-5) ** (1 - alpha),
                    1e-2, 1e2).astype(np.float32)
        inv = members[0].name + "/smooth_inv"
        graph.initializer.append(numpy_helper.from_array((1 / s).astype(np.float32), inv))
        for n, w in zip(members, weights, strict=True):
            inits[n.input[1]].CopyFrom(numpy_helper.from_array((w * s[:, None]).astype(np.float32),
                                                               n.input[1]))
            out = n.name + "/smoothed"
            muls[n.name] = helper.make_node("Mul", [n.input[0], inv], [out], name=out)
            n.input[0] = out
    nodes = []
    for n in graph.node:
        if n.name in muls:
            nodes.append(muls[n.name])
        nodes.append(n)
    del graph.node[:]
    graph.node.extend(nodes)
    return len(muls)


def last_layers(model: Any, n: int) -> list[str]:
    """Name fragments of the last `n` encoder layers' nodes (`/layer_<i>_`, Keras's scopes)."""
    import re

    found = {int(m.group(1)) for node in model.graph.node
             for m in [re.search(r"/layer_(\d+)_", node.name)] if m}
    return [f"/layer_{i}_" for i in sorted(found)[-n:]] if found and n else []


def per_row_int8_tables(model: Any, column_scales: str = "none") -> int:
    """Each Gather from a float table becomes a Gather of int8 rows (one scale per row,
    symmetric) times the gathered rows' scales: standard ops, 1 byte a weight, and every row
    at its own resolution (onnxruntime's quantizer gives a table one scale). Returns how many
    tables it rewrote.

    `column_scales` ("none", "vocabulary": the largest table only, or "all") first divides each
    column by its largest magnitude (normalised to mean 1) and multiplies the gathered rows
    back by that [H] vector (one more Mul): a few of XLM-R's word-table columns are far wider
    than the rest and set every row's step. On e5-small the word table alone then costs the
    worst text 0.0001 of dense cosine instead of 0.0018 (tools/research/smoothed_projections.py
    --ablate); the position table is left alone ("all" moved one lexical
    weight by 0.08 there).
    """
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    if column_scales not in ("none", "vocabulary", "all"):
        raise ValueError(f"column_scales {column_scales!r}: none, vocabulary or all")
    tables = [inits[n.input[0]] for n in graph.node if n.op_type == "Gather" and n.input[0] in inits]
    vocabulary = max(tables, key=lambda t: t.dims[0], default=None)
    axis_name = "edge_m3_row_axis_last"
    graph.initializer.append(numpy_helper.from_array(np.array([-1], np.int64), axis_name))
    nodes, count = [], 0
    for node in graph.node:
        t = inits.get(node.input[0]) if node.op_type == "Gather" else None
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        if t is None or len(t.dims) != 2 or t.data_type != onnx.TensorProto.FLOAT or axis != 0:
            nodes.append(node)
            continue
        name = t.name
        table = numpy_helper.to_array(t)
        cols = np.ones(table.shape[1], np.float32)
        scaled = column_scales == "all" or (column_scales == "vocabulary" and t is vocabulary)
        if scaled:
            widest = np.abs(table).max(axis=0)
            used = widest > 0
            if used.any():
                cols = np.where(used, widest / widest[used].mean(), 1.0).astype(np.float32)
            table = table / cols
        scale = (np.maximum(np.abs(table).max(axis=1), 1e-30) / 127.0).astype(np.float32)
        t.CopyFrom(numpy_helper.from_array(
            np.clip(np.round(table / scale[:, None]), -127, 127).astype(np.int8), name + "_int8"))
        graph.initializer.append(numpy_helper.from_array(scale, name + "_row_scale"))
        ids, y, p = node.input[1], node.output[0], (node.name or node.output[0]) + "/row_int8"
        rows = p + "/rows" if scaled else y
        nodes += [helper.make_node("Gather", [name + "_int8", ids], [p + "/q"], name=p + "/q"),
                  helper.make_node("Cast", [p + "/q"], [p + "/f"], name=p + "/f",
                                   to=onnx.TensorProto.FLOAT),
                  helper.make_node("Gather", [name + "_row_scale", ids], [p + "/s"], name=p + "/s"),
                  helper.make_node("Unsqueeze", [p + "/s", axis_name], [p + "/s1"], name=p + "/s1"),
                  helper.make_node("Mul", [p + "/f", p + "/s1"], [rows], name=p + "/mul")]
        if scaled:
            graph.initializer.append(numpy_helper.from_array(cols.astype(np.float32),
                                                             name + "_col_scale"))
            nodes.append(helper.make_node("Mul", [rows, name + "_col_scale"], [y], name=p + "/cols"))
        count += 1
    del graph.node[:]
    graph.node.extend(nodes)
    return count


def signatures(seq_lens: Sequence[int], heads: Sequence[str],
               widths: dict[str, int]) -> list[dict[str, Any]]:
    """One manifest signature per declared length, shaped like the TFLite entries."""
    sigs = []
    for n in sorted(seq_lens):
        shapes = {DENSE_VECS: [1, widths.get(DENSE_VECS, 0)], SPARSE_WEIGHTS: [1, n],
                  COLBERT_VECS: [1, n - 1, widths.get(COLBERT_VECS, 0)]}
        sigs.append({
            "name": signature_name(n), "seq_len": n,
            "inputs": [{"name": k, "shape": [1, n], "dtype": "int32"} for k in INPUTS],
            "outputs": [{"name": HEAD_OUTPUTS[h], "shape": shapes[HEAD_OUTPUTS[h]],
                         "dtype": "float32"} for h in HEAD_OUTPUTS if h in heads],
        })
    return sigs


def self_check(path: Path, sigs: Sequence[dict[str, Any]]) -> CheckResult:
    """Run every declared length in onnxruntime; outputs must have the declared shapes."""
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    for sig in sigs:
        n = sig["seq_len"]
        ids = np.full((1, n), 1, np.int32)  # <s> </s> then <pad>: valid for any vocabulary
        ids[0, :2] = [0, 2]
        mask = (np.arange(n) < 2).astype(np.int32)[None]
        got = dict(zip(names, sess.run(names, {INPUT_IDS: ids, ATTENTION_MASK: mask}), strict=True))
        for o in sig["outputs"]:
            value = got[o["name"]]
            if list(value.shape) != o["shape"] or value.dtype != np.float32:
                raise RuntimeError(f"{path.name} {sig['name']}: {o['name']} is "
                                   f"{value.dtype}{list(value.shape)}, declared {o['shape']}")
            if not np.isfinite(value).all():
                raise RuntimeError(f"{path.name} {sig['name']}: {o['name']} is not finite")
    return CheckResult.passed(ort.__version__)


def audit(path: Path) -> dict[str, Any]:
    """Op types (domain-qualified outside ai.onnx), opset and IR version, checked on disk.

    `onnx.checker` is given the path so that it follows external data.
    """
    import onnx

    onnx.checker.check_model(str(path))
    model = onnx.load(str(path), load_external_data=False)
    ops = sorted({f"{n.domain}:{n.op_type}" if n.domain else n.op_type for n in model.graph.node})
    if "Erfc" in ops:
        raise RuntimeError(f"{path.name}: has an Erfc node, which onnxruntime cannot run")
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    return {"ops": ops, "opset": int(opset), "ir_version": int(model.ir_version)}


def oldest_runtime(opset: int, ir_version: int, checked: str) -> dict[str, str]:
    """Oldest onnxruntime by its opset/IR tables, next to the version that really ran it."""
    need = [v for v in (ORT_MIN_FOR_OPSET.get(opset), ORT_MIN_FOR_IR.get(ir_version)) if v]
    if len(need) < 2:
        return {"onnxruntime": checked, "basis": "tested only"}
    return {"onnxruntime": max(need, key=version_tuple), "tested": checked,
            "basis": f"opset {opset} / IR {ir_version} (compatibility table, not run)"}


def write_ort(path: Path, sigs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """An ORT-format copy of `path` for onnxruntime's mobile and reduced builds, plus the
    operator config such a build is compiled from (`--include_ops_by_config`).

    Basic graph optimizations only: the extended ones add CPU-provider-specific fused ops that
    NNAPI/CoreML builds lack. Constant folding is off: it would fold fp16 weights and their
    Casts back into fp32 and double the fp16 file.
    """
    import onnxruntime as ort
    from onnxruntime.tools.ort_format_model import create_config_from_models

    ort_path = path.with_suffix(".ort")
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.optimized_model_filepath = str(ort_path)
    opts.add_session_config_entry("session.save_model_format", "ORT")
    ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"],
                         disabled_optimizers=["ConstantFolding"])
    config = path.with_suffix(".required_operators.config")
    create_config_from_models([ort_path], config, False)
    # The generated header names the temporary path the model was converted from.
    lines = [ln for ln in config.read_text().splitlines() if not ln.startswith("#")]
    config.write_text("# operators of " + ort_path.name + " (edge-m3)\n" + "\n".join(lines) + "\n")
    # ORT-format files are versioned by the onnxruntime that wrote them: record it.
    return {"file": ort_path.name, "ops_config": config.name, "written_by": ort.__version__,
            "optimization": "basic, constant folding off",
            "self_check": {"onnxruntime": str(self_check(ort_path, sigs))}}


def _float32(model: Any) -> None:
    pass


def _smoothed_int8_per_row(model: Any, calib: OnnxCalibration) -> None:
    """SmoothQuant on the LayerNorm-fed projections, then per-row int8 MatMuls (the last
    layers float) and tables, the vocabulary table scaled per column as well as per row
    (issue 36: as faithful as bge-m3-lite's int8, which smooths too, on the same texts)."""
    smooth_projections(model, calib)
    # uint8-stored weights: the same products as int8 ones, but onnxruntime runs its u8 x u8
    # kernel, exact on every x86; u8 x s8 saturates int16 pair sums on AVX2 without VNNI
    # (e5-small: dense cosine 0.993, ColBERT error 0.20 there; docs/benchmarks.md, "Fidelity by
    # variant and family").
    per_row_int8_matmuls(model, last_layers(model, ROW_INT8_FLOAT_LAST_LAYERS),
                         unsigned_weights=True)
    per_row_int8_tables(model, column_scales="vocabulary")


# The ONNX exporter's recipes (spec.ONNX_EXPORTER), by the name a QuantRecipe gives: each
# rewrites the converted float model in place. (The uncalibrated per-row int8 that int8 used
# before issue 36 is tools/research/smoothed_projections.py's "" spec: per_row_int8_matmuls +
# per_row_int8_tables.)
ONNX_RECIPES: dict[str, Callable[[Any], Any]] = {
    "float32": _float32,
    "float16-weights": fp16_weights,
}
# Those that also measure activations on calibration texts (spec.FormatRecipe.calibrated).
CALIBRATED_ONNX_RECIPES: dict[str, Callable[[Any, OnnxCalibration], Any]] = {
    "smoothed-int8-per-row": _smoothed_int8_per_row,
}


def export(saved: Path, out_dir: Path, recipe: QuantRecipe, seq_lens: Sequence[int],
           heads: Sequence[str], params: int,
           external_threshold: int = EXTERNAL_DATA_THRESHOLD, ort: bool = False,
           calibration_ids: Sequence[Sequence[int]] | None = None) -> dict[str, Any]:
    """The child's job: convert, quantize, save, check, run; return the manifest entry."""
    if recipe.onnx is None:
        raise ValueError(f"{recipe.name}: no ONNX recipe")
    if recipe.onnx.calibrated and not calibration_ids:
        raise ValueError(f"{recipe.name}: its ONNX recipe needs calibration texts")
    quant = recipe.name
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / model_file(quant, "onnx")
    with tempfile.TemporaryDirectory(prefix="edge-m3-onnx-") as work_str:
        work = Path(work_str)
        model = run_tf2onnx(saved, work)
        widths = fix_io(model, heads)
        if recipe.onnx.calibrated:
            assert calibration_ids is not None
            CALIBRATED_ONNX_RECIPES[recipe.onnx.name](model, OnnxCalibration(calibration_ids, work))
        else:
            ONNX_RECIPES[recipe.onnx.name](model)
        finish(model, quant, seq_lens, heads)
        extra = save(model, path, external_threshold)
        del model
    size = sum((out_dir / f).stat().st_size for f in [path.name, *extra])
    floor = recipe.min_size(params)
    if size < floor:
        raise RuntimeError(f"{path.name}: {size} bytes for {params} parameters ({quant}); "
                           f"expected >= {floor}: the weights were not captured")
    info = audit(path)
    sigs = signatures(seq_lens, heads, widths)
    checked = self_check(path, sigs)
    ort_copy = {"ort": write_ort(path, sigs)} if ort else {}
    return {**ort_copy, "format": "onnx", "file": path.name, "quant": quant, "opset": info["opset"],
            "ir_version": info["ir_version"], "signatures": sigs,
            "sequence_axis": SEQUENCE_AXIS,
            "oldest_runtime": oldest_runtime(info["opset"], info["ir_version"], checked.version or ""),
            "self_check": {"onnxruntime": str(checked)}, "ops": info["ops"], "extra_files": extra}

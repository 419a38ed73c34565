"""Keras SavedModel -> one ONNX file per quant variant, with a symbolic sequence axis.

ONNX has no multi-signature files. One graph whose sequence axis is the symbol `seq`, with the
supported lengths declared in the manifest (and in the file's metadata_props), keeps a single
copy of the weights; one file per length would repeat ~570M weights per length. Apps still pad
to one of the declared lengths, exactly as with TFLite.

Everything heavy runs in a child process (`python -m edge_m3.export_onnx`), so neither
TensorFlow's nor the quantizer's memory stays in the builder.

Weights are lifted out of the graph before tf2onnx sees it. Converting a frozen graph (what
the tf2onnx command line does) embeds every weight as a Const, which freezing and then
tf2onnx's passes copy again and again: ~45x the weight bytes on a 170 MB model, and the
full-size one (2.27 GB of fp32 weights) was OOM-killed at ~23.5 GB. Instead the child
  1. loads the SavedModel without restoring its variables, freezes `embed_dynamic` with TF's own
     freezer fed from the checkpoint one variable at a time, and writes every float tensor of
     ndim >= 2 and >= LIFT_MIN_ELEMENTS to a .npy file, leaving a Placeholder of the same dtype
     and shape (small and 1-D constants, e.g. LayerNorm gamma/beta, stay inline so tf2onnx's
     rewriters and folding still see them);
  2. runs tf2onnx on that graph of a few megabytes, the weights being extra graph inputs;
  3. turns each weight input back into an initializer read from its .npy, so MatMul's B and
     Gather's data are initializers exactly as before (onnxruntime's quantizer needs that).
TensorFlow's share of the memory is then about one tensor, whatever the model size; the ONNX
steps after it hold the model about once (plus what serializing and quantizing need).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_m3.export_tflite import DYNAMIC_SIGNATURE, QUANTS, expected_min_size, signature_name

OPSET = 17
# onnxruntime implements opset 17 (and IR version 8) from 1.12 on; only the installed one is run.
ORT_MIN_FOR_OPSET = {17: "1.12.0"}
ORT_MIN_FOR_IR = {8: "1.10.0"}
SEQ_AXIS = "seq"
SEQ_AXIS_MINUS_1 = "seq_minus_1"
SEQUENCE_AXIS = "symbolic, declared lengths only"
INPUTS = ("input_ids", "attention_mask")
HEAD_OUTPUTS = {"dense": "dense_vecs", "sparse": "sparse_weights", "colbert": "colbert_vecs"}
# Protobuf refuses to serialize a message over 2 GiB; stay clear of it (graph bytes included).
EXTERNAL_DATA_THRESHOLD = 2_000_000_000
# Tensors below this many bytes stay inline even when the rest goes to the .data file.
EXTERNAL_MIN_TENSOR = 1024
INT8_OP_TYPES = ["MatMul", "Gather"]
# The ORT format is a FlatBuffer too, with no external data: a copy must stay under 2 GiB.
ORT_FORMAT_LIMIT = 2**31 - 1
# Float constants of ndim >= 2 with at least this many elements (4 KB in fp32) are lifted out
# of the TF graph before tf2onnx: at BGE-M3 size that is every weight matrix and table.
LIFT_MIN_ELEMENTS = 1024


def model_file(quant: str) -> str:
    return f"model_{quant}.onnx"


def export_onnx_variant(saved: Path, out_dir: Path, quant: str, seq_lens: list[int],
                        heads: list[str], params: int,
                        external_threshold: int = EXTERNAL_DATA_THRESHOLD,
                        ort: bool = False) -> dict[str, Any]:
    """Write `model_<quant>.onnx` (plus `.data` when large, and `.ort` with its operator config
    when `ort`) into out_dir; return its manifest entry.

    Runs in a child process so the converter's and quantizer's memory goes back to the OS.
    """
    cmd = [sys.executable, "-m", "edge_m3.export_onnx", "--saved", str(saved),
           "--out-dir", str(out_dir), "--quant", quant, "--lens", ",".join(map(str, seq_lens)),
           "--heads", ",".join(heads), "--params", str(params),
           "--external-threshold", str(external_threshold), *(["--ort"] if ort else [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_child_env())
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"ONNX export ({quant}) failed: " + " | ".join(tail))
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # oneDNN's allocator keeps every buffer TF ever held (the 1 GB embedding table read from the
    # checkpoint included) for reuse; the export computes nothing in TF, so plain malloc it is.
    env.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    return env


@dataclass
class LiftedGraph:
    """The frozen `embed_dynamic` graph with its big weights lifted out into .npy files."""

    graph_def: Any  # tf GraphDef: every lifted weight is a Placeholder, no tensor data left
    inputs: list[str]  # the real inputs' tensor names (`input_ids:0`, `attention_mask:0`)
    outputs: dict[str, str]  # output tensor name -> signature output name (`dense_vecs`, ...)
    weights: dict[str, Path]  # weight Placeholder tensor name -> .npy holding its value


def _is_big(dtype: Any, shape: Sequence[int], min_elements: int) -> bool:
    """A float tensor of ndim >= 2 and >= min_elements: a weight matrix or embedding table.

    1-D and small tensors (LayerNorm gamma/beta, biases, shapes, scalars) stay inline, so
    tf2onnx's pattern rewriters and constant folding still see their values.
    """
    import tensorflow as tf

    return (tf.dtypes.as_dtype(dtype).is_floating and len(shape) >= 2
            and math.prod(shape) >= min_elements)


def is_lifted_weight(node: Any, min_elements: int = LIFT_MIN_ELEMENTS) -> bool:
    """Whether a GraphDef node is a Const that lift_weights would take out."""
    if node.op != "Const":
        return False
    tensor = node.attr["value"].tensor
    return _is_big(tensor.dtype, [d.size for d in tensor.tensor_shape.dim], min_elements)


def _save_weight(value: Any, path: Path) -> Path:
    import numpy as np

    np.save(path, value, allow_pickle=False)
    return path


def lift_weights(graph_def: Any, work: Path, min_elements: int = LIFT_MIN_ELEMENTS,
                 known: dict[str, tuple[Path, tuple[int, ...]]] | None = None,
                 ) -> tuple[Any, dict[str, Path]]:
    """A copy of graph_def whose weights are Placeholders of the same dtype and shape.

    `known` maps Const names whose value is already on disk (as .npy) to (file, real shape):
    freezing gave those a one-element stand-in. Any other big float Const has its value
    written to `work/c<i>.npy` here. Returns the copy and {placeholder tensor: .npy file}.
    """
    import tensorflow as tf
    from tensorflow.core.framework import graph_pb2, tensor_shape_pb2

    known = known or {}
    out = graph_pb2.GraphDef()
    out.versions.CopyFrom(graph_def.versions)
    out.library.CopyFrom(graph_def.library)
    weights: dict[str, Path] = {}
    for node in graph_def.node:
        new = out.node.add()
        if node.op != "Const" or (node.name not in known
                                  and not is_lifted_weight(node, min_elements)):
            new.CopyFrom(node)
            continue
        tensor = node.attr["value"].tensor
        if node.name in known:
            path, shape = known[node.name]
        else:
            value = tf.make_ndarray(tensor)
            path, shape = _save_weight(value, work / f"c{len(weights)}.npy"), value.shape
            del value
        new.name, new.op, new.device = node.name, "Placeholder", node.device
        new.attr["dtype"].type = tensor.dtype
        new.attr["shape"].shape.CopyFrom(tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in shape]))
        weights[node.name + ":0"] = path
    return out, weights


def _checkpoint_keys(root: Any, variables: Sequence[Any]) -> dict[int, str]:
    """{id(variable): its key in the SavedModel's checkpoint}, found the way TF's restore does:
    walking the object graph breadth first from the root."""
    from tensorflow.python.checkpoint import graph_view
    from tensorflow.python.trackable import base, trackable_utils

    wanted = {id(v) for v in variables}
    objects, paths = graph_view.ObjectGraphView(root).breadth_first_traversal()
    return {id(obj): trackable_utils.checkpoint_key(
                trackable_utils.object_path_to_string(paths[obj]), base.VARIABLE_VALUE_KEY)
            for obj in objects if id(obj) in wanted}


def _freeze_from_checkpoint(func: Any, keys: dict[int, str], reader: Any, work: Path,
                            min_elements: int,
                            ) -> tuple[Any, dict[str, tuple[Path, tuple[int, ...]]]]:
    """TF's own freezing (what tf2onnx runs), but fed from the checkpoint one variable at a time.

    A big float variable goes straight to .npy and freezes as a one-element stand-in of its
    dtype, so no GraphDef ever holds it. Returns the frozen GraphDef and, per stand-in Const
    name, (.npy file, real shape) for lift_weights.
    """
    import numpy as np
    from tensorflow.python.framework import convert_to_constants as c2c

    node_of = {id(val): ph.name.split(":")[0] for val, ph in func.graph.captures}
    handle_of = {id(v): id(v.handle) for v in func.graph.variables}
    known: dict[str, tuple[Path, tuple[int, ...]]] = {}

    # Private TF classes, the same ones tf2onnx's own large-model freezing uses.
    class FromCheckpoint(c2c._FunctionConverterDataInEager):
        def _eval(self, tensor: Any) -> Any:
            key = keys.get(id(tensor))
            if key is None:  # a captured constant, not a variable
                return tensor.numpy()
            value = reader.get_tensor(key)
            if not _is_big(value.dtype, value.shape, min_elements):
                return value
            name = node_of[handle_of[id(tensor)]]
            known[name] = (_save_weight(value, work / f"v{len(known)}.npy"), value.shape)
            return np.zeros((1,) * value.ndim, value.dtype)

    data = FromCheckpoint(func=func, lower_control_flow=False, aggressive_inlining=True)
    graph_def, _ = c2c._replace_variables_by_constants(converter_data=data)
    return graph_def, known


def lifted_graph(saved: Path, work: Path, min_elements: int = LIFT_MIN_ELEMENTS) -> LiftedGraph:
    """The SavedModel's `embed_dynamic`, frozen, with its weights lifted out into work/*.npy.

    The SavedModel is loaded without its variables (`experimental_skip_checkpoint`); each one
    the endpoint uses is then read from the checkpoint on its own. Neither the model nor any
    graph ever holds all the weights, whatever their size.
    """
    import tensorflow as tf

    options = tf.saved_model.LoadOptions(experimental_skip_checkpoint=True)
    imported = tf.saved_model.load(str(saved), tags=["serve"], options=options)
    func = imported.signatures[DYNAMIC_SIGNATURE]
    inputs = [t.name for t in func.inputs if t.dtype != tf.dtypes.resource]
    # A signature's outputs are its dict flattened, i.e. in sorted key order (as tf2onnx maps).
    outputs = dict(zip([t.name for t in func.outputs], sorted(func.structured_outputs),
                       strict=True))
    keys = _checkpoint_keys(imported, func.graph.variables)
    missing = [v.name for v in func.graph.variables if id(v) not in keys]
    if missing:
        raise RuntimeError(f"{saved}: no checkpoint key for variables {missing[:3]}")
    reader = tf.train.load_checkpoint(str(saved / "variables" / "variables"))
    frozen, known = _freeze_from_checkpoint(func, keys, reader, work, min_elements)
    del func, imported, reader
    gc.collect()
    graph_def, weights = lift_weights(frozen, work, min_elements, known)
    return LiftedGraph(graph_def, inputs, outputs, weights)


def weight_names(graph_def: Any, weights: dict[str, Path]) -> dict[str, str]:
    """Readable ONNX names for the lifted weights: the frozen Placeholders are `unknown_N`.

    Each weight gets the common path of the Identity nodes that read it, e.g.
    `.../layer_0_1/query_1/Cast/ReadVariableOp` or `.../word_embeddings_1`; a weight whose
    name would be empty or shared keeps its TF name.
    """
    identities: dict[str, list[str]] = {}
    for node in graph_def.node:
        if node.op == "Identity" and node.input:
            identities.setdefault(node.input[0].split(":")[0], []).append(node.name)
    chosen: dict[str, str] = {}
    for tensor in weights:
        todo, seen = [tensor.split(":")[0]], []
        while todo:
            for reader in identities.get(todo.pop(), []):
                todo.append(reader)
                seen.append(reader)
        named = [n for n in seen if not n.startswith("Func/")]  # inlining's own Identities
        chosen[tensor] = os.path.commonpath(named) if named else ""
    counts = list(chosen.values())
    return {tensor: name if name and counts.count(name) == 1 else tensor.split(":")[0]
            for tensor, name in chosen.items()}


def convert_lifted(lifted: LiftedGraph) -> Any:
    """tf2onnx on the weight-less graph, then each weight input turned back into an initializer.

    The weights enter tf2onnx as graph inputs, so none of its passes copies them; afterwards
    each is read from its .npy straight into an initializer under the input's name, so MatMul
    and Gather still take it directly (what onnxruntime's quantizer looks for).
    """
    import tensorflow as tf
    from tf2onnx import optimizer
    from tf2onnx.tfonnx import process_tf_graph

    rename = {name: name.split(":")[0] for name in lifted.inputs}
    rename.update(lifted.outputs)
    rename.update(weight_names(lifted.graph_def, lifted.weights))
    with tf.Graph().as_default() as tf_graph:
        tf.import_graph_def(lifted.graph_def, name="")
        g = process_tf_graph(tf_graph, opset=OPSET,
                             input_names=[*lifted.inputs, *lifted.weights],
                             output_names=list(lifted.outputs), tensors_to_rename=rename)
    g = optimizer.optimize_graph(g, catch_errors=False)
    model = g.make_model("edge-m3 BGE-M3 (tf2onnx)")
    del g
    graph = model.graph
    inputs = {vi.name for vi in graph.input}
    for tf_name, path in lifted.weights.items():
        name = rename[tf_name]
        if name not in inputs:  # pruned as unused by tf2onnx: nothing refers to it
            continue
        _add_initializer(graph, name, path)
    weights = {rename[n] for n in lifted.weights}
    clash = weights & {out for node in graph.node for out in node.output}
    if clash:
        raise RuntimeError(f"tf2onnx produced tensors named like weights: {sorted(clash)[:3]}")
    keep = [_copy(vi) for vi in graph.input if vi.name not in weights]
    del graph.input[:]
    graph.input.extend(keep)
    return model


def _add_initializer(graph: Any, name: str, path: Path) -> None:
    """Append the .npy at path as initializer `name`, copying its bytes only once.

    The header is read through a memmap (which touches no data); the data goes from one file
    read straight into raw_data, never through an intermediate array.
    """
    import numpy as np
    import onnx

    header = np.load(path, mmap_mode="r")
    dtype, shape, offset = header.dtype, header.shape, header.offset
    del header
    tensor = graph.initializer.add()
    tensor.name = name
    tensor.data_type = onnx.helper.np_dtype_to_tensor_dtype(dtype.newbyteorder("="))
    tensor.dims.extend(shape)
    if dtype.byteorder == ">" or (dtype.byteorder == "=" and sys.byteorder == "big"):
        tensor.raw_data = np.load(path).astype(dtype.newbyteorder("<")).tobytes()
        return  # raw_data is little-endian by definition
    with open(path, "rb") as f:
        f.seek(offset)
        tensor.raw_data = f.read()


def run_tf2onnx(saved: Path, work: Path, min_elements: int = LIFT_MIN_ELEMENTS) -> Any:
    """`embed_dynamic` as an in-memory ONNX model, with its weights as initializers."""
    return convert_lifted(lifted_graph(saved, work, min_elements))


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
        if name == "dense_vecs":
            widths[name] = _static_last_dim(vi)
            _set_dims(vi, [1, widths[name]])
        elif name == "sparse_weights":
            _set_dims(vi, [1, SEQ_AXIS])
        else:
            widths[name] = _static_last_dim(vi)
            _set_dims(vi, [1, SEQ_AXIS_MINUS_1, widths[name]])
    new_in = [_copy(inputs[n]) for n in INPUTS]
    new_out = [_copy(outputs[n]) for n in wanted_out]
    del graph.input[:]
    graph.input.extend(new_in)
    del graph.output[:]
    graph.output.extend(new_out)
    return widths


def _copy(vi: Any) -> Any:
    import onnx

    out = onnx.ValueInfoProto()
    out.CopyFrom(vi)
    return out


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


def quantize_int8(src: Path, work: Path) -> Any:
    """Dynamic-range int8 of the fp32 model saved at src: int8 per-channel MatMul weights,
    int8 (uint8) embedding Gathers.

    Activations stay float and are quantized per call (DynamicQuantizeLinear), so no
    calibration data is needed; every op stays in the standard ONNX domain. Takes a file, not
    a model, so that the caller's fp32 copy is gone while the quantizer holds its own.
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    dst = work / "int8.onnx"
    quantize_dynamic(str(src), str(dst), op_types_to_quantize=INT8_OP_TYPES, per_channel=True,
                     weight_type=QuantType.QInt8, use_external_data_format=True)
    return onnx.load(str(dst))


def signatures(seq_lens: Sequence[int], heads: Sequence[str],
               widths: dict[str, int]) -> list[dict[str, Any]]:
    """One manifest signature per declared length, shaped like the TFLite entries."""
    sigs = []
    for n in sorted(seq_lens):
        shapes = {"dense_vecs": [1, widths.get("dense_vecs", 0)], "sparse_weights": [1, n],
                  "colbert_vecs": [1, n - 1, widths.get("colbert_vecs", 0)]}
        sigs.append({
            "name": signature_name(n), "seq_len": n,
            "inputs": [{"name": k, "shape": [1, n], "dtype": "int32"} for k in INPUTS],
            "outputs": [{"name": HEAD_OUTPUTS[h], "shape": shapes[HEAD_OUTPUTS[h]],
                         "dtype": "float32"} for h in HEAD_OUTPUTS if h in heads],
        })
    return sigs


def self_check(path: Path, sigs: Sequence[dict[str, Any]]) -> str:
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
        got = dict(zip(names, sess.run(names, {"input_ids": ids, "attention_mask": mask}),
                       strict=True))
        for o in sig["outputs"]:
            value = got[o["name"]]
            if list(value.shape) != o["shape"] or value.dtype != np.float32:
                raise RuntimeError(f"{path.name} {sig['name']}: {o['name']} is "
                                   f"{value.dtype}{list(value.shape)}, declared {o['shape']}")
            if not np.isfinite(value).all():
                raise RuntimeError(f"{path.name} {sig['name']}: {o['name']} is not finite")
    return f"ok ({ort.__version__})"


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
    from edge_m3.export_tflite import version_tuple

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
            "self_check": {"onnxruntime": self_check(ort_path, sigs)}}


def export(saved: Path, out_dir: Path, quant: str, seq_lens: Sequence[int],
           heads: Sequence[str], params: int,
           external_threshold: int = EXTERNAL_DATA_THRESHOLD, ort: bool = False) -> dict[str, Any]:
    """The child's job: convert, quantize, save, check, run; return the manifest entry."""
    if quant not in QUANTS:
        raise ValueError(quant)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / model_file(quant)
    with tempfile.TemporaryDirectory(prefix="edge-m3-onnx-") as work_str:
        work = Path(work_str)
        model = run_tf2onnx(saved, work)
        widths = fix_io(model, heads)
        if quant == "fp16":
            fp16_weights(model)
        elif quant in ("int8", "int8pc"):  # ORT's dynamic int8 is per-channel either way
            src = work / "fp32.onnx"
            save(model, src, threshold=0)  # external data: the fp32 model may be past 2 GB
            del model
            gc.collect()
            model = quantize_int8(src, work)
        finish(model, quant, seq_lens, heads)
        extra = save(model, path, external_threshold)
        del model
    size = sum((out_dir / f).stat().st_size for f in [path.name, *extra])
    floor = expected_min_size(params, quant)
    if size < floor:
        raise RuntimeError(f"{path.name}: {size} bytes for {params} parameters ({quant}); "
                           f"expected >= {floor}: the weights were not captured")
    info = audit(path)
    sigs = signatures(seq_lens, heads, widths)
    checked = self_check(path, sigs)
    ort_version = checked[len("ok ("):-1]
    ort_copy = {"ort": write_ort(path, sigs)} if ort else {}
    return {**ort_copy, "format": "onnx", "file": path.name, "quant": quant, "opset": info["opset"],
            "ir_version": info["ir_version"], "signatures": sigs,
            "sequence_axis": SEQUENCE_AXIS,
            "oldest_runtime": oldest_runtime(info["opset"], info["ir_version"], ort_version),
            "self_check": {"onnxruntime": checked}, "ops": info["ops"], "extra_files": extra}


def main(argv: Sequence[str] | None = None) -> int:
    """Child-process entry; prints the manifest entry as JSON on the last line."""
    p = argparse.ArgumentParser(prog="python -m edge_m3.export_onnx")
    p.add_argument("--saved", type=Path, required=True)
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--quant", choices=QUANTS, required=True)
    p.add_argument("--lens", required=True)
    p.add_argument("--heads", required=True)
    p.add_argument("--params", type=int, required=True)
    p.add_argument("--external-threshold", type=int, default=EXTERNAL_DATA_THRESHOLD)
    p.add_argument("--ort", action="store_true", help="also write an ORT-format copy")
    a = p.parse_args(argv)
    entry = export(a.saved, a.out_dir, a.quant, [int(x) for x in a.lens.split(",")],
                   a.heads.split(","), a.params, a.external_threshold, a.ort)
    sys.stdout.write("\n" + json.dumps(entry) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

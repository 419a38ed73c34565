"""tf2onnx on the traced SavedModel, with the weights lifted out of the graph first.

Converting a frozen graph (what the tf2onnx command line does) embeds every weight as a Const,
which freezing and then tf2onnx's passes copy again and again: ~45x the weight bytes on a
170 MB model, and the full-size one (2.27 GB of fp32 weights) was OOM-killed at ~23.5 GB.
Instead:
  1. load the SavedModel without restoring its variables, freeze `embed_dynamic` with TF's own
     freezer fed from the checkpoint one variable at a time, and write every float tensor of
     ndim >= 2 and >= LIFT_MIN_ELEMENTS to a .npy file, leaving a Placeholder of the same dtype
     and shape (small and 1-D constants, e.g. LayerNorm gamma/beta, stay inline so tf2onnx's
     rewriters and folding still see them);
  2. run tf2onnx on that graph of a few megabytes, the weights being extra graph inputs;
  3. turn each weight input back into an initializer read from its .npy, so MatMul's B and
     Gather's data are initializers exactly as before (onnxruntime's quantizer needs that).
TensorFlow's share of the memory is then about one tensor, whatever the model size. This uses
private TF freezing classes (the ones tf2onnx uses), tied to the pinned tensorflow-cpu.
"""

from __future__ import annotations

import gc
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_m3.spec import DYNAMIC_SIGNATURE

OPSET = 17
# Float constants of ndim >= 2 with at least this many elements (4 KB in fp32) are lifted out
# of the TF graph before tf2onnx: at BGE-M3 size that is every weight matrix and table.
LIFT_MIN_ELEMENTS = 1024


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
    keep = [copy_value_info(vi) for vi in graph.input if vi.name not in weights]
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


def copy_value_info(vi: Any) -> Any:
    """A detached copy of a ValueInfoProto (graph.input entries cannot be moved)."""
    import onnx

    out = onnx.ValueInfoProto()
    out.CopyFrom(vi)
    return out

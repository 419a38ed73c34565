"""SavedModel endpoints -> one .tflite per quant variant, one fixed-length signature per length.

The signatures are endpoints of one SavedModel (edge_m3.export.trace), so the converter writes
the weights once and every subgraph points at the same buffers. Conversion runs in a child
process per variant (edge_m3.export.worker) so each variant's converter memory is returned to
the OS. Also here: the FlatBuffer patch that keeps per-tensor int8 loadable on tflite-runtime
2.14, the fp16 rewrite that gathers embedding rows before dequantizing them, the float file that
ai-edge-quantizer starts from (edge_m3.export.aeq), and the audit of
operators and signatures that the manifest records.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_m3.spec import ATTENTION_MASK, HEAD_OUTPUTS, INPUT_IDS, QuantRecipe, signature_name


def _converter(saved_dir: Path, seq_lens: Sequence[int]) -> Any:
    import tensorflow as tf

    return tf.lite.TFLiteConverter.from_saved_model(
        str(saved_dir), signature_keys=[signature_name(n) for n in seq_lens])


def _keep(data: bytes) -> bytes:
    return data


@dataclass(frozen=True)
class ConverterRecipe:
    """One way the converter quantizes: its settings, then fixes to the bytes and the file."""

    configure: Callable[[Any], None]  # sets the TFLiteConverter's options
    rewrite: Callable[[bytes], bytes] = _keep  # the converted FlatBuffer, before it is written
    patch: Callable[[Path], Any] | None = None  # the written file, in place


def _float32(conv: Any) -> None:
    pass


def _float16_weights(conv: Any) -> None:
    import tensorflow as tf

    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.target_spec.supported_types = [tf.float16]


def _dynamic_int8_per_tensor(conv: Any) -> None:
    """Dynamic range: int8 weights (embedding table included), float activations. Per-tensor
    scales for dense layers keep FULLY_CONNECTED at v9, which tflite-runtime 2.14 loads
    (per-channel gives v12, which it rejects)."""
    import tensorflow as tf

    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv._experimental_disable_per_channel_quantization_for_dense_layers = True


def _dynamic_int8_per_channel(conv: Any) -> None:
    import tensorflow as tf

    conv.optimizations = [tf.lite.Optimize.DEFAULT]  # per-channel is the default


def convert_float(saved_dir: Path, seq_lens: Sequence[int], out_path: Path) -> int:
    """float32 .tflite with its buffers after the FlatBuffer (so past 2 GB too): the input
    of ai-edge-quantizer, never shipped. Returns the file size."""
    conv = _converter(saved_dir, seq_lens)
    conv._experimental_use_buffer_offset = True
    out_path.write_bytes(conv.convert())
    return out_path.stat().st_size


def check_size(size: int, recipe: QuantRecipe, param_count: int) -> None:
    """Refuse a file too small for its parameters: a converter dropped weights."""
    floor = recipe.min_size(param_count)
    if size < floor:
        raise RuntimeError(
            f"converter wrote {size} bytes for {param_count} parameters ({recipe.name}); expected "
            f">= {floor}: the weights were not captured")


def convert(saved_dir: Path, seq_lens: Sequence[int], recipe: QuantRecipe, out_path: Path,
            param_count: int) -> int:
    """Convert the SavedModel's endpoints to one .tflite with the variant's converter recipe
    (CONVERTER_RECIPES); returns the file size."""
    steps = CONVERTER_RECIPES[recipe.tflite.name]
    conv = _converter(saved_dir, seq_lens)
    steps.configure(conv)
    data = steps.rewrite(conv.convert())
    check_size(len(data), recipe, param_count)
    out_path.write_bytes(data)
    del data
    if steps.patch is not None:
        steps.patch(out_path)
    return out_path.stat().st_size


# FULLY_CONNECTED v12 means "float in, per-channel int8 weights"; v9 is the hybrid
# per-tensor kernel that tflite-runtime 2.14 has. FC_VERSION_SLOT is OperatorCode.version's
# vtable offset in the TFLite schema.
FC_PER_CHANNEL_VERSION, FC_PER_TENSOR_VERSION, FC_VERSION_SLOT = 12, 9, 8


def pin_per_tensor_fc_version(path: Path) -> int:
    """Give per-tensor hybrid FULLY_CONNECTED ops the version their kernel really needs.

    With per-channel disabled the converter still stamps v12 on BGE-M3-sized models (not on
    small ones) although every weight has exactly one scale, and tflite-runtime 2.14 then
    refuses the file. The op is v9 by its own definition, so the version field is rewritten
    in place, only after checking every FC op that uses the code: float32 input, int8 weights
    with a single scale. Returns the number of operator codes rewritten.
    """
    from tensorflow.lite.python import schema_py_generated as schema

    fc = schema.BuiltinOperator.FULLY_CONNECTED
    with open(path, "r+b") as fh, mmap.mmap(fh.fileno(), 0) as buf:
        model = schema.Model.GetRootAsModel(buf, 0)
        targets = {i for i in range(model.OperatorCodesLength())
                   if max(model.OperatorCodes(i).BuiltinCode(),
                          model.OperatorCodes(i).DeprecatedBuiltinCode()) == fc
                   and model.OperatorCodes(i).Version() == FC_PER_CHANNEL_VERSION}
        for g in range(model.SubgraphsLength()):
            graph = model.Subgraphs(g)
            for k in range(graph.OperatorsLength()):
                op = graph.Operators(k)
                if op.OpcodeIndex() not in targets:
                    continue
                x, w = graph.Tensors(op.Inputs(0)), graph.Tensors(op.Inputs(1))
                q = w.Quantization()
                if (x.Type() != schema.TensorType.FLOAT32 or w.Type() != schema.TensorType.INT8
                        or q is None or q.ScaleLength() != 1):
                    return 0  # really per-channel (or not hybrid): leave the file as it is
        for i in targets:
            code = model.OperatorCodes(i)
            slot = code._tab.Offset(FC_VERSION_SLOT)
            if slot:
                pos = code._tab.Pos + slot
                buf[pos:pos + 4] = FC_PER_TENSOR_VERSION.to_bytes(4, "little", signed=True)
        buf.flush()
    return len(targets)


# GATHER reads int16 tables from v4 on; BITCAST exists from TF Lite 2.13 (runtime_version.cc).
GATHER_INT16_VERSION, BITCAST_MIN_RUNTIME = 4, "2.13.0"
BUFFER_ALIGNMENT = 16  # as the converter aligns buffers (schema: `data:[ubyte] (force_align: 16)`)


def gather_half_tables(data: bytes) -> tuple[bytes, int]:
    """fp16 files: gather embedding rows first, dequantize only the rows gathered.

    The converter's float16 recipe stores every table in fp16 and dequantizes it whole
    (DEQUANTIZE -> GATHER). The interpreter keeps that fp32 copy of the word-embedding table
    (vocabulary x hidden x 4 bytes) for every signature: e5-small's 384 MB three times over.
    Here each such table is read as int16 bits instead: GATHER (int16, v4) -> BITCAST to fp16
    -> DEQUANTIZE of the gathered rows, which is exact and runs on tflite-runtime 2.14 (LiteRT's
    GATHER reads fp16 itself, but older runtimes do not). Returns the new file and the number of
    tables rewritten (0: the bytes are returned unchanged).
    """
    import numpy as np
    from tensorflow.lite.python import schema_py_generated as schema

    ops, types = schema.BuiltinOperator, schema.TensorType
    model = schema.ModelT.InitFromPackedBuf(data, 0)
    if any(b.offset > 1 for b in model.buffers or []):  # buffers outside the FlatBuffer (> 2 GB)
        return data, 0

    def code(op: Any) -> int:
        return builtin_code(model, op)

    def opcode(builtin: int, version: int) -> int:
        return operator_code(model, builtin, version)

    rewritten = 0
    for graph in model.subgraphs:
        readers: dict[int, list[tuple[Any, int]]] = {}
        for op in graph.operators:
            for pos, t in enumerate(op.inputs):
                readers.setdefault(int(t), []).append((op, pos))
        tables = {}  # fp32 table tensor -> (fp16 table tensor, its DEQUANTIZE op)
        for op in graph.operators:
            if code(op) != ops.DEQUANTIZE or len(op.inputs) != 1:
                continue
            src, dst = int(op.inputs[0]), int(op.outputs[0])
            table = graph.tensors[src]
            uses = readers.get(dst, [])
            if (table.type == types.FLOAT16 and model.buffers[table.buffer].data is not None
                    and len(readers.get(src, [])) == 1 and uses
                    and dst not in set(graph.outputs)
                    and all(code(r) == ops.GATHER and pos == 0 for r, pos in uses)):
                tables[dst] = (src, op)
        if not tables:
            continue
        out_ops = []
        for op in graph.operators:
            if code(op) == ops.DEQUANTIZE and int(op.outputs[0]) in tables:
                continue  # the whole-table dequantize goes
            if code(op) != ops.GATHER or int(op.inputs[0]) not in tables:
                out_ops.append(op)
                continue
            src, deq = tables[int(op.inputs[0])]
            graph.tensors[src].type = types.INT16  # the same bytes, read as bits
            rows = graph.tensors[int(op.outputs[0])]
            new = []
            for kind, suffix in ((types.INT16, "/fp16_bits"), (types.FLOAT16, "/fp16")):
                t = schema.TensorT()
                t.shape, t.shapeSignature, t.type = rows.shape, rows.shapeSignature, kind
                t.buffer, t.hasRank = 0, rows.hasRank
                t.name = (rows.name.decode() if isinstance(rows.name, bytes) else rows.name) + suffix
                graph.tensors.append(t)
                new.append(len(graph.tensors) - 1)
            bits, half = new
            final = int(op.outputs[0])
            op.inputs = np.array([src, *op.inputs[1:]], dtype=np.int32)
            op.outputs = np.array([bits], dtype=np.int32)
            op.opcodeIndex = opcode(ops.GATHER, max(GATHER_INT16_VERSION,
                                                    model.operatorCodes[op.opcodeIndex].version))
            cast = schema.OperatorT()
            cast.opcodeIndex = opcode(ops.BITCAST, 1)
            cast.inputs, cast.outputs = np.array([bits], np.int32), np.array([half], np.int32)
            dequant = schema.OperatorT()
            dequant.opcodeIndex = deq.opcodeIndex
            dequant.builtinOptionsType, dequant.builtinOptions = (deq.builtinOptionsType,
                                                                  deq.builtinOptions)
            dequant.inputs, dequant.outputs = np.array([half], np.int32), np.array([final], np.int32)
            out_ops += [op, cast, dequant]
            rewritten += 1
        graph.operators = out_ops
    if not rewritten:
        return data, 0
    _raise_min_runtime(model, BITCAST_MIN_RUNTIME)

    return pack_aligned(model, len(data)), rewritten


def builtin_code(model: Any, op: Any) -> int:
    """An object-API operator's builtin code: codes past 127 live in `builtinCode` only, older
    files keep theirs in `deprecatedBuiltinCode`."""
    c = model.operatorCodes[op.opcodeIndex]
    return max(c.builtinCode, c.deprecatedBuiltinCode)


def operator_code(model: Any, builtin: int, version: int) -> int:
    """The index of the object-API model's operator code (`builtin`, `version`), added if new."""
    from tensorflow.lite.python import schema_py_generated as schema

    for i, c in enumerate(model.operatorCodes):
        if max(c.builtinCode, c.deprecatedBuiltinCode) == builtin and c.version == version:
            return i
    c = schema.OperatorCodeT()
    c.builtinCode, c.version = builtin, version
    c.deprecatedBuiltinCode = min(builtin, schema.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES)
    model.operatorCodes.append(c)
    return len(model.operatorCodes) - 1


def pack_aligned(model: Any, size_hint: int) -> bytes:
    """The object-API model as file bytes, every weight buffer on a 16-byte boundary as the
    converter writes them (flatbuffers' own Pack aligns byte vectors to 1)."""
    import flatbuffers
    import numpy as np
    from tensorflow.lite.python import schema_py_generated as schema

    class AlignedBuffer(schema.BufferT):  # type: ignore[misc]
        """A weight buffer packed on a 16-byte boundary."""

        def Pack(self, builder: Any) -> int:  # noqa: N802 (the generated API's name)
            vec = None
            if self.data is not None:
                payload = np.asarray(self.data, dtype=np.uint8).tobytes()
                builder.StartVector(1, len(payload), BUFFER_ALIGNMENT)
                builder.head = builder.head - len(payload)
                builder.Bytes[builder.head:builder.head + len(payload)] = payload
                builder.vectorNumElems = len(payload)
                vec = builder.EndVector()
            schema.BufferStart(builder)
            if vec is not None:
                schema.BufferAddData(builder, vec)
            schema.BufferAddOffset(builder, self.offset)
            schema.BufferAddSize(builder, self.size)
            return schema.BufferEnd(builder)

    for b in model.buffers:
        b.__class__ = AlignedBuffer
    builder = flatbuffers.Builder(size_hint + (1 << 22))
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _raise_min_runtime(model: Any, version: str) -> None:
    """Lift the file's `min_runtime_version` metadata to at least `version` (same width)."""
    import numpy as np

    from edge_m3.common.options import version_tuple

    for md in model.metadata or []:
        name = md.name.decode() if isinstance(md.name, bytes) else md.name
        if name != "min_runtime_version":
            continue
        buf = model.buffers[md.buffer]
        old = bytes(buf.data).rstrip(b"\0").decode()
        if version_tuple(old) < version_tuple(version):
            width = max(len(buf.data), len(version))
            buf.data = np.frombuffer(version.encode().ljust(width, b"\0"), dtype=np.uint8)


def _gather_half_tables(data: bytes) -> bytes:
    return gather_half_tables(data)[0]


# The converter's recipes (spec.TFLITE_CONVERTER), by the name a QuantRecipe gives.
CONVERTER_RECIPES: dict[str, ConverterRecipe] = {
    "float32": ConverterRecipe(_float32),
    "float16-weights": ConverterRecipe(_float16_weights, rewrite=_gather_half_tables),
    "dynamic-int8-per-tensor": ConverterRecipe(_dynamic_int8_per_tensor, patch=pin_per_tensor_fc_version),
    "dynamic-int8-per-channel": ConverterRecipe(_dynamic_int8_per_channel),
}


def _op_names() -> dict[int, str]:
    from tensorflow.lite.python import schema_py_generated as schema

    return {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}


def audit(path: Path) -> dict[str, Any]:
    """Operators with versions, the converter's min_runtime_version, and the signatures."""
    from tensorflow.lite.python import schema_py_generated as schema

    names = _op_names()
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        model = schema.Model.GetRootAsModel(buf, 0)
        ops: dict[str, int] = {}
        for i in range(model.OperatorCodesLength()):
            code = model.OperatorCodes(i)
            op = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
            name = names.get(op, str(op))
            if name == "CUSTOM":
                name = "CUSTOM:" + (code.CustomCode() or b"").decode()
            ops[name] = max(ops.get(name, 0), code.Version())
        meta: dict[str, str] = {}
        for i in range(model.MetadataLength()):
            md = model.Metadata(i)
            key = md.Name().decode()
            if key == "min_runtime_version":
                meta[key] = _buffer_bytes(model, buf, md.Buffer()).rstrip(b"\0").decode()
    return {"ops": dict(sorted(ops.items())), "min_runtime_version": meta.get("min_runtime_version")}


def _buffer_bytes(model: Any, buf: Any, index: int) -> bytes:
    """A buffer's bytes, inline or stored after the FlatBuffer (offset/size, as ai-edge-quantizer
    and the converter's buffer-offset mode write them)."""
    b = model.Buffers(index)
    if b.Offset() > 1:
        return bytes(buf[b.Offset():b.Offset() + b.Size()])
    return b.DataAsNumpy().tobytes() if b.DataLength() else b""


def signature_details(path: Path) -> list[dict[str, Any]]:
    """Input/output names, shapes and dtypes per signature, as an interpreter reports them."""
    import tensorflow as tf

    interp = tf.lite.Interpreter(model_path=str(path))
    sigs = []
    for name in interp.get_signature_list():
        runner = interp.get_signature_runner(name)

        def describe(details: dict[str, Any]) -> list[dict[str, Any]]:
            return [{"name": k, "shape": [int(x) for x in v["shape"]],
                     "dtype": v["dtype"].__name__} for k, v in sorted(details.items())]

        inputs = describe(runner.get_input_details())
        order = {INPUT_IDS: 0, ATTENTION_MASK: 1}
        inputs.sort(key=lambda d: order.get(d["name"], 9))
        outputs = describe(runner.get_output_details())
        out_order = {name: i for i, name in enumerate(HEAD_OUTPUTS.values())}
        outputs.sort(key=lambda d: out_order.get(d["name"], 9))
        seq_len = inputs[0]["shape"][1]
        sigs.append({"name": name, "seq_len": seq_len, "inputs": inputs, "outputs": outputs})
    sigs.sort(key=lambda s: s["seq_len"])
    return sigs

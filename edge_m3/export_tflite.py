"""Keras BGE-M3 -> one .tflite per quant variant, one fixed-length signature per length.

The signatures are endpoints of one SavedModel, so the converter writes the weights once and
every subgraph points at the same buffers. Conversion runs in a child process per variant
(`python -m edge_m3.export_tflite`) so each variant's converter memory is returned to the OS.
"""

from __future__ import annotations

import argparse
import json
import mmap
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# int8: per-tensor dynamic range, runs on tflite-runtime 2.14. int8pc: per-channel scales
# (FULLY_CONNECTED v12, LiteRT / TF Lite >= 2.17 only), far closer to fp32 on trained weights.
QUANTS = ("fp32", "fp16", "int8", "int8pc")
# FlatBuffers address with 32-bit offsets: a file (and so its weights) must stay under 2 GiB.
FLATBUFFER_LIMIT = 2**31 - 1
BYTES_PER_PARAM = {"fp32": 4.0, "fp16": 2.0, "int8": 1.0, "int8pc": 1.0}
# The oldest runtime we ship for: Raspberry Pi rigs and older apps pin tflite-runtime 2.14.
OLDEST_TFLITE_RUNTIME = "2.14.0"
DYNAMIC_SIGNATURE = "embed_dynamic"


def signature_name(seq_len: int) -> str:
    """Distinct names per length: same-named concrete functions collapse into one signature."""
    return f"embed_{int(seq_len)}"


def write_saved_model(model: Any, seq_lens: Sequence[int], heads: Sequence[str],
                      out_dir: Path, dynamic: bool = False) -> None:
    """A SavedModel with one `[1, L]` int32 endpoint per length, all over the same variables.

    `dynamic` adds `embed_dynamic` (`[1, None]`) for the ONNX export, whose one file declares
    the sequence axis symbolically instead of repeating the weights per length.
    """
    import keras
    import tensorflow as tf

    archive = keras.export.ExportArchive()
    # No archive.track(model): the endpoints capture the variables they use, and tracking the
    # model as well stored every weight twice (variables/ and _all_variables/), doubling the
    # SavedModel on disk and what the converter loads from it.
    heads = tuple(heads)
    for length in [*seq_lens, *([None] if dynamic else [])]:
        archive.add_endpoint(
            name=signature_name(length) if length else DYNAMIC_SIGNATURE,
            fn=lambda input_ids, attention_mask: model(input_ids, attention_mask, heads=heads,
                                                       hidden=False),
            input_signature=[tf.TensorSpec([1, length], tf.int32, name="input_ids"),
                             tf.TensorSpec([1, length], tf.int32, name="attention_mask")],
        )
    archive.write_out(str(out_dir), verbose=False)


def expected_min_size(param_count: int, quant: str) -> int:
    """A floor on the file size: catches the converter silently dropping Keras 3 weights.

    Dynamic int8 keeps tensors under 1,024 elements in float, hence the margin.
    """
    return int(param_count * BYTES_PER_PARAM[quant] * 0.9)


def estimated_size(param_count: int, quant: str) -> int:
    """What a variant's file will roughly weigh (for the 2 GB check before converting)."""
    return int(param_count * BYTES_PER_PARAM[quant])


def convert(saved_dir: Path, seq_lens: Sequence[int], quant: str, out_path: Path,
            param_count: int) -> int:
    """Convert the SavedModel's endpoints to one .tflite; returns the file size."""
    import tensorflow as tf

    conv = tf.lite.TFLiteConverter.from_saved_model(
        str(saved_dir), signature_keys=[signature_name(n) for n in seq_lens])
    if quant == "fp16":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    elif quant == "int8":
        # Dynamic range: int8 weights (embedding table included), float activations. Per-tensor
        # scales for dense layers keep FULLY_CONNECTED at v9, which tflite-runtime 2.14 loads
        # (per-channel gives v12, which it rejects).
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv._experimental_disable_per_channel_quantization_for_dense_layers = True
    elif quant == "int8pc":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]  # per-channel is the default
    elif quant != "fp32":
        raise ValueError(quant)
    data = conv.convert()
    floor = expected_min_size(param_count, quant)
    if len(data) < floor:
        raise RuntimeError(
            f"converter wrote {len(data)} bytes for {param_count} parameters ({quant}); expected "
            f">= {floor}: the weights were not captured")
    out_path.write_bytes(data)
    del data
    if quant == "int8":
        pin_per_tensor_fc_version(out_path)
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
                raw = model.Buffers(md.Buffer()).DataAsNumpy().tobytes()
                meta[key] = raw.rstrip(b"\0").decode()
    return {"ops": dict(sorted(ops.items())), "min_runtime_version": meta.get("min_runtime_version")}


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
        order = {"input_ids": 0, "attention_mask": 1}
        inputs.sort(key=lambda d: order.get(d["name"], 9))
        outputs = describe(runner.get_output_details())
        out_order = {"dense_vecs": 0, "sparse_weights": 1, "colbert_vecs": 2}
        outputs.sort(key=lambda d: out_order.get(d["name"], 9))
        seq_len = inputs[0]["shape"][1]
        sigs.append({"name": name, "seq_len": seq_len, "inputs": inputs, "outputs": outputs})
    sigs.sort(key=lambda s: s["seq_len"])
    return sigs


def version_tuple(v: str) -> tuple[int, ...]:
    """'2.14.0' -> (2, 14, 0) for comparisons."""
    return tuple(int(p) for p in v.split(".")[:3] if p.isdigit())


def trace_checkpoint(checkpoint_dir: Path, seq_lens: Sequence[int], heads: Sequence[str],
                     saved_dir: Path, dynamic: bool = False,
                     kept_ids: Sequence[int] | None = None) -> tuple[int, list[int] | None]:
    """Checkpoint -> Keras -> SavedModel; returns the parameter count and the kept ids.

    `kept_ids` (vocabulary trimming) keeps only those rows of the word-embedding table.
    """
    from edge_m3.checkpoint import load_checkpoint
    from edge_m3.model import build_model

    ckpt = load_checkpoint(checkpoint_dir)
    if kept_ids is not None:
        from edge_m3.model import trimmed_checkpoint

        ckpt = trimmed_checkpoint(ckpt, keep_extreme_row(ckpt.tensors, kept_ids))
        kept_ids = ckpt.tensors.kept_ids
    model = build_model(ckpt)
    write_saved_model(model, seq_lens, heads, saved_dir, dynamic=dynamic)
    return model.parameter_count(), kept_ids


def keep_extreme_row(tensors: Any, kept_ids: Sequence[int]) -> list[int]:
    """Add the embedding row holding the table's largest |value| to the kept set.

    int8 quantizes the table with one scale, max|W| / 127: keeping that row keeps the scale,
    so every kept row quantizes exactly as in the untrimmed int8 file (one extra row).
    """
    import numpy as np

    table = tensors["embeddings.word_embeddings.weight"]
    best_row, best = 0, -1.0
    for start in range(0, table.shape[0], 8192):
        block = np.abs(np.asarray(table[start:start + 8192], dtype=np.float32)).max(axis=1)
        i = int(block.argmax())
        if block[i] > best:
            best_row, best = start + i, float(block[i])
    return sorted(set(int(k) for k in kept_ids) | {best_row})


def main(argv: Sequence[str] | None = None) -> int:
    """Child-process entry (`trace` or `convert`); prints its result as JSON on the last line.

    Each heavy phase runs in its own process so the weights it held (2.3 GB for BGE-M3, more
    inside the converter) go back to the OS before the next phase starts.
    """
    p = argparse.ArgumentParser(prog="python -m edge_m3.export_tflite")
    sub = p.add_subparsers(dest="step", required=True)
    t = sub.add_parser("trace")
    t.add_argument("--checkpoint", type=Path, required=True)
    t.add_argument("--saved", type=Path, required=True)
    t.add_argument("--lens", required=True)
    t.add_argument("--heads", required=True)
    t.add_argument("--dynamic", action="store_true")
    t.add_argument("--vocab-map", type=Path, default=None)
    c = sub.add_parser("convert")
    c.add_argument("--saved", type=Path, required=True)
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--quant", choices=QUANTS, required=True)
    c.add_argument("--lens", required=True)
    c.add_argument("--params", type=int, required=True)
    a = p.parse_args(argv)
    lens = [int(x) for x in a.lens.split(",")]
    if a.step == "trace":
        kept = (json.loads(a.vocab_map.read_text())["kept_ids"] if a.vocab_map else None)
        params, kept = trace_checkpoint(a.checkpoint, lens, a.heads.split(","), a.saved,
                                        a.dynamic, kept)
        info: dict[str, Any] = {"params": params, "kept_ids": kept}
    else:
        size = convert(a.saved, lens, a.quant, a.out, a.params)
        info = {"size": size, **audit(a.out), "signatures": signature_details(a.out)}
    info["peak_rss"] = _peak_rss()
    sys.stdout.write("\n" + json.dumps(info) + "\n")
    return 0


def _peak_rss() -> int:
    """This process's peak resident set size in bytes (Linux reports KiB)."""
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


if __name__ == "__main__":
    raise SystemExit(main())

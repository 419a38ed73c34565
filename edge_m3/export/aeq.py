"""Mixed-precision TFLite by ai-edge-quantizer: weights of one group of layers at a time.

The TFLite converter quantizes every weight one way; ai-edge-quantizer (AEQ) takes a float
.tflite and a recipe of (op type, scope regex) -> bits, so 4-bit and 8-bit weights can be mixed
per layer group. Weights are symmetric int4/int8, one scale per output channel (or per block),
activations float and quantized per call by the kernel (dynamic range: XNNPACK's qd8 kernels
scale each row). The groups are what `tools/research/aeq_recipes.py` measures one at a time; a
variant's recipe (`AEQ_RECIPES`, named by the registry's `tflite` recipe) is a list of
(group, bits, granularity) rules, later rules overriding earlier ones.

AEQ sees the word and position tables only as EMBEDDING_LOOKUP (it leaves GATHER alone): its
float input comes from the `lookup` trace (edge_m3.modeling: `_embedding_lookup`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

FC, LOOKUP = "FULLY_CONNECTED", "EMBEDDING_LOOKUP"
CHANNELWISE = "CHANNELWISE"  # or BLOCKWISE_32/64/128/256: one scale per block of inputs


def _layer(name: str) -> str:
    # Op scopes are output tensor names, e.g. `bge_m3_1/layer_3_1/ffn_in_1/Tensordot`.
    return rf"/{name}(_\d+)?/"


# group -> (op type, scope regex). FULLY_CONNECTED groups by Keras layer name; EMBEDDING_LOOKUP
# ops have no layer in their scope, so both tables are one group.
GROUPS: dict[str, tuple[str, str]] = {
    "embeddings": (LOOKUP, ".*"),
    "attn_q": (FC, _layer("query")),
    "attn_k": (FC, _layer("key")),
    "attn_v": (FC, _layer("value")),
    "attn_o": (FC, _layer("attn_out")),
    "ffn_in": (FC, _layer("ffn_in")),
    "ffn_out": (FC, _layer("ffn_out")),
    "heads": (FC, r"/(sparse|colbert)_linear(_\d+)?/"),
    "encoder": (FC, r"/layer_\d+(_\d+)?/"),
    "all_fc": (FC, ".*"),
}


def group(name: str, layers: int | None = None) -> tuple[str, str]:
    """A named group; `layer_<i>` (every FULLY_CONNECTED of encoder layer i; i < 0 counts
    from the last, given `layers`); `layer_<i>.<group>` (one group of that layer)."""
    if name in GROUPS:
        return GROUPS[name]
    m = re.fullmatch(r"layer_(-?\d+)(?:\.(\w+))?", name)
    if not m or (m.group(2) and m.group(2) not in _PARTS):
        raise ValueError(f"unknown layer group {name!r} (have {', '.join(GROUPS)}, "
                         f"layer_<i>, layer_<i>.<{'|'.join(_PARTS)}>)")
    index = int(m.group(1))
    if index < 0:
        if layers is None:
            raise ValueError(f"layer group {name!r} counts from the last layer: needs the depth")
        index += layers
    scope = _layer(f"layer_{index}")
    if m.group(2):
        scope = scope.rstrip("/") + _layer(_PARTS[m.group(2)])
    return FC, scope


# layer_<i>.<part> -> the Keras layer name inside TransformerBlock.
_PARTS = {"attn_q": "query", "attn_k": "key", "attn_v": "value", "attn_o": "attn_out",
          "ffn_in": "ffn_in", "ffn_out": "ffn_out"}


MIN_MAX = "min_max_uniform_quantize"  # scale = max |w| / (2^(bits-1) - 1)
HADAMARD = "DECOMPOSED_HADAMARD_ROTATION"  # weights rotated offline, activations by an inserted FC
# (group, bits, granularity[, AEQ algorithm: MIN_MAX, "MSE" or "OCTAV" clip the range])
Rule = tuple[Any, ...]


def parse_rules(text: str) -> list[Rule]:
    """`group:bits[:granularity[:algorithm]],...` (tools' command lines) -> rules."""
    rules: list[Rule] = []
    for item in text.split(","):
        parts = item.strip().split(":")
        if len(parts) < 2:
            raise ValueError(f"rule {item!r}: want group:bits[:granularity[:algorithm]]")
        group(parts[0], 0 if parts[0].startswith("layer_-") else None)
        rules.append((parts[0], int(parts[1]), *(parts[2:] or [CHANNELWISE])))
    return rules

# The registry's `tflite` recipe names that AEQ implements, chosen by tools/research/aeq_recipes.py
# on real weights (multilingual-e5-small). int4: FULLY_CONNECTED
# 4-bit in blocks of 64 (per channel loses too much: dense cosine 0.967 with everything 4-bit;
# blocks of 32 are 20% slower than int8 under XNNPACK), the tables 4-bit in blocks of 128
# (their error hardly depends on the block on the built-in texts; on real text in 24 languages
# it does, and no recipe within 0.6x of int8's file met int8's bounds), and 8-bit where 4 bits
# cost the most: the heads (the sparse head is one [H] vector, one scale) and the last five
# encoder layers. tools/research/aeq_recipes_techniques.py: tables rotated by HADAMARD first are
# what moved real text most, but no mix reached dense 0.997 and agreement 0.9 within 0.6x of
# int8's file.
AEQ_RECIPES: dict[str, list[Rule]] = {
    "aeq-int4-mixed": [("all_fc", 4, "BLOCKWISE_64"), ("embeddings", 4, "BLOCKWISE_128"),
                       ("heads", 8, CHANNELWISE),
                       *((f"layer_-{i}", 8, CHANNELWISE) for i in range(1, 6))],
}


# Full-integer recipes (static activations, calibrated): the registry's `tflite` recipe name ->
# activation bits. int16 activations with int8 weights (`EXPERIMENTAL_TFLITE_BUILTINS_
# ACTIVATIONS_INT16_WEIGHTS_INT8` kernels): the word and position tables are read by GATHER,
# whose table AEQ quantizes as an activation (int16 rows, one scale). The TF Lite converter's own
# 16x8 path fails on this graph (its MLIR quantizer gives scalar constants int8 types beside
# int16 tensors: `'tfl.sub' op failed to verify that binary op operands have same element
# type`), hence AEQ.
STATIC_RECIPES: dict[str, int] = {"aeq-static-a16w8": 16}
# Ops AEQ leaves in float in a static recipe: the L2 normalisation of the dense and ColBERT
# outputs (x / max(||x||, 1e-6): a padding row's norm is 0, and 1e-6 is 0 in int16, so LiteRT's
# integer DIV stops on a zero divisor), the three output ops, and the whole sparse head (one
# [H, 1] product a token, its slice and mask, all named `sparse_linear/` by the Keras model: in
# int16 a range calibrated on some texts clipped other texts' larger lexical weights, at 0.46 on
# e5-small with the slice alone integer). An op's scope is its output tensors' names, each
# followed by `;`.
STATIC_FLOAT_TAIL = (r"/(Square|Sum|Sqrt|Maximum)(_\d+)?\d*;$|^StatefulPartitionedCall"
                     r"|/sparse_linear(_\d+)?/")


# Each LayerNorm's statistics stay float too: the variance (SQUARED_DIFFERENCE and NEG, which
# AEQ's int16 policy has no kernel for, then MEAN), `+ epsilon` and RSQRT, one float island a
# LayerNorm, as the two ops AEQ leaves float made anyway (no more float-integer boundaries). In
# int16 they lost the long texts (tools/research/static_float_norm.py: dense min 0.99585 on
# 512-token lists of short names; 0.99823 with them float and STATIC_HEADROOM): the
# variance's range is set by the few massive activations (e5-small: 124.8, a step of 0.0038),
# while a token's variance is ~0.5, and LiteRT 2.3.0's int16 RSQRT reads inputs of a few dozen
# steps wrong: 1/sqrt(0.25) (65 steps) came out 1.52 for 2.01, right only from ~140 steps up.
STATIC_FLOAT_NORM = r"/moments/(SquaredDifference|variance)\d*;$|_norm(_\d+)?/(add|Rsqrt)\d*;$"
# Calibrated ranges widened (tensor-name pattern -> factor): 1/sqrt(variance), now float, goes
# back to int16 for the LayerNorm's products, and a text whose variance is below every
# calibration text's (a list of short names: 0.23 where the texts' least was 0.26) was clipped
# there. Twice its range costs one of int16's 15 bits.
STATIC_HEADROOM: dict[str, float] = {r"_norm(_\d+)?/Rsqrt\d*$": 2.0}


def static_recipe(activation_bits: int,
                  float_scopes: Sequence[str] = (STATIC_FLOAT_TAIL, STATIC_FLOAT_NORM)
                  ) -> list[dict[str, Any]]:
    """AEQ's JSON recipe: every op AEQ can quantize with `activation_bits` static activations
    (symmetric for 16, as LiteRT's int16 kernels need) and int8 per-channel weights, but the
    ops `float_scopes` match (the output tail and LayerNorm's statistics), which stay float."""
    from ai_edge_quantizer import qtyping, recipe_manager

    rm = recipe_manager.RecipeManager()
    rm.add_static_config(".*", qtyping.TFLOperationName.ALL_SUPPORTED, activation_bits, 8)
    for scope in float_scopes:
        rm.add_quantization_config(scope, qtyping.TFLOperationName.ALL_SUPPORTED,
                                   algorithm_key="no_quantize")
    return rm.get_quantization_recipe()


def calibration_feed(calibration: Mapping[str, Sequence[Sequence[int]]],
                     pad_id: int) -> dict[str, list[dict[str, Any]]]:
    """Per signature name, the padded `[1, L]` int32 inputs of each calibration text's ids
    (already truncated to at most L by the caller)."""
    from edge_m3.spec import ATTENTION_MASK, INPUT_IDS
    from edge_m3.tokenizer import pad_ids

    feed: dict[str, list[dict[str, Any]]] = {}
    for name, rows in calibration.items():
        length = int(name.rsplit("_", 1)[1])
        feed[name] = []
        for ids in rows:
            x, mask = pad_ids(ids, length, pad_id)
            feed[name].append({INPUT_IDS: x[None], ATTENTION_MASK: mask[None]})
    return feed


def quantize_static(src: Path, dst: Path, activation_bits: int,
                    calibration: Mapping[str, Sequence[Sequence[int]]], pad_id: int,
                    float_scopes: Sequence[str] = (STATIC_FLOAT_TAIL, STATIC_FLOAT_NORM),
                    headroom: Mapping[str, float] = STATIC_HEADROOM) -> None:
    """Calibrate the float .tflite `src` on the given token ids (per signature), then quantize
    it statically into `dst`: the ops `float_scopes` match stay float, the ranges of the
    tensors `headroom`'s patterns match are widened by its factors (tools/research/static_float_norm.py
    passes others); with 16-bit activations the biases are then stored int32 (`int32_biases`:
    the same values, and LiteRT's optimized 16x8 kernel instead of its reference one)."""
    from ai_edge_quantizer import quantizer

    q = quantizer.Quantizer(str(src))
    q.load_quantization_recipe(static_recipe(activation_bits, float_scopes))
    ranges = shared_ranges(src, q.calibrate(calibration_feed(calibration, pad_id), num_threads=1))
    for pattern, factor in headroom.items():
        ranges = {k: {**v, "min": v["min"] * factor, "max": v["max"] * factor}
                  if "min" in v and "max" in v and re.search(pattern, k) else v
                  for k, v in ranges.items()}
    q.quantize(ranges).export_model(str(dst), overwrite=True)
    if activation_bits == 16:
        int32_biases(dst)


def shared_ranges(src: Path, ranges: dict[str, Any]) -> dict[str, Any]:
    """Every signature's activation ranges widened to the union over all signatures.

    AEQ calibrates each signature on the texts fed to it, so each length got its own scales: a
    length few calibration texts fit had narrow ranges (lexical weights clipped at 0.25 in one),
    and queries and passages run at different lengths were rounded differently. The
    signatures are one graph traced per length: the same tensors in the same order, so tensor k
    of one subgraph is tensor k of every other; when that holds (same count, same shapes but
    the sequence axis), each tensor gets the smallest min and the largest max of its copies."""
    import numpy as np
    from ai_edge_litert import schema_py_generated as schema

    model = schema.Model.GetRootAsModel(_mapped(src), 0)
    graphs = [model.Subgraphs(g) for g in range(model.SubgraphsLength())]
    names = [[(t.Name() or b"").decode() for t in (g.Tensors(i) for i in range(g.TensorsLength()))]
             for g in graphs]
    ranks = [[g.Tensors(i).ShapeLength() for i in range(g.TensorsLength())] for g in graphs]
    if len({len(n) for n in names}) != 1 or len({tuple(r) for r in ranks}) != 1:
        return ranges
    out = dict(ranges)
    for k in range(len(names[0])):
        copies = [ranges.get(n[k]) for n in names]
        if not all(c and "min" in c and "max" in c for c in copies):
            continue
        if len({np.shape(c["min"]) for c in copies}) != 1:
            continue
        lo = np.minimum.reduce([np.asarray(c["min"]) for c in copies])
        hi = np.maximum.reduce([np.asarray(c["max"]) for c in copies])
        for n in names:
            out[n[k]] = {**ranges[n[k]], "min": lo, "max": hi}
    return out


def float_ops(path: Path) -> dict[str, int]:
    """Ops of the file that compute in float (a float32 output), by type, counted over every
    signature (QUANTIZE's float input and DEQUANTIZE's float output are the boundaries: not
    counted): what a full-integer file keeps in float."""
    from ai_edge_litert import schema_py_generated as schema

    out: dict[str, int] = {}
    for graph, op, name in _ops(path):
        if name == "DEQUANTIZE" or op.OutputsLength() == 0:
            continue
        if graph.Tensors(op.Outputs(0)).Type() == schema.TensorType.FLOAT32:
            out[name] = out.get(name, 0) + 1
    return dict(sorted(out.items()))


def check_blocks(rules: Sequence[Rule], hidden: int, intermediate: int) -> str | None:
    """Why `rules` cannot apply to a model of these widths (a block must divide every input
    width it cuts: hidden for the tables and most layers, intermediate for FFN out), or None."""
    for name, _bits, granularity, *_ in rules:
        m = re.fullmatch(r"BLOCKWISE_(\d+)", str(granularity))
        if not m:
            continue
        block = int(m.group(1))
        widths = [hidden] if group(name, 0)[0] == LOOKUP else [hidden, intermediate]
        bad = [w for w in widths if w % block]
        if bad:
            return f"{name} is quantized in blocks of {block}, which do not divide width {bad[0]}"
    return None


def aeq_recipe(rules: Sequence[Rule], layers: int | None = None) -> list[dict[str, Any]]:
    """AEQ's JSON recipe for the rules: dynamic range, symmetric integer weights."""
    out = []
    for name, bits, granularity, *algorithm in rules:
        op, regex = group(name, layers)
        out.append({
            "regex": regex, "operation": op, "algorithm_key": algorithm[0] if algorithm else MIN_MAX,
            "op_config": {
                "weight_tensor_config": {"num_bits": int(bits), "symmetric": True,
                                         "granularity": granularity, "dtype": "INT"},
                "compute_precision": "INTEGER", "explicit_dequantize": False,
                "skip_checks": False, "min_weight_elements": 0}})
    return out


def encoder_layers(path: Path) -> int:
    """How many encoder layers the float .tflite has (from its FULLY_CONNECTED scopes)."""
    from ai_edge_litert import schema_py_generated as schema

    graph = schema.Model.GetRootAsModel(_mapped(path), 0).Subgraphs(0)
    found = {int(m.group(1)) for i in range(graph.TensorsLength())
             for m in [re.search(rb"/layer_(\d+)(_\d+)?/", graph.Tensors(i).Name() or b"")] if m}
    return max(found) + 1 if found else 0


def numpy_compat() -> None:
    """AEQ 0.10.0's Hadamard rotation and OCTAV are written for numpy 2 (`reshape(copy=False)`,
    `np.bool`); the locked numpy is 1.26. Same arithmetic, spelled for both."""
    import numpy as np
    from ai_edge_quantizer.algorithms.uniform_quantize import hadamard_rotation as hr

    if "bool" not in np.__dict__:
        np.bool = np.bool_  # type: ignore[attr-defined]
    if getattr(hr._rotate_with_diagonal_hadamard, "numpy_compat", False):
        return
    real = hr._rotate_with_diagonal_hadamard

    def rotate(tensor: Any, axis: int, max_size: int | None = None) -> Any:
        if axis != tensor.ndim - 1:
            return real(tensor, axis, max_size)  # AEQ's own error
        n = int(np.gcd(tensor.shape[axis], 2**30))  # the largest power of 2 dividing the width
        if max_size:
            n = min(n, 1 << (max_size.bit_length() - 1))
        w = np.matmul(tensor.reshape((-1, n)), hr._make_hadamard_matrix(n))
        return w.reshape(tensor.shape), n, np.ones(n, dtype=np.int8)

    rotate.numpy_compat = True  # type: ignore[attr-defined]
    hr._rotate_with_diagonal_hadamard = rotate


def quantize(src: Path, dst: Path, rules: Sequence[Rule], calibration: Any = None) -> None:
    """Quantize the float .tflite `src` by `rules` into `dst` (AEQ writes buffers after the
    FlatBuffer, so files past 2 GB work both ways); `calibration`: AEQ's calibration data
    (signature -> inputs), for rules whose algorithm needs it (GPTQ)."""
    from ai_edge_quantizer import quantizer

    numpy_compat()
    layers = encoder_layers(src) if any(str(r[0]).startswith("layer_-") for r in rules) else None
    q = quantizer.Quantizer(str(src))
    q.load_quantization_recipe(aeq_recipe(rules, layers))
    result = None if calibration is None else q.calibrate(calibration, num_threads=1)
    q.quantize(result).export_model(str(dst), overwrite=True)


def weight_bits(path: Path) -> dict[str, dict[str, int]]:
    """Per op type, how many weight tensors each type holds (`INT4`, `INT8`, `FLOAT32`):
    what the build records, and how it checks that every rule matched what it meant to."""
    from ai_edge_litert import schema_py_generated as schema

    names = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    out: dict[str, dict[str, int]] = {}
    seen: set[tuple[str, int]] = set()
    for graph, op, name in _ops(path):
        if name not in (FC, LOOKUP):
            continue
        w = graph.Tensors(op.Inputs(1))
        if (name, w.Buffer()) in seen:  # signatures share weights: count each once
            continue
        seen.add((name, w.Buffer()))
        kind = names.get(w.Type(), str(w.Type()))
        out.setdefault(name, {})
        out[name][kind] = out[name].get(kind, 0) + 1
    return out


def _ops(path: Path) -> Iterator[tuple[Any, Any, str]]:
    """Every op of every subgraph (signature) of the .tflite file: (graph, op, builtin name)."""
    from ai_edge_litert import schema_py_generated as schema

    return _model_ops(schema.Model.GetRootAsModel(_mapped(path), 0))


def _model_ops(model: Any) -> Iterator[tuple[Any, Any, str]]:
    """`_ops` of a model already read (a writable map's, for `int32_biases`)."""
    from ai_edge_litert import schema_py_generated as schema

    ops = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    for g in range(model.SubgraphsLength()):
        graph = model.Subgraphs(g)
        for k in range(graph.OperatorsLength()):
            op = graph.Operators(k)
            code = model.OperatorCodes(op.OpcodeIndex())
            yield graph, op, ops.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), "?")


def _mapped(path: Path) -> Any:
    import mmap

    with open(path, "rb") as fh:
        return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


# Slots of the scalar fields `int32_biases` rewrites in place (the TF Lite schema's vtables).
TENSOR_TYPE_SLOT, BUFFER_SIZE_SLOT = 6, 8


def int32_biases(path: Path) -> int:
    """Store every int16-input FULLY_CONNECTED's int64 bias as int32, in place.

    AEQ quantizes those biases to 32 bits and only then saves them as int64 ("safe to cast
    back to int32"), and an int64 bias sends LiteRT to its reference 16x8 kernel (int64
    accumulators, one multiply at a time) where an int32 one takes ruy's optimized kernel
    (tflite/kernels/fully_connected.cc). Each bias buffer's values are rewritten as int32 at
    the start of their bytes and its size halved; only after every value and every reader of
    every such buffer is checked (int32 range; read by int16-input FULLY_CONNECTED ops alone).
    Returns how many buffers were rewritten."""
    import mmap

    import numpy as np
    from ai_edge_litert import schema_py_generated as schema

    types = schema.TensorType
    with open(path, "r+b") as fh, mmap.mmap(fh.fileno(), 0) as buf:
        model = schema.Model.GetRootAsModel(buf, 0)
        biases: dict[int, list[Any]] = {}  # buffer -> its int64 bias tensors
        others: set[int] = set()  # buffers an int64 tensor outside that role reads
        for graph, op, name in _model_ops(model):
            for pos in range(op.InputsLength()):
                i = op.Inputs(pos)
                t = graph.Tensors(i) if i >= 0 else None
                if t is None or t.Type() != types.INT64:
                    continue
                if (name == "FULLY_CONNECTED" and pos == 2
                        and graph.Tensors(op.Inputs(0)).Type() == types.INT16):
                    biases.setdefault(t.Buffer(), []).append(t)
                else:
                    others.add(t.Buffer())
        if others & set(biases):
            raise ValueError("an int64 bias buffer is read by another op: not rewritten")
        planned = []
        for index, tensors in biases.items():
            b = model.Buffers(index)
            if b.Offset() > 1:  # the bytes after the FlatBuffer (AEQ writes them so)
                start, size = b.Offset(), b.Size()
                size_pos = b._tab.Pos + b._tab.Offset(BUFFER_SIZE_SLOT)
            else:  # inline: the vector's bytes, and its length word before them
                start, size = b._tab.Vector(b._tab.Offset(4)), b.DataLength()
                size_pos = start - 4
            if (size % 8 or any(not t._tab.Offset(TENSOR_TYPE_SLOT) for t in tensors)
                    or (b.Offset() > 1 and not b._tab.Offset(BUFFER_SIZE_SLOT))):
                raise ValueError(f"bias buffer {index} is not laid out as expected: not rewritten")
            values = np.frombuffer(buf, np.int64, size // 8, start)
            if values.size and (values.min() < -2**31 or values.max() >= 2**31):
                raise ValueError(f"a bias of buffer {index} does not fit int32: not rewritten")
            planned.append((start, size, size_pos, b.Offset() > 1, values.astype("<i4"), tensors))
        for start, size, size_pos, outside, values, tensors in planned:
            buf[start:start + size] = values.tobytes() + bytes(size - 4 * values.size)
            width = 8 if outside else 4
            buf[size_pos:size_pos + width] = (size // 2).to_bytes(width, "little")
            for t in tensors:
                pos = t._tab.Pos + t._tab.Offset(TENSOR_TYPE_SLOT)
                buf[pos:pos + 1] = bytes([types.INT32])
        buf.flush()
    return len(planned)

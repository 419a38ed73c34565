"""STATIC_FLOAT_NORM and STATIC_HEADROOM (edge_m3/export/aeq.py): where int16x8 loses its worst
texts, and what wins them back (issue 36, item 3).

The int16x8 recipe before this tool (the bundle `ours-int16x8` of calibrated_onnx_recipes's work folder)
kept only the output tail and LayerNorm's SQUARED_DIFFERENCE and NEG float. On the whole gate part its
worst texts were 512-token lists of short names (dense 0.99585). Read tensor by tensor against the
fp32 file (LiteRT, `experimental_preserve_all_tensors`), two things lose them, both in LayerNorm:

- the variance tensor's int16 range is set by the few massive activations (e5-small: 124.8),
  while a token's variance is ~0.5 (65 to 140 steps), and LiteRT's int16 RSQRT reads such small
  inputs wrong (1/sqrt(0.25) as 1.52 for 2.01: -25%);
- 1/sqrt(variance) of a text whose variance is below every calibration text's is clipped by
  its calibrated range (0.23 where the calibration texts' least was 0.26).

The recipe now keeps LayerNorm's statistics float (`edge_m3.export.aeq.STATIC_FLOAT_NORM`:
the variance, `+ epsilon`, RSQRT: the float island each LayerNorm had, grown, not a new one)
and gives 1/sqrt(variance) twice its calibrated range (`STATIC_HEADROOM`). This tool builds
variants of the int16x8 file from the checkpoint (the build's own steps: trace, float file,
calibrate, quantize) and runs them:

- `--float-ops REGEX`: ops kept float besides the output tail (default the recipe's;
  `''`: the recipe before); `--headroom K --headroom-on REGEX`: those tensors' calibrated
  ranges times K (default the recipe's; `--headroom 1`: none);
- `--norm split:A`: every LayerNorm's variance as mean(c^2) + mean((x_c - c)(x_c + c)),
  c = clip(x_c, -A, A), x_c = x - mean(x) (equal in exact arithmetic; an attempt to keep it
  integer: it lost, as the tail of the calibrated range of mean(c^2) clipped long lists).

    python -m tools.research.static_float_norm --checkpoint /work/peer-run/e5ckpt --work /work/peer-run \\
        [--float-ops REGEX] [--headroom K] [--norm split:8] (--screen 40 | --whole)

It calibrates on calibrated_onnx_recipes's slice (`calibration-slice-200-36.jsonl`, as `ours-int16x8` was;
`--float-ops '' --headroom 1` rebuilds that file's outputs to the last digit) and judges on the
gate part: `--screen N` runs the 20 worst texts of `ours-int16x8` plus sample(gate part, N,
seed 0) and prints both files' dense cosines; `--whole` prints calibrated_onnx_recipes's figures of both on
the whole gate part (1,946 texts, ~50 CPU-minutes each file); `--probe N` runs only the variant,
on the query behind the ColBERT maximum (PROBE) and sample(gate part, N, seed 0), and prints that
query's ColBERT vectors' cosines to FlagEmbedding's (about a minute: the bisection of
int16x8's ColBERT maximum, docs/benchmarks.md, "Fidelity by variant and family", used it with
`--float-ops "NORM|SCOPE"`).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

SEQ_LENS = (16, 32, 64, 128, 256, 512)  # the shipped int16x8 research bundle's
# The gate part's ColBERT maximum (0.121, the recipe's file): every one of its 25 largest pair
# errors is this 6-token query's, through its `</s>` vector (`--probe`).
PROBE = "سانداوه‌ای"


def split_layer_norm(clip: float) -> None:
    """Keras's LayerNormalization with the variance split at `clip` (module docstring)."""
    import keras
    import tensorflow as tf

    def call(self: Any, x: Any) -> Any:
        mean = tf.reduce_mean(x, axis=-1, keepdims=True)
        xc = x - mean
        c = tf.clip_by_value(xc, -clip, clip)
        var = (tf.reduce_mean(c * c, axis=-1, keepdims=True)
               + tf.reduce_mean((xc - c) * (xc + c), axis=-1, keepdims=True))
        y = xc * tf.math.rsqrt(var + self.epsilon)
        if self.scale:
            y = y * self.gamma
        if self.center:
            y = y + self.beta
        return y

    keras.layers.LayerNormalization.call = call


def build(a: argparse.Namespace, out: Path) -> None:
    """Trace (with the chosen LayerNorm), convert to float, calibrate and quantize, bundle."""
    from edge_m3.builder.orchestrate import calibration_ids
    from edge_m3.checkpoint import load_checkpoint
    from edge_m3.export.aeq import STATIC_FLOAT_TAIL, quantize_static
    from edge_m3.export.tflite import convert_float
    from edge_m3.export.trace import trace_checkpoint
    from edge_m3.harness.fidelity import read_corpus
    from edge_m3.spec import HEADS, model_file
    from tools.research.calibrated_onnx_recipes import CALIBRATION, CALIBRATION_SEED, bundle_with, slice_path

    if a.norm.startswith("split:"):
        split_layer_norm(float(a.norm.split(":", 1)[1]))
    texts = [r["text"] for r in read_corpus(slice_path(a.work, CALIBRATION, CALIBRATION_SEED)).records]
    calib = calibration_ids(load_checkpoint(a.checkpoint), None, texts, SEQ_LENS)
    with tempfile.TemporaryDirectory(prefix="int16-norm-", dir=a.work) as tmp:
        saved, flt = Path(tmp) / "saved", Path(tmp) / "float.tflite"
        trace_checkpoint(a.checkpoint, SEQ_LENS, HEADS, saved)
        convert_float(saved, SEQ_LENS, flt)
        made = Path(tmp) / "made.tflite"
        scopes = [STATIC_FLOAT_TAIL] + ([a.float_ops] if a.float_ops else [])
        headroom = {a.headroom_on: a.headroom} if a.headroom != 1.0 else {}
        quantize_static(flt, made, a.activation_bits, calib.ids, calib.pad_id, scopes, headroom)
        bundle_with(a.work / "ours-int16x8", model_file("int16x8", "tflite"), made, out)


def main(argv: Sequence[str] | None = None) -> int:
    from edge_m3.export.aeq import STATIC_FLOAT_NORM, STATIC_HEADROOM
    from edge_m3.harness.fidelity import default_corpus

    ((on, factor),) = STATIC_HEADROOM.items()

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True, help="calibrated_onnx_recipes's work folder (reused)")
    p.add_argument("--texts", type=Path, default=default_corpus())
    p.add_argument("--norm", default="keras", help="keras (the shipped graph) or split:A")
    p.add_argument("--float-ops", default=STATIC_FLOAT_NORM, metavar="REGEX",
                   help="ops kept float besides the output tail (default: the recipe's "
                        "STATIC_FLOAT_NORM; '' for the recipe before it)")
    p.add_argument("--headroom", type=float, default=factor,
                   help="calibrated ranges times this (1: none, the recipe before)")
    p.add_argument("--headroom-on", default=on, metavar="REGEX",
                   help="of these tensors ('' for every one)")
    p.add_argument("--activation-bits", type=int, choices=(16, 8), default=16,
                   help="8: the same recipe with 8-bit static activations (item 3's 'else int8')")
    p.add_argument("--screen", type=int, default=0, metavar="N")
    p.add_argument("--probe", type=int, default=0, metavar="N",
                   help="the ColBERT-maximum query (PROBE) and sample(gate part, N, seed 0), "
                        "without the earlier file's outputs: per-token ColBERT cosines")
    p.add_argument("--whole", action="store_true")
    a = p.parse_args(argv)

    from edge_m3.harness.fidelity import read_corpus
    from edge_m3.harness.metrics import cosine
    from edge_m3.harness.verify import formula_pairs
    from edge_m3.spec import model_file
    from tools.research.calibrated_onnx_recipes import (
        CALIBRATION,
        CALIBRATION_SEED,
        HEAD,
        figures,
        flag_reference,
        gate_sample,
        our_outputs,
        row,
        split_corpus,
    )

    spec = f"{a.norm}|{a.float_ops}|{a.headroom:g}|{a.headroom_on}" + (
        f"|a{a.activation_bits}" if a.activation_bits != 16 else "")
    key = hashlib.sha256(spec.encode()).hexdigest()[:8]
    out = a.work / f"ours-int16x8-norm-{key}"
    if not (out / "manifest.json").is_file():
        build(a, out)
    print(f"# {out.name}: --norm {a.norm} --float-ops {a.float_ops!r} --headroom {a.headroom:g} "
          f"--headroom-on {a.headroom_on!r} --activation-bits {a.activation_bits}",
          flush=True)
    corpus = read_corpus(a.texts)
    records = [*corpus.queries, *corpus.passages]
    texts = [r["text"] for r in records]
    nq = len(corpus.queries)
    sets = {"user": [], "queries": list(range(nq)), "passages": list(range(nq, len(texts)))}
    ref = flag_reference(a.checkpoint, texts, 512, formula_pairs(sets))
    _, gate = split_corpus(corpus, CALIBRATION, CALIBRATION_SEED)
    name = model_file("int16x8", "tflite")
    if a.probe:
        pick = [texts.index(PROBE), *gate_sample(corpus, gate, a.probe)]
        outs = our_outputs(out, "litert", [texts[i] for i in pick], a.work, f"{out.name}-probe{a.probe}")
        col = [[cosine(x, y) for x, y in zip(o["colbert_vecs"], ref[i]["colbert_vecs"], strict=True)]
               for o, i in zip(outs, pick, strict=True)]
        dense = [cosine(o["dense_vecs"], ref[i]["dense_vecs"]) for o, i in zip(outs, pick, strict=True)]
        print(f"{PROBE!r}'s ColBERT vectors (ids {list(map(int, ref[pick[0]]['input_ids']))}, the last "
              f"`</s>`'s), cosine to FlagEmbedding's: {' '.join(f'{c:.3f}' for c in col[0])}")
        print(f"{len(pick)} texts: dense min {min(dense):.5f}, mean {np.mean(dense):.5f}; ColBERT vector "
              f"cosine min {min(min(c) for c in col):.4f}; file {(out / name).stat().st_size / 1e6:.1f} MB")
    if not (a.screen or a.whole):
        return 0
    base = our_outputs(a.work / "ours-int16x8", "litert", [texts[i] for i in gate], a.work, "ours-int16x8")

    if a.screen:
        base_cos = [cosine(o["dense_vecs"], ref[i]["dense_vecs"]) for o, i in zip(base, gate, strict=True)]
        worst = sorted(range(len(gate)), key=lambda k: base_cos[k])[:20]
        keep = set(gate_sample(corpus, gate, a.screen))
        pick = sorted(set(worst) | {k for k, i in enumerate(gate) if i in keep})
        outs = our_outputs(out, "litert", [texts[gate[k]] for k in pick], a.work,
                           f"{out.name}-screen{a.screen}")
        new = [cosine(o["dense_vecs"], ref[gate[k]]["dense_vecs"]) for o, k in zip(outs, pick, strict=True)]
        print("| text | tokens | the recipe before (ours-int16x8) | this variant |\n| --- | --- | --- | --- |")
        for k, c in sorted(zip(pick, new, strict=True), key=lambda kc: base_cos[kc[0]])[:25]:
            i = gate[k]
            print(f"| {records[i]['lang']} {records[i]['kind']} {texts[i][:30]!r} | "
                  f"{len(ref[i]['input_ids'])} | {base_cos[k]:.5f} | {c:.5f} |")
        b = [base_cos[k] for k in pick]
        print(f"\n{len(pick)} texts: dense min {min(b):.5f} -> {min(new):.5f}, "
              f"mean {np.mean(b):.5f} -> {np.mean(new):.5f}")
    if a.whole:
        outs = our_outputs(out, "litert", [texts[i] for i in gate], a.work, out.name)
        gq = [i for i in gate if i < nq]
        gate_corpus = type(corpus)(tuple(records[i] for i in gate))
        sub = [ref[i] for i in gate]
        print(f"## gate part: {len(gate)} texts\n\n{HEAD}")
        before = ("the recipe before (ours-int16x8)", a.work / "ours-int16x8", base)
        for label, b, o in (before, (out.name, out, outs)):
            f = figures(o, sub, len(gq), gate_corpus.relevant(), "int16x8")
            print(row(label, (b / name).stat().st_size / 1e6, f), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

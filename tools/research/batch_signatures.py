"""Would batch signatures (`[B, L]`) pay for bulk embedding? A measurement, not a bundle format.

    python -m tools.research.batch_signatures CKPT [--shapes 1x16,4x16,8x16,1x64,2x64,4x64,1x128,2x128]
        [--quant int8] [--repeats 30] [--work DIR]

Traces the checkpoint's Keras model (edge_m3.modeling, as the builder does) with one endpoint
per shape `BxL`, converts them into one .tflite with the variant's converter recipe
(edge_m3.export.tflite: the same settings as `edge-m3 build`), then times every signature under
LiteRT, one thread, interleaved rounds, and prints the median milliseconds per call and
microseconds per token (B x L): batching pays where a `B x L` call costs fewer us per token
than a `1 x L` call. The bundles that ship trace batch 1 only (issue 27, docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path


def _shapes(spec: str) -> list[tuple[int, int]]:
    out = []
    for part in spec.split(","):
        b, _, length = part.partition("x")
        out.append((int(b), int(length)))
    return out


def _name(b: int, length: int) -> str:
    return f"embed_b{b}_{length}"


def build(ckpt: Path, shapes: Sequence[tuple[int, int]], quant: str, work: Path) -> Path:
    """One .tflite with a signature per shape, converted like the builder's variant."""
    import keras
    import tensorflow as tf

    from edge_m3.checkpoint import load_checkpoint
    from edge_m3.contract import ATTENTION_MASK, HEADS, INPUT_IDS, RECIPES
    from edge_m3.export.tflite import CONVERTER_RECIPES
    from edge_m3.modeling import build_model, position_rows, trimmed_checkpoint

    c = load_checkpoint(ckpt)
    c = trimmed_checkpoint(c, None, position_rows(c.config, sorted({n for _, n in shapes})))
    model = build_model(c)
    archive = keras.export.ExportArchive()
    for b, length in shapes:
        archive.add_endpoint(
            name=_name(b, length),
            fn=lambda input_ids, attention_mask: model(input_ids, attention_mask, heads=HEADS,
                                                       hidden=False, lookup=False),
            input_signature=[tf.TensorSpec([b, length], tf.int32, name=INPUT_IDS),
                             tf.TensorSpec([b, length], tf.int32, name=ATTENTION_MASK)])
    saved = work / "saved"
    archive.write_out(str(saved), verbose=False)
    conv = tf.lite.TFLiteConverter.from_saved_model(str(saved), signature_keys=[_name(*s) for s in shapes])
    steps = CONVERTER_RECIPES[RECIPES[quant].tflite.name]
    steps.configure(conv)
    out = work / f"batch_{quant}.tflite"
    out.write_bytes(steps.rewrite(conv.convert()))
    if steps.patch is not None:
        steps.patch(out)
    return out


def time_signatures(path: Path, shapes: Sequence[tuple[int, int]], repeats: int) -> dict[str, float]:
    """Median ms per call of each signature, rounds interleaved (one thread, LiteRT)."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=str(path), num_threads=1)
    runners = {s: interp.get_signature_runner(_name(*s)) for s in shapes}
    rng = np.random.default_rng(0)
    feeds = {s: {"input_ids": rng.integers(5, 1000, s, dtype=np.int32),
                 "attention_mask": np.ones(s, np.int32)} for s in shapes}
    for s in shapes:  # warm-up
        runners[s](**feeds[s])
    times: dict[tuple[int, int], list[float]] = {s: [] for s in shapes}
    for _ in range(repeats):
        for s in shapes:
            t = time.perf_counter()
            runners[s](**feeds[s])
            times[s].append(time.perf_counter() - t)
    return {_name(*s): 1e3 * statistics.median(v) for s, v in times.items()}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", type=Path)
    p.add_argument("--shapes", default="1x16,4x16,8x16,1x64,2x64,4x64,1x128,2x128")
    p.add_argument("--quant", default="int8")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--work", type=Path, default=None)
    a = p.parse_args(argv)
    shapes = _shapes(a.shapes)
    with tempfile.TemporaryDirectory(prefix="edge-m3-batch-") as tmp:
        work = a.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        path = build(a.checkpoint, shapes, a.quant, work)
        ms = time_signatures(path, shapes, a.repeats)
    base = {n: ms[_name(1, n)] / n for b, n in shapes if b == 1}
    print(f"| signature | ms a call | us a token | x batch 1 per token ({a.quant}, LiteRT, 1 thread) |")
    print("| --- | --- | --- | --- |")
    for b, n in shapes:
        per_token = ms[_name(b, n)] / (b * n)
        ratio = f"{per_token / base[n]:.2f}" if n in base else "-"
        print(f"| {b} x {n} | {ms[_name(b, n)]:.2f} | {1e3 * per_token:.0f} | {ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

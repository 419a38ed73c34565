"""Keras BGE-M3 -> one SavedModel whose endpoints are the fixed-length signatures.

Both exporters start from this one trace: TFLite converts the fixed-length endpoints (weights
written once, every subgraph pointing at the same buffers); ONNX converts `embed_dynamic`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edge_m3.spec import ATTENTION_MASK, DYNAMIC_SIGNATURE, INPUT_IDS, signature_name


def write_saved_model(model: Any, seq_lens: Sequence[int], heads: Sequence[str],
                      out_dir: Path, dynamic: bool = False, lookup: bool = False) -> None:
    """A SavedModel with one `[1, L]` int32 endpoint per length, all over the same variables.

    `dynamic` adds `embed_dynamic` (`[1, None]`) for the ONNX export, whose one file declares
    the sequence axis symbolically instead of repeating the weights per length. `lookup`
    spells the embedding tables as EMBEDDING_LOOKUP (for ai-edge-quantizer's recipes).
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
                                                       hidden=False, lookup=lookup),
            input_signature=[tf.TensorSpec([1, length], tf.int32, name=INPUT_IDS),
                             tf.TensorSpec([1, length], tf.int32, name=ATTENTION_MASK)],
        )
    archive.write_out(str(out_dir), verbose=False)



def trace_checkpoint(checkpoint_dir: Path, seq_lens: Sequence[int], heads: Sequence[str],
                     saved_dir: Path | None, dynamic: bool = False,
                     kept_ids: Sequence[int] | None = None,
                     lookup_dir: Path | None = None) -> tuple[int, list[int] | None]:
    """Checkpoint -> Keras -> SavedModel; returns the parameter count and the kept ids.

    `kept_ids` (vocabulary trimming) keeps only those rows of the word-embedding table; the
    position table keeps the rows the lengths reach. `lookup_dir` also writes the fixed
    lengths with EMBEDDING_LOOKUP tables there (same weights, one model built): what the
    ai-edge-quantizer recipes start from.
    """
    from edge_m3.checkpoint import load_checkpoint
    from edge_m3.modeling import build_model, position_rows, trimmed_checkpoint

    ckpt = load_checkpoint(checkpoint_dir)
    if kept_ids is not None:
        kept_ids = keep_extreme_row(ckpt.tensors, kept_ids)
    # Position rows past the longest signature are never read: 8,194 -> 514 rows for BGE-M3
    # at 512 tokens (7.7M parameters: 7.9 MB of int8, 4 MB of int4).
    ckpt = trimmed_checkpoint(ckpt, kept_ids, position_rows(ckpt.config, seq_lens))
    model = build_model(ckpt)
    if saved_dir is not None:
        write_saved_model(model, seq_lens, heads, saved_dir, dynamic=dynamic)
    if lookup_dir is not None:
        write_saved_model(model, seq_lens, heads, lookup_dir, lookup=True)
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

"""Per-text outputs as flat arrays plus offsets: what a chunk's columns are, in the bulk job and
on the pipe from a lane process (edge_m3.bulk.engine, edge_m3.bulk.lanes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge_m3.spec import COLBERT_VECS, DENSE_VECS, LEXICAL_WEIGHTS


@dataclass(frozen=True)
class Ragged:
    """One variable-length value per text: text i is `values[offsets[i]:offsets[i + 1]]`."""

    values: np.ndarray
    offsets: np.ndarray  # int64, len(texts) + 1

    @staticmethod
    def of(parts: Sequence[np.ndarray], dtype: Any, width: int | None = None) -> Ragged:
        offsets = np.zeros(len(parts) + 1, np.int64)
        np.cumsum([len(p) for p in parts], out=offsets[1:])
        shape = (0,) if width is None else (0, width)
        values = np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(shape, dtype)
        return Ragged(values, offsets)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i]:self.offsets[i + 1]]


def result_columns(results: Sequence[dict[str, Any]], heads: Sequence[str],
                   hidden: int) -> dict[str, np.ndarray]:
    """Per-text named outputs (FlagEmbedding's) -> flat arrays and offsets, for the heads asked:
    what a chunk's `Embedded` holds and what a lane process sends back."""
    cols: dict[str, np.ndarray] = {}
    if "dense" in heads:
        cols["dense"] = (np.stack([r[DENSE_VECS] for r in results]).astype(np.float32, copy=False)
                         if results else np.zeros((0, hidden), np.float32))
    if "sparse" in heads:
        lex = [r[LEXICAL_WEIGHTS] for r in results]
        ids = Ragged.of([np.fromiter(map(int, d), np.int32, len(d)) for d in lex], np.int32)
        cols["lex_ids"], cols["lex_offsets"] = ids.values, ids.offsets
        cols["lex_weights"] = np.fromiter((w for d in lex for w in d.values()), np.float32,
                                          int(ids.offsets[-1]))
    if "colbert" in heads:
        vecs = Ragged.of([r[COLBERT_VECS] for r in results], np.float32, hidden)
        cols["colbert"], cols["colbert_offsets"] = vecs.values, vecs.offsets
    return cols

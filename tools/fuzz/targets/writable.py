"""A writable index's database (index.sqlite alone: retrieval.writable.WritableIndex.open, its
quick_check, meta and the passages' blobs; the kits' `writable` inputs), then every search mode
its stores support, per passage and per chunk: answers inside the index, a passage once."""

from __future__ import annotations

import numpy as np

from edge_m3.contract import COLBERT_VECS, DENSE_VECS, INDEX_DB, LEXICAL_WEIGHTS, SCORE_MODES, mode_signals
from edge_m3.retrieval.writable import WritableIndex
from tools.fuzz.harness import write_folder


def run(data: bytes) -> None:
    idx = WritableIndex.open(write_folder({INDEX_DB: data}))
    try:
        n, rows, d = len(idx), idx.rows, idx.dim
        query = {DENSE_VECS: np.full(d, d ** -0.5, np.float32),
                 LEXICAL_WEIGHTS: {"5": 0.5, "6": 0.5, "9": 0.5, "7": 0.25},
                 COLBERT_VECS: np.full((2, d), d ** -0.5, np.float32)}
        for mode in SCORE_MODES:
            if "colbert" in mode_signals(mode) and not idx.has_colbert:
                continue
            for chunks in (False, True):
                hits = idx.search(query, 3, mode, chunks=chunks)
                assert len(hits) <= min(3, rows if chunks else n), (mode, chunks, hits)
                assert all(0 <= h.row < rows for h in hits), (mode, chunks, hits)
                assert chunks or len({h.id for h in hits}) == len(hits), (mode, hits)
    finally:
        idx.close()

"""A writable index's database (index.sqlite alone: retrieval.writable.WritableIndex.open, its
quick_check, meta and the passages' blobs; the kits' `writable` inputs), then every search mode
its stores support, per passage and per chunk: answers inside the index, a passage once."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edge_m3.retrieval.writable import WritableIndex
from edge_m3.spec import COLBERT_VECS, DENSE_VECS, INDEX_DB, LEXICAL_WEIGHTS, SCORE_MODES, mode_signals
from tools.fuzz.harness import id_text, score_bits, write_folder


def answers(data: bytes, fill: Callable[[int], float], every: bool = False) -> str:
    """The passage and row counts, the width, then every search mode per passage and per chunk,
    each checked: "MODE[/chunks] row:id:chunk:scorebits ..." joined by ";" (the differential's
    form, as KitFuzz.kt and the Swift harness's `writableAnswers` write it). The query's vectors
    are `fill(dim)` everywhere. The top 3, or with `every` (the differential) k = the row count:
    every passage and every chunk, each with its score, in the answer."""
    idx = WritableIndex.open(write_folder({INDEX_DB: data}))
    try:
        n, rows, d = len(idx), idx.rows, idx.dim
        query = {DENSE_VECS: np.full(d, fill(d), np.float32),
                 LEXICAL_WEIGHTS: {"5": 0.5, "6": 0.5, "9": 0.5, "7": 0.25},
                 COLBERT_VECS: np.full((2, d), fill(d), np.float32)}
        parts, k = [], max(rows, 1) if every else 3
        for mode in SCORE_MODES:
            if "colbert" in mode_signals(mode) and not idx.has_colbert:
                continue
            for chunks in (False, True):
                hits = idx.search(query, k, mode, chunks=chunks)
                assert len(hits) <= min(k, rows if chunks else n), (mode, chunks, hits)
                assert all(0 <= h.row < rows for h in hits), (mode, chunks, hits)
                assert chunks or len({h.id for h in hits}) == len(hits), (mode, hits)
                hs = [f"{h.row}:{id_text(h.id)}:{h.chunk}:{score_bits(h.score)}" for h in hits]
                parts.append(" ".join([mode + ("/chunks" if chunks else ""), *hs]))
        return f"{n} {rows} {d} " + ";".join(parts)
    finally:
        idx.close()


def run(data: bytes) -> None:
    answers(data, lambda d: d ** -0.5)

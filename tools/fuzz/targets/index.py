"""An index folder (retrieval.index.Index.load: index.json, ids.json and the raw arrays it
memory-maps), its manifest's hashes rewritten to match: then every search mode it supports
must answer without reading out of bounds."""

from __future__ import annotations

import numpy as np

from edge_m3.retrieval.index import Index
from edge_m3.spec import (
    COLBERT_VECS,
    DENSE_VECS,
    INDEX_MANIFEST,
    LEXICAL_WEIGHTS,
    SCORE_MODES,
    mode_signals,
)
from tools.fuzz.harness import rehash, unpack, write_folder


def run(data: bytes) -> None:
    files = unpack(data)
    rehash(files, INDEX_MANIFEST)
    idx = Index.load(write_folder(files))
    n, d = len(idx), idx.dim
    tokens = [int(t) for t in np.asarray(idx.arrays["sparse_tokens"][:3])]
    query = {DENSE_VECS: np.full(d, d ** -0.5, np.float32),
             LEXICAL_WEIGHTS: {str(t): 0.5 for t in tokens} | {"7": 0.25},
             COLBERT_VECS: np.full((2, d), d ** -0.5, np.float32)}
    for mode in SCORE_MODES:
        if "colbert" in mode_signals(mode) and not idx.has_colbert:
            continue
        hits = idx.search(query, 3, mode)
        assert len(hits) <= min(3, n), (mode, hits)
        assert all(0 <= h.row < n and h.id == idx.ids[h.row] for h in hits), (mode, hits)

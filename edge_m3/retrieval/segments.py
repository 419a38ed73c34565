"""The writable index's segments: its base (a format-1 Index, rows removed by tombstones) and its
delta (the passages written since, an in-memory Index), searched as one index through `Index`'s
public API (docs/index-format.md, "The writable index").

Logical rows are the base's surviving rows in order, then the delta's: exactly the rows a fresh
format-1 index of the surviving passages would have, so search returns the same hits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from edge_m3.retrieval.index import Index, postings
from edge_m3.retrieval.index_folder import BundleIdentity, PassageId
from edge_m3.retrieval.ranking import Hit, as_query, best_per_passage, hybrid_top, search_args, top_of
from edge_m3.retrieval.store import Stored
from edge_m3.spec import (
    COLBERT_VECS,
    DENSE_VECS,
    HYBRID_CANDIDATES,
    INDEX_POSTING_WEIGHTS,
    LEXICAL_WEIGHTS,
    mode_signals,
)

_PW = INDEX_POSTING_WEIGHTS
Segment = tuple[Index, np.ndarray]  # an index, and its physical rows' logical rows (-1: removed)


def stored_form(outputs: Mapping[str, Any], dim: int, dense: str, colbert: str) -> Stored:
    """A passage's pipeline outputs in stored form, quantized once, as Index.add would store them."""
    x = Index(dim, dense, colbert)
    x.add([outputs])  # the same checks and conversions as a bulk build
    x.freeze()
    return rows_of(x.arrays, dense, colbert, 1)[0]


def rows_of(a: Mapping[str, np.ndarray], dense: str, colbert: str, n: int) -> list[Stored]:
    """Every row of folder-layout arrays in stored form (for a small index: postings inverted)."""
    toks: list[list[int]] = [[] for _ in range(n)]
    ws: list[list[float]] = [[] for _ in range(n)]
    off = np.asarray(a["sparse_offsets"])
    tokens, rows, weights = np.asarray(a["sparse_tokens"]), np.asarray(a["sparse_rows"]), np.asarray(a[_PW])
    for t in range(len(tokens)):
        for p in range(int(off[t]), int(off[t + 1])):
            toks[int(rows[p])].append(int(tokens[t]))
            ws[int(rows[p])].append(float(weights[p]))
    out = []
    for r in range(n):
        col = scale = None
        if colbert != "none":
            lo, hi = int(a["colbert_offsets"][r]), int(a["colbert_offsets"][r + 1])
            col = np.array(a["colbert"][lo:hi])
            scale = np.array(a["colbert_scale"][lo:hi]) if colbert == "int8" else None
        out.append(Stored(np.array(a["dense"][r]),
                          np.array(a["dense_scale"][r:r + 1]) if dense == "int8" else None,
                          np.array(toks[r], np.int32), np.array(ws[r], np.float32), col, scale))
    return out


def _stack(parts: Sequence[np.ndarray | None], empty: np.ndarray) -> np.ndarray:
    """Rows' arrays concatenated, or `empty` for no rows."""
    return np.concatenate(parts) if parts else empty  # type: ignore[arg-type]


def arrays_of(rows: Sequence[Stored], dim: int, dense: str, colbert: str) -> dict[str, np.ndarray]:
    """Folder-layout arrays of stored passages in this order (no value is quantized again)."""
    a: dict[str, np.ndarray] = {}
    a["dense"] = (np.stack([r.dense for r in rows]) if rows
                  else np.zeros((0, dim), np.int8 if dense == "int8" else np.float32))
    if dense == "int8":
        a["dense_scale"] = _stack([r.dense_scale for r in rows], np.zeros(0, np.float32))
    tok = _stack([r.lex_tokens for r in rows], np.zeros(0, np.int64)).astype(np.int64)
    row = np.repeat(np.arange(len(rows), dtype=np.int64), [len(r.lex_tokens) for r in rows])
    w = _stack([r.lex_weights for r in rows], np.zeros(0, np.float32))
    postings(a, tok, row, w)
    if colbert != "none":
        counts = np.array([len(r.colbert) for r in rows], np.int64)  # type: ignore[arg-type]
        a["colbert_offsets"] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        dtype = np.int8 if colbert == "int8" else np.float16
        vecs = _stack([r.colbert for r in rows], np.zeros((0, dim), dtype))
        a["colbert"] = vecs.astype(dtype).reshape(-1, dim)
        if colbert == "int8":
            a["colbert_scale"] = _stack([r.colbert_scale for r in rows], np.zeros(0, np.float32))
    return a


class Segments:
    """One state of a writable index as searchable segments (kept until the next write or reload)."""

    def __init__(self, base: Index | None, removed: Sequence[int], delta: Mapping[PassageId, list[Stored]],
                 dim: int, dense: str, colbert: str, bundle: BundleIdentity | None) -> None:
        self.base, self.removed, self.delta = base, list(removed), dict(delta)
        self.dim, self.dense_store, self.colbert_store, self.bundle = dim, dense, colbert, bundle
        self.alive_rows = np.zeros(0, np.int64)  # the base's surviving rows
        self.base_chunk = np.zeros(0, np.int64)  # each base row's chunk number
        self.most = 0  # the most chunks of a surviving passage
        self.segs: list[Segment] = []
        self.alive = np.ones(len(base) if base is not None else 0, bool)
        self.alive[self.removed] = False
        if base is not None and len(base):
            self._base_segment(base)
        self.delta_rows = [(pid, c) for pid, chunks in self.delta.items() for c in range(len(chunks))]
        self.delta_index: Index | None = None
        if self.delta:
            start = len(self.alive_rows)
            self.segs.append((self.delta_idx(), start + np.arange(len(self.delta_rows))))
            self.most = max(self.most, max(len(c) for c in self.delta.values()))

    def _base_segment(self, base: Index) -> None:
        logical = np.full(len(base), -1, np.int64)
        self.alive_rows = np.nonzero(self.alive)[0]
        logical[self.alive] = np.arange(len(self.alive_rows))
        self.segs.append((base, logical))
        # a passage is removed whole, so its surviving rows are chunks 0..n-1: the largest
        # surviving chunk number + 1 is the most chunks of a surviving passage
        self.base_chunk = base.chunk_counts()[0]
        live_chunks = self.base_chunk[self.alive_rows]
        self.most = int(live_chunks.max()) + 1 if len(live_chunks) else 0

    # ------------------------------------------------------------------ the delta

    def delta_ids(self) -> list[PassageId]:
        """The delta's rows' ids, a passage's once per chunk, in seq order."""
        return [pid for pid, chunks in self.delta.items() for _ in chunks]

    def delta_arrays(self) -> dict[str, np.ndarray]:
        rows = [s for chunks in self.delta.values() for s in chunks]
        return arrays_of(rows, self.dim, self.dense_store, self.colbert_store)

    def delta_idx(self) -> Index:
        """The delta as an in-memory format-1 index (built once)."""
        if self.delta_index is None:
            self.delta_index = Index.from_arrays(self.dim, self.dense_store, self.colbert_store,
                                                 self.delta_arrays(), self.delta_ids(), self.bundle)
        return self.delta_index

    # ------------------------------------------------------------------ rows and ids

    def ids(self) -> list[PassageId]:
        """Every passage's id once, in logical row order."""
        base = [] if self.base is None else [self.base.ids[int(r)] for r in self.alive_rows
                                             if self.base_chunk[int(r)] == 0]
        return base + list(self.delta)

    def hit(self, logical: int, score: float) -> Hit:
        """A logical row's hit: its passage's id and its chunk number."""
        n_base = len(self.alive_rows)
        if logical < n_base:
            r = int(self.alive_rows[logical])
            return Hit(logical, self.base.ids[r], score, int(self.base_chunk[r]))  # type: ignore[union-attr]
        pid, chunk = self.delta_rows[logical - n_base]
        return Hit(logical, pid, score, chunk)

    # ------------------------------------------------------------------ search

    def search(self, query: Mapping[str, Any], k: int, mode: str, weights: Sequence[float] | None,
               chunks: bool) -> list[Hit]:
        """The best `k` passages, each by its best chunk (`chunks`: the best `k` rows): exactly
        what a fresh index of the surviving passages returns."""
        signals, w = search_args(k, mode, weights, self.colbert_store != "none")
        grouped = not chunks and self.most > 1
        kr = k * self.most if grouped else k
        if len(signals) == 1:
            rows, scores = self._top(query, mode, kr)
        else:
            c = max(kr, HYBRID_CANDIDATES)
            as_query(query, signals)
            # each segment's sparse scores once: its best c, then the candidates' scores
            sparse = [idx.sparse_exact(query[LEXICAL_WEIGHTS], logical < 0) for idx, logical in self.segs]
            cand = np.union1d(self._top(query, "dense", c)[0], self._sparse_top(sparse, c))
            rows, scores = self._hybrid(query, mode, cand.astype(np.int64), kr, w, [a for a, _ in sparse])
        hits = [self.hit(int(r), float(s)) for r, s in zip(rows, scores, strict=True)]
        return best_per_passage(hits, k) if grouped else hits

    def _top(self, query: Mapping[str, Any], mode: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """A single mode's best k over logical rows: each segment's best k of its live rows,
        merged by score then logical row (logical order keeps each segment's row order)."""
        rows, scores = [], []
        for idx, logical in self.segs:
            for h in idx.search(query, k, mode, exclude=logical < 0, chunks=True):
                rows.append(int(logical[h.row]))
                scores.append(h.score)
        r, s = np.array(rows, np.int64), np.array(scores, np.float64)
        order = np.lexsort((r, -s))[:k]
        return r[order], s[order]

    def _sparse_top(self, sparse: Sequence[tuple[np.ndarray, np.ndarray]], k: int) -> np.ndarray:
        """The sparse mode's best k logical rows from each segment's scores (as `_top` merges)."""
        rows, scores = [], []
        for (_, logical), (acc, touched) in zip(self.segs, sparse, strict=True):
            r, s = top_of(touched, acc[touched], k)
            rows.append(logical[r])
            scores.append(s)
        r, s = np.concatenate(rows or [np.zeros(0, np.int64)]), np.concatenate(scores or [np.zeros(0)])
        return r[np.lexsort((r, -s))[:k]]

    def _parts(self, cand: np.ndarray,
               sparse: Sequence[np.ndarray]) -> list[tuple[Index, np.ndarray, np.ndarray, np.ndarray]]:
        """Per segment: (index, positions in cand it holds, their physical rows, its sparse scores)."""
        parts = []
        for (idx, logical), acc in zip(self.segs, sparse, strict=True):
            alive = np.nonzero(logical >= 0)[0]
            at = np.searchsorted(logical[alive], cand) if len(alive) else np.zeros(len(cand), np.int64)
            hit = (at < len(alive)) & (logical[alive][np.minimum(at, max(len(alive) - 1, 0))] == cand) \
                if len(alive) else np.zeros(len(cand), bool)
            pos = np.nonzero(hit)[0]
            parts.append((idx, pos, alive[at[pos]], acc))
        return parts

    def _hybrid(self, query: Mapping[str, Any], mode: str, cand: np.ndarray, k: int,
                w: tuple[float, float, float], sparse: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The hybrid mode's best k among logical candidates (sorted), each scored by its segment
        (`sparse`: each segment's sparse scores of every row)."""
        parts = self._parts(cand, sparse)
        qd = np.asarray(query[DENSE_VECS], np.float32).astype(np.float64)
        d, s = np.zeros(len(cand)), np.zeros(len(cand))
        for idx, pos, phys, acc in parts:
            d[pos] = idx.dense_exact(qd, phys)
            s[pos] = acc[phys]
        qc = (np.asarray(query[COLBERT_VECS], np.float32).reshape(-1, self.dim).astype(np.float64)
              if "colbert" in mode_signals(mode) else None)

        def fast(sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            f, m = np.zeros(len(sel)), np.zeros(len(sel))
            for idx, pos, phys, _ in parts:
                on = np.isin(sel, pos)
                rows = phys[np.searchsorted(pos, sel[on])]
                f[on], m[on] = idx.colbert_fast(qc, rows)
            return f, m

        def exact(sel: np.ndarray) -> np.ndarray:
            out = np.zeros(len(sel))
            for idx, pos, phys, _ in parts:
                on = np.isin(sel, pos)
                out[on] = idx.colbert_exact(qc, phys[np.searchsorted(pos, sel[on])])
            return out

        sel, scores = hybrid_top(mode, d, s, qc is not None, fast, exact, k, w)
        return cand[sel], scores

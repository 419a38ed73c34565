"""Choosing a search's hits, shared by `Index` and the writable index's segments: the arguments
checked, the exact top k found from fast scores within proven error bounds, a hybrid mode's
candidates, and passages ranked by their best chunk (docs/index-format.md, "Search" and
"Passages and chunks").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge_m3.errors import EdgeM3Error, OptionError
from edge_m3.retrieval.index_folder import PassageId
from edge_m3.retrieval.scores import U64
from edge_m3.spec import COLBERT_VECS, DENSE_VECS, LEXICAL_WEIGHTS, hybrid_score, mode_signals, mode_weights


@dataclass(frozen=True)
class Hit:
    """One search result: the row in the index, its passage's id, its exact score, and which
    chunk of the passage the row is (0 for a passage of one chunk)."""

    row: int
    id: PassageId
    score: float
    chunk: int = 0


def chunk_numbers(ids: Sequence[PassageId]) -> tuple[np.ndarray, int]:
    """Each row's chunk number (rows sharing an id are one passage's chunks, in row order) and
    the most chunks of one passage (docs/index-format.md, "Passages and chunks")."""
    seen: dict[PassageId, int] = {}
    out = np.zeros(len(ids), np.int64)
    for r, pid in enumerate(ids):
        out[r] = seen[pid] = seen.get(pid, -1) + 1
    return out, (max(seen.values()) + 1 if seen else 0)


def best_per_passage(hits: Iterable[Hit], k: int) -> list[Hit]:
    """The first (best) hit of each id, the first k of them: a passage ranked by its best chunk."""
    out: list[Hit] = []
    seen: set[PassageId] = set()
    for h in hits:
        if h.id not in seen:
            seen.add(h.id)
            out.append(h)
            if len(out) == k:
                break
    return out


def search_args(k: Any, mode: str, weights: Sequence[float] | None,
                has_colbert: bool) -> tuple[tuple[str, ...], tuple[float, float, float]]:
    """A search's arguments checked (one line each): the mode's signals and the weights."""
    signals = mode_signals(mode)
    w = mode_weights(weights)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise OptionError("k", k, "must be an integer >= 1")
    if "colbert" in signals and not has_colbert:
        raise OptionError("mode", mode, "needs ColBERT vectors; this index was built without them "
                          "(colbert none)")
    return signals, w


def as_query(query: Mapping[str, Any], signals: Sequence[str]) -> dict[str, Any]:
    names = {"dense": DENSE_VECS, "sparse": LEXICAL_WEIGHTS, "colbert": COLBERT_VECS}
    missing = [names[s] for s in signals if names[s] not in query]
    if missing:
        raise EdgeM3Error(f"the query lacks {', '.join(missing)} (the bundle does not export that head)")
    return dict(query)


def top_of(rows: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best k of exact scores: score descending, row ascending."""
    order = np.lexsort((rows, -scores))[:k]
    return rows[order], scores[order]


def hybrid_top(mode: str, d: np.ndarray, s: np.ndarray, colbert: bool,
                fast: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                exact: Callable[[np.ndarray], np.ndarray], k: int,
                w: tuple[float, float, float]) -> tuple[np.ndarray, np.ndarray]:
    """A hybrid mode's best k candidates (positions, ties by position) from their exact dense and
    sparse scores; ColBERT, when the mode adds it, by `fast` (scores and error bounds) and only
    where that cannot decide by `exact`."""
    n = len(d)
    if not colbert:
        h = hybrid_score(mode, d, s, np.zeros(n), w)
        order = np.lexsort((np.arange(n), -h))[:k]
        return order, h[order]
    cf, cm = fast(np.arange(n))
    h_fast = hybrid_score(mode, d, s, cf, w)
    den = (w[0] + w[1]) + w[2]
    h_margin = (w[2] * cm / den) * (1 + 1e-9) + 8 * U64 * (
        np.abs(cf * w[2]) + np.abs(s * w[1]) + np.abs(d * w[0])) / den + 1e-300
    return exact_top(h_fast, h_margin, k,
                      lambda sel: hybrid_score(mode, d[sel], s[sel], exact(sel), w))


def exact_top(fast: np.ndarray, margin: np.ndarray, k: int,
               exact: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The exact top k (score descending, index ascending) when each exact score lies within
    `margin` of `fast`: only the indexes whose upper bound reaches the k-th best lower bound
    can be among them, and only those are scored exactly."""
    n = len(fast)
    k = min(k, n)
    if k == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    lower = fast - margin
    floor = np.partition(lower, n - k)[n - k]
    cand = np.nonzero(fast + margin >= floor)[0]
    return top_of(cand, exact(cand), k)

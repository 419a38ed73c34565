"""BGE-M3's three scores and compute_score's hybrid, as spec/scoring.py defines them, in numpy.

Every sum here is the contract's sequential float64 sum (np.cumsum over exact float64 products,
never np.sum or `@`, which reorder), so the kits can return the same bits. Where a fast BLAS
pass is used it only *selects* candidates, with a proven error bound, for the exact sum.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from edge_m3.errors import EdgeM3Error
from edge_m3.spec import (
    COLBERT_VECS,
    DEFAULT_MODE_WEIGHTS,
    DENSE_VECS,
    LEXICAL_WEIGHTS,
    RESULT_OUTPUTS,
    SCORE_MODES,
    hybrid_score,
    mode_signals,
)

# Unit roundoff of float64 / float32: the error bounds of a BLAS pass that only selects.
U64 = 2.0 ** -53
U32 = 2.0 ** -24


def _f64(x: Any) -> np.ndarray:
    """float32 / float16 / int8 values widened to float64 exactly (float64 input is narrowed to
    float32 first: the contract's inputs are float32)."""
    a = np.asarray(x)
    if a.dtype == np.float64 or a.dtype.kind in "iu" and a.dtype.itemsize > 1:
        a = a.astype(np.float32)
    return a.astype(np.float64)


def seq_dots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sequential float64 dot products along the last axis (a and b broadcast), from +0.0."""
    prod = np.multiply(a, b, dtype=np.float64)
    if prod.shape[-1] == 0:
        return np.zeros(prod.shape[:-1])
    return np.cumsum(prod, axis=-1)[..., -1] + 0.0  # + 0.0: a leading -0.0 product, as from +0.0


def dense_score(q: Any, p: Any) -> float:
    """dense(q, p): the sequential float64 dot of two float32 dense vectors."""
    q, p = _f64(q), _f64(p)
    if q.shape != p.shape or q.ndim != 1:
        raise EdgeM3Error(f"dense vectors must have one shape, got {q.shape} and {p.shape}")
    return float(seq_dots(q, p))


def _sorted_weights(weights: Mapping[Any, float]) -> tuple[np.ndarray, np.ndarray]:
    """lexical_weights as ascending int64 token ids and float32 weights (keys may be "123")."""
    ids = np.fromiter((int(k) for k in weights), dtype=np.int64, count=len(weights))
    w = np.fromiter((float(v) for v in weights.values()), dtype=np.float32, count=len(weights))
    order = np.argsort(ids, kind="stable")
    return ids[order], w[order]


def lexical_matching_score(q: Mapping[Any, float], p: Mapping[Any, float]) -> float:
    """sparse(q, p) = compute_lexical_matching_score: over shared token ids in ascending order,
    the float64 sum from +0.0 of w_q * w_p."""
    qi, qw = _sorted_weights(q)
    pi, pw = _sorted_weights(p)
    shared, iq, ip = np.intersect1d(qi, pi, assume_unique=True, return_indices=True)
    acc = 0.0
    for a, b in zip(qw[iq].astype(np.float64), pw[ip].astype(np.float64), strict=True):
        acc = acc + float(a) * float(b)
    return acc


def _colbert_best(q: np.ndarray, p: np.ndarray, p_scale: np.ndarray | None = None) -> np.ndarray:
    """Per query vector, the largest exact dot with any passage vector.

    A float64 BLAS pass gives every dot within 2*gamma_D*|q||p| of the sequential sum; only the
    dots that could be a row's largest are summed exactly.
    """
    scale = np.ones(len(p)) if p_scale is None else p_scale.astype(np.float64)
    fast = (q @ p.T) * scale
    d = q.shape[1]
    gamma = 2 * (d + 2) * U64 / (1 - (d + 2) * U64)
    margin = gamma * np.outer(np.linalg.norm(q, axis=1), np.linalg.norm(p, axis=1) * scale)
    margin += 8 * U64 * np.abs(fast) + 1e-300
    floor = (fast - margin).max(axis=1, keepdims=True)
    qi, pj = np.nonzero(fast + margin >= floor)
    exact = seq_dots(q[qi], p[pj])
    if p_scale is not None:
        exact = exact * scale[pj]
    best = np.full(len(q), -np.inf)
    np.maximum.at(best, qi, exact)
    return best


def colbert_score(q: Any, p: Any, p_scale: Any = None) -> float:
    """colbert(Q, P) = colbert_score: the sum over query vectors of the best dot with a passage
    vector, in order from +0.0, over the number of query vectors (0.0 when a side is empty).

    `p` may be float32, float16 or int8 codes with `p_scale` (one float32 scale per vector).
    """
    qa = _f64(q)
    pa = np.asarray(p)
    pa = pa.astype(np.float64) if pa.dtype != np.float64 else _f64(pa)
    if qa.size == 0 or pa.size == 0:  # JSON's [] has no second axis
        return 0.0
    if qa.ndim != 2 or pa.ndim != 2 or (len(qa) and len(pa) and qa.shape[1] != pa.shape[1]):
        raise EdgeM3Error(f"ColBERT vectors must be [n, D] of one D, got {qa.shape} and {pa.shape}")
    scale = None if p_scale is None else np.asarray(p_scale, np.float32)
    total = 0.0
    for best in _colbert_best(qa, pa, scale):
        total = total + float(best)
    return total / len(qa)


def signal_scores(q: Mapping[str, Any], p: Mapping[str, Any],
                  signals: Sequence[str] = ("dense", "sparse", "colbert")) -> dict[str, float]:
    """The three scores of two pipeline outputs (dicts with dense_vecs / lexical_weights /
    colbert_vecs, FlagEmbedding's names), for the `signals` asked."""
    out = {}
    if "dense" in signals:
        out["dense"] = dense_score(q[DENSE_VECS], p[DENSE_VECS])
    if "sparse" in signals:
        out["sparse"] = lexical_matching_score(q[LEXICAL_WEIGHTS], p[LEXICAL_WEIGHTS])
    if "colbert" in signals:
        out["colbert"] = colbert_score(q[COLBERT_VECS], p[COLBERT_VECS])
    return out


def compute_score(q: Mapping[str, Any], p: Mapping[str, Any], weights: Sequence[float] | None = None,
                  modes: Sequence[str] = SCORE_MODES) -> dict[str, float]:
    """BGEM3FlagModel.compute_score for one (query, passage) pair of pipeline outputs: every
    mode's score (`weights` = weights_for_different_modes: dense, sparse, colbert)."""
    needed = {s for m in modes for s in mode_signals(m)}
    missing = [s for s in needed
               if {"dense": DENSE_VECS, "sparse": LEXICAL_WEIGHTS, "colbert": COLBERT_VECS}[s] not in q
               or {"dense": DENSE_VECS, "sparse": LEXICAL_WEIGHTS, "colbert": COLBERT_VECS}[s] not in p]
    if missing:
        raise EdgeM3Error(f"outputs lack the {', '.join(sorted(missing))} head(s) the modes need")
    s = signal_scores(q, p, tuple(needed))
    return {m: hybrid_score(m, s.get("dense", 0.0), s.get("sparse", 0.0), s.get("colbert", 0.0), weights)
            for m in modes}


def score(q: Mapping[str, Any], p: Mapping[str, Any], mode: str = "dense",
          weights: Sequence[float] | None = None) -> float:
    """One mode's score of a (query, passage) pair of pipeline outputs."""
    return compute_score(q, p, weights, (mode,))[mode]


# weights_for_different_modes of the golden scores besides compute_score's default: uneven, so a
# kit that swaps two weights or normalises by the wrong sum fails.
GOLDEN_WEIGHTS = (0.4, 0.2, 0.4)


def golden_scores(cases: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every mode's score between pairs of cases (docs/bundle-format.md): each case with the next
    and with itself under the default weights, with the one after next under GOLDEN_WEIGHTS.
    Computed from the cases' JSON fields, which is what a kit reads back."""
    n = len(cases)
    modes = [m for m in SCORE_MODES
             if all(RESULT_OUTPUTS[s] in c for c in cases for s in mode_signals(m))]
    out = []
    for i in range(n):
        for j, weights in (((i + 1) % n, DEFAULT_MODE_WEIGHTS), (i, DEFAULT_MODE_WEIGHTS),
                           ((i + 2) % n, GOLDEN_WEIGHTS)):
            scores = compute_score(cases[i], cases[j], weights, modes) if modes else {}
            out.append({"query": i, "passage": j, "weights": list(weights), **scores})
    return out

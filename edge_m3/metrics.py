"""Parity figures between a bundle's outputs and the reference's, as the ship gate reads them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

TOP_K = 10


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-30))


def top_keys(weights: Mapping[str, float], k: int = TOP_K) -> list[str]:
    return [key for key, _ in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]


def lexical_overlap(ours: Mapping[str, float], ref: Mapping[str, float], k: int = TOP_K) -> float:
    """Share of the reference's top-k tokens that the bundle also ranks in its top-k."""
    want = top_keys(ref, k)
    if not want:
        return 1.0 if not ours else 0.0
    return len(set(want) & set(top_keys(ours, k))) / len(want)


def lexical_max_err(ours: Mapping[str, float], ref: Mapping[str, float]) -> float:
    """Largest weight difference over the union of keys (a missing key counts as 0)."""
    keys = set(ours) | set(ref)
    return max((abs(float(ours.get(k, 0.0)) - float(ref.get(k, 0.0))) for k in keys), default=0.0)


def colbert_score(q: np.ndarray, p: np.ndarray) -> float:
    """FlagEmbedding's late interaction: mean over query vectors of the best passage match."""
    q, p = np.asarray(q, np.float32), np.asarray(p, np.float32)
    if len(q) == 0 or len(p) == 0:
        return 0.0
    return float((q @ p.T).max(axis=1).mean())


def sparse_score(q: Mapping[str, float], p: Mapping[str, float]) -> float:
    """FlagEmbedding's lexical matching score: sum of weight products over shared tokens."""
    return float(sum(w * float(p[t]) for t, w in q.items() if t in p))


def score_matrices(outs: Sequence[Mapping[str, Any]], queries: Sequence[int],
                   passages: Sequence[int]) -> dict[str, np.ndarray]:
    """Query x passage scores by dense, sparse and colbert for one set of outputs."""
    mats = {m: np.zeros((len(queries), len(passages))) for m in ("dense", "sparse", "colbert")}
    for i, qi in enumerate(queries):
        for j, pj in enumerate(passages):
            q, p = outs[qi], outs[pj]
            mats["dense"][i, j] = float(np.dot(q["dense_vecs"], p["dense_vecs"]))
            mats["sparse"][i, j] = sparse_score(q["lexical_weights"], p["lexical_weights"])
            mats["colbert"][i, j] = colbert_score(q["colbert_vecs"], p["colbert_vecs"])
    return mats


def topk_agreement(ours: np.ndarray, ref: np.ndarray, k: int = TOP_K) -> float:
    """Mean over queries of |top-k(bundle) ∩ top-k(reference)| / k."""
    k = min(k, ours.shape[1])
    agree = [len(set(np.argsort(-o, kind="stable")[:k]) & set(np.argsort(-r, kind="stable")[:k])) / k
             for o, r in zip(ours, ref, strict=True)]
    return float(np.mean(agree)) if agree else 1.0


def compare(ours: Sequence[Mapping[str, Any]], ref: Sequence[Mapping[str, Any]],
            queries: Sequence[int], passages: Sequence[int]) -> dict[str, Any]:
    """Every parity figure of `verify` for one runtime against the reference."""
    cos = np.array([cosine(o["dense_vecs"], r["dense_vecs"]) for o, r in zip(ours, ref, strict=True)])
    lex_overlap = [lexical_overlap(o["lexical_weights"], r["lexical_weights"])
                   for o, r in zip(ours, ref, strict=True)]
    lex_err = [lexical_max_err(o["lexical_weights"], r["lexical_weights"])
               for o, r in zip(ours, ref, strict=True)]
    mo, mr = score_matrices(ours, queries, passages), score_matrices(ref, queries, passages)
    agreement = {m: topk_agreement(mo[m], mr[m]) for m in mo}
    return {
        "texts": len(cos),
        "dense_cosine": {"min": float(cos.min()), "mean": float(cos.mean()),
                         "all": [round(float(c), 7) for c in cos]},
        "lexical_top10_overlap": {"min": float(min(lex_overlap)),
                                  "mean": float(np.mean(lex_overlap))},
        "lexical_max_abs_err": float(max(lex_err)),
        "colbert_score_abs_err_max": float(np.abs(mo["colbert"] - mr["colbert"]).max()),
        "retrieval_top10_agreement": {**agreement, "min": float(min(agreement.values()))},
    }


def gate(figures: Mapping[str, Any], limits: Mapping[str, float]) -> list[str]:
    """The thresholds a runtime's figures miss, as readable lines (empty: ships)."""
    checks = {
        "dense_cosine_min": (figures["dense_cosine"]["min"], ">="),
        "lexical_top10_overlap_min": (figures["lexical_top10_overlap"]["mean"], ">="),
        "colbert_score_abs_err_max": (figures["colbert_score_abs_err_max"], "<="),
        "retrieval_top10_agreement_min": (figures["retrieval_top10_agreement"]["min"], ">="),
    }
    failed = []
    for name, limit in limits.items():
        if name not in checks:
            continue
        value, op = checks[name]
        ok = value >= limit if op == ">=" else value <= limit
        if not ok:
            failed.append(f"{name}: {value:.6g} {'<' if op == '>=' else '>'} {limit}")
    return failed

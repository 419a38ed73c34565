"""Parity figures between a bundle's outputs and a reference's, and the ship gate that reads them.

Scores follow FlagEmbedding exactly (`colbert_score`, `compute_lexical_matching_score`), so a
retrieval ranking here is the ranking an app using FlagEmbedding's formulas would get.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from edge_m3.errors import OptionError
from edge_m3.spec import COLBERT_VECS, DENSE_VECS, HEADS, LEXICAL_WEIGHTS, RESULT_OUTPUTS

TOP_K = 10
METHODS = HEADS  # one scoring method per head


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-30))


def top_keys(weights: Mapping[str, float], k: int = TOP_K) -> list[str]:
    """The k heaviest tokens (ties broken by id, so the order is deterministic)."""
    return [key for key, _ in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]


def lexical_overlap(ours: Mapping[str, float], ref: Mapping[str, float], k: int = TOP_K) -> float:
    """Share of the reference's top-k tokens that the bundle also ranks in its top-k."""
    want = top_keys(ref, k)
    if not want:
        return 1.0 if not ours else 0.0
    return len(set(want) & set(top_keys(ours, k))) / len(want)


def lexical_abs_err(ours: Mapping[str, float], ref: Mapping[str, float]) -> float:
    """Largest weight difference over the tokens both sides keep."""
    shared = set(ours) & set(ref)
    return max((abs(float(ours[k]) - float(ref[k])) for k in shared), default=0.0)


def lexical_key_jaccard(ours: Mapping[str, float], ref: Mapping[str, float]) -> float:
    """|keys ∩| / |keys ∪|: tokens one side drops (weight rounded to <= 0) show up here."""
    union = set(ours) | set(ref)
    return len(set(ours) & set(ref)) / len(union) if union else 1.0


def colbert_score(q: np.ndarray, p: np.ndarray) -> float:
    """FlagEmbedding's late interaction: mean over query vectors of the best passage match."""
    q, p = np.asarray(q, np.float32), np.asarray(p, np.float32)
    if len(q) == 0 or len(p) == 0:
        return 0.0
    return float((q @ p.T).max(axis=1).sum() / len(q))


def sparse_score(q: Mapping[str, float], p: Mapping[str, float]) -> float:
    """FlagEmbedding's lexical matching score: sum of weight products over shared tokens."""
    return float(sum(float(w) * float(p[t]) for t, w in q.items() if t in p))




def methods_of(outs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The scoring methods every output supports (a bundle may export fewer heads)."""
    return [m for m in METHODS if outs and all(RESULT_OUTPUTS[m] in o for o in outs)]


def _colbert_matrix(outs: Sequence[Mapping[str, Any]], queries: Sequence[int],
                    passages: Sequence[int], block: int = 8192) -> np.ndarray:
    """colbert_score for every query x passage pair, as a few large products (the pairwise
    loop takes minutes on thousands of texts): per query vector its best match in each
    passage, summed per query and divided by its vector count, exactly colbert_score's sum."""
    key = COLBERT_VECS
    q_vecs = [np.asarray(outs[i][key], np.float32).reshape(-1, np.shape(outs[i][key])[-1])
              for i in queries]
    p_vecs = [np.asarray(outs[j][key], np.float32) for j in passages]
    out = np.zeros((len(queries), len(passages)))
    q_len = np.array([len(q) for q in q_vecs])
    p_len = np.array([len(p) for p in p_vecs])
    if not q_len.sum() or not p_len.sum():
        return out
    q_all = np.concatenate([q for q in q_vecs if len(q)])
    q_starts = np.concatenate([[0], np.cumsum(q_len[q_len > 0])[:-1]])
    live_p = np.flatnonzero(p_len)
    j = 0
    while j < len(live_p):  # passages in blocks of about `block` vectors
        k, n = j, 0
        while k < len(live_p) and (n == 0 or n + p_len[live_p[k]] <= block):
            n += p_len[live_p[k]]
            k += 1
        cols = live_p[j:k]
        p_all = np.concatenate([p_vecs[c] for c in cols])
        p_starts = np.concatenate([[0], np.cumsum(p_len[cols])[:-1]])
        best = np.maximum.reduceat(q_all @ p_all.T, p_starts, axis=1)  # [query vecs, passages]
        sums = np.add.reduceat(best, q_starts, axis=0)  # [queries with vecs, passages]
        out[np.ix_(np.flatnonzero(q_len), cols)] = sums / q_len[q_len > 0][:, None]
        j = k
    return out


def _sparse_matrix(outs: Sequence[Mapping[str, Any]], queries: Sequence[int],
                   passages: Sequence[int]) -> np.ndarray:
    """compute_lexical_matching_score for every pair: weights on the queries' tokens only
    (the only ones a product can be non-zero on), one product."""
    key = LEXICAL_WEIGHTS
    vocab = {t: c for c, t in enumerate(sorted({t for i in queries for t in outs[i][key]}))}
    qm = np.zeros((len(queries), len(vocab)))
    pm = np.zeros((len(passages), len(vocab)))
    for row, i in enumerate(queries):
        for t, w in outs[i][key].items():
            qm[row, vocab[t]] = float(w)
    for row, j in enumerate(passages):
        for t, w in outs[j][key].items():
            if t in vocab:
                pm[row, vocab[t]] = float(w)
    return qm @ pm.T


def score_matrices(outs: Sequence[Mapping[str, Any]], queries: Sequence[int],
                   passages: Sequence[int], methods: Sequence[str] = METHODS) -> dict[str, np.ndarray]:
    """Query x passage scores by dense, sparse and colbert for one set of outputs (the same
    sums as sparse_score and colbert_score, computed for all pairs at once)."""
    shape = (len(queries), len(passages))
    mats: dict[str, np.ndarray] = {}
    if "dense" in methods and queries and passages:
        dq = np.stack([np.asarray(outs[i][DENSE_VECS], np.float32) for i in queries])
        dp = np.stack([np.asarray(outs[j][DENSE_VECS], np.float32) for j in passages])
        mats["dense"] = (dq @ dp.T).astype(np.float64)
    elif "dense" in methods:
        mats["dense"] = np.zeros(shape)
    if "sparse" in methods:
        mats["sparse"] = _sparse_matrix(outs, queries, passages).reshape(shape)
    if "colbert" in methods:
        mats["colbert"] = _colbert_matrix(outs, queries, passages).reshape(shape)
    return mats


def topk_agreement(ours: np.ndarray, ref: np.ndarray, k: int = TOP_K) -> float:
    """Mean over queries of |top-k(bundle) ∩ top-k(reference)| / k."""
    if ours.size == 0:
        return 1.0
    k = min(k, ours.shape[1])
    agree = [len(set(np.argsort(-o, kind="stable")[:k]) & set(np.argsort(-r, kind="stable")[:k])) / k
             for o, r in zip(ours, ref, strict=True)]
    return float(np.mean(agree))


def recall_at(scores: np.ndarray, relevant: Sequence[int | Sequence[int]], k: int = TOP_K) -> float:
    """Share of queries with a relevant passage (one, or any of several) in the top k
    (quality, not parity)."""
    if not len(relevant):
        return 1.0
    hits = [bool(set(np.atleast_1d(rel).tolist()) & set(np.argsort(-row, kind="stable")[:k].tolist()))
            for row, rel in zip(scores, relevant, strict=True)]
    return float(np.mean(hits))


# The high percentile the gate bounds besides the largest error: the largest of thousands of
# texts (a million query x passage pairs) grows with their number, the 99th percentile does not.
ERR_PERCENTILE = 99


def _p99(err: np.ndarray) -> float:
    """The ERR_PERCENTILE-th percentile of errors (0 for none), by linear interpolation."""
    return float(np.percentile(err, ERR_PERCENTILE)) if err.size else 0.0


def _min_mean(values: Sequence[float]) -> dict[str, float]:
    return {"min": float(np.min(values)), "mean": float(np.mean(values))} if len(values) else {}


def compare(ours: Sequence[Mapping[str, Any]], ref: Sequence[Mapping[str, Any]],
            text_sets: Mapping[str, Sequence[int]], queries: Sequence[int],
            passages: Sequence[int], relevant: Sequence[int | Sequence[int]] = (),
            labels: Sequence[str] | None = None) -> dict[str, Any]:
    """Every parity figure of `verify` for one set of outputs against a reference.

    `text_sets` names groups of text indexes (user texts, queries, passages) so dense cosine is
    reported per group; `relevant[i]` is the passage (position in `passages`), or passages,
    of query i; `labels` (a language per text) adds the figures per language and per length
    (`per_label`, `per_length`).
    """
    pairs = list(zip(ours, ref, strict=True))
    methods = [m for m in methods_of(ours) if m in methods_of(ref)]
    ids_match = [list(o["input_ids"]) == list(r["input_ids"]) for o, r in pairs]
    worst: dict[str, Any] = {}  # where the largest errors are (text indexes into ours / ref)
    figures: dict[str, Any] = {"texts": len(pairs), "heads": methods,
                               "input_ids_match": float(np.mean(ids_match)) if ids_match else 1.0,
                               "worst": worst}
    if "dense" in methods:
        cos = [cosine(o[DENSE_VECS], r[DENSE_VECS]) for o, r in pairs]
        figures["dense_cosine"] = {
            "all": _min_mean(cos),
            **{name: _min_mean([cos[i] for i in idx]) for name, idx in text_sets.items() if len(idx)},
            "per_text": [float(c) for c in cos]}
        if cos:
            figures["dense_cosine"]["all"]["p1"] = float(np.percentile(cos, 1))
    if "sparse" in methods:
        lw = [(o[LEXICAL_WEIGHTS], r[LEXICAL_WEIGHTS]) for o, r in pairs]
        figures["lexical_top10_overlap"] = _min_mean([lexical_overlap(o, r) for o, r in lw])
        lex_err = np.array([lexical_abs_err(o, r) for o, r in lw], np.float64)
        figures["lexical_abs_err"] = float(lex_err.max(initial=0.0))
        figures["lexical_abs_err_p99"] = _p99(lex_err)
        if len(lex_err):
            i = int(lex_err.argmax())
            worst["lexical_abs_err"] = {"text": i, "value": float(lex_err[i]),
                                        "tokens": len(ref[i]["input_ids"]),
                                        **({"label": labels[i]} if labels is not None else {})}
        figures["lexical_key_jaccard"] = _min_mean([lexical_key_jaccard(o, r) for o, r in lw])
    mo = score_matrices(ours, queries, passages, methods)
    mr = score_matrices(ref, queries, passages, methods)
    for m in methods:
        err = np.abs(mo[m] - mr[m])
        figures[f"{m}_score_abs_err"] = float(err.max(initial=0.0))
        figures[f"{m}_score_abs_err_p99"] = _p99(err)
        if err.size:
            qi, pi = np.unravel_index(int(err.argmax()), err.shape)
            q, p = queries[int(qi)], passages[int(pi)]
            worst[f"{m}_score_abs_err"] = {
                "query": q, "passage": p, "value": float(err[qi, pi]),
                "query_tokens": len(ref[q]["input_ids"]), "passage_tokens": len(ref[p]["input_ids"]),
                **({"label": labels[q]} if labels is not None else {})}
    if methods:
        agreement = {m: topk_agreement(mo[m], mr[m]) for m in methods}
        figures["retrieval_top10_agreement"] = {**agreement, "min": min(agreement.values())}
    if len(relevant) and methods:
        figures["recall_at_10"] = {"bundle": {m: recall_at(mo[m], relevant) for m in methods},
                                   "reference": {m: recall_at(mr[m], relevant) for m in methods}}
    if labels is not None:
        figures["per_language"] = per_label(figures, labels, ours, ref, queries, (mo, mr))
        figures["per_length"] = per_length(figures, ref)
    return figures


# Token-length buckets of the per-length figures (upper bounds; the last holds truncated texts).
LENGTH_BUCKETS = (16, 32, 64, 128, 256, 512)


def _stats(values: Sequence[float]) -> dict[str, float]:
    v = np.asarray(values, np.float64)
    return {"min": float(v.min()), "p1": float(np.percentile(v, 1)), "mean": float(v.mean()),
            "texts": int(len(v))} if len(v) else {}


def per_label(figures: Mapping[str, Any], labels: Sequence[str], ours: Sequence[Mapping[str, Any]],
              ref: Sequence[Mapping[str, Any]], queries: Sequence[int],
              mats: tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]]) -> dict[str, Any]:
    """Per label (a language): dense cosine min/p1/mean of its texts, the largest lexical
    weight error of its texts, ColBERT score error and top-10 agreement of its queries (against
    every passage)."""
    cos = figures.get("dense_cosine", {}).get("per_text")
    mo, mr = mats
    q_rows: dict[str, list[int]] = defaultdict(list)
    for row, i in enumerate(queries):
        q_rows[labels[i]].append(row)
    out: dict[str, Any] = {}
    for label in sorted(set(labels)):
        idx = [i for i, lab in enumerate(labels) if lab == label]
        f: dict[str, Any] = {"texts": len(idx), "queries": len(q_rows[label])}
        if cos is not None:
            f["dense_cosine"] = _stats([cos[i] for i in idx])
        if "lexical_abs_err" in figures:
            f["lexical_abs_err"] = max(lexical_abs_err(ours[i][LEXICAL_WEIGHTS],
                                                       ref[i][LEXICAL_WEIGHTS]) for i in idx)
        rows = q_rows[label]
        if rows and "colbert" in mo:
            f["colbert_score_abs_err"] = float(np.abs(mo["colbert"][rows] - mr["colbert"][rows]).max())
        if rows and mo:
            agree = {m: topk_agreement(mo[m][rows], mr[m][rows]) for m in mo}
            f["retrieval_top10_agreement"] = {**agree, "min": min(agree.values())}
        out[label] = f
    return out


def per_length(figures: Mapping[str, Any], ref: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Dense cosine by the reference's token count, in LENGTH_BUCKETS (<= each bound)."""
    cos = figures.get("dense_cosine", {}).get("per_text")
    if cos is None:
        return {}
    buckets: dict[int, list[float]] = defaultdict(list)
    for c, r in zip(cos, ref, strict=True):
        n = len(r["input_ids"])
        buckets[next((b for b in LENGTH_BUCKETS if n <= b), LENGTH_BUCKETS[-1])].append(c)
    return {str(b): _stats(buckets[b]) for b in LENGTH_BUCKETS if buckets[b]}


# The figures a thresholds file may bound: name -> where `compare`'s result holds it.
GATE_PATHS = {
    "dense_cosine": ("dense_cosine", "all", "min"),
    "dense_cosine_mean": ("dense_cosine", "all", "mean"),
    "lexical_top10_overlap": ("lexical_top10_overlap", "mean"),
    "lexical_top10_overlap_worst": ("lexical_top10_overlap", "min"),
    "lexical_abs_err": ("lexical_abs_err",),
    "lexical_abs_err_p99": ("lexical_abs_err_p99",),
    "colbert_score_abs_err": ("colbert_score_abs_err",),
    "colbert_score_abs_err_p99": ("colbert_score_abs_err_p99",),
    "retrieval_top10_agreement": ("retrieval_top10_agreement", "min"),
    "input_ids_match": ("input_ids_match",),
    "model_rss_ratio": ("model_rss_ratio",),  # set only where Runtime.memory_gated (verify)
}
GATE_FIGURES = tuple(GATE_PATHS)


def gate_value(figures: Mapping[str, Any], figure: str) -> float | None:
    """A gated figure, or None when the bundle lacks the head it measures."""
    value: Any = figures
    for part in GATE_PATHS[figure]:
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return float(value)


def check_limits(limits: Mapping[str, Any], source: str, field: str | None = None) -> dict[str, float]:
    """Validate one variant's thresholds: every key is `<figure>_min` or `<figure>_max`.
    Errors name `source`, after the option `field` it came from when it did."""
    out = {}
    for key, value in limits.items():
        figure, _, bound = key.rpartition("_")
        if bound not in ("min", "max") or figure not in GATE_FIGURES:
            raise OptionError(field, source, f"unknown threshold '{key}' (use <figure>_min or "
                              f"<figure>_max; figures: {', '.join(GATE_FIGURES)})")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise OptionError(field, source, f"threshold '{key}' must be a number, got {value!r}")
        out[key] = float(value)
    return out


def gate(figures: Mapping[str, Any], limits: Mapping[str, float]) -> list[str]:
    """The thresholds a runtime's figures miss, as readable lines (empty: ships).

    A threshold on a head the bundle does not export does not apply.
    """
    failed = []
    for key, limit in limits.items():
        figure, _, bound = key.rpartition("_")
        value = gate_value(figures, figure)
        if value is None:
            continue
        if (bound == "min" and not value >= limit) or (bound == "max" and not value <= limit):
            failed.append(f"{key}: {value:.7g} {'<' if bound == 'min' else '>'} {limit:g}")
    return failed

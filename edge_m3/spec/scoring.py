"""BGE-M3's scores and compute_score's hybrid, the arithmetic included (moved verbatim from
contract.py's "retrieval scores" section)."""

from __future__ import annotations

from collections.abc import Sequence

from edge_m3.errors import OptionError

# --------------------------------------------------------------------------- retrieval scores
# BGE-M3's three scores and BGEM3FlagModel.compute_score's weighted hybrid, defined once for
# Python and both kits (issue 25). The arithmetic is part of the definition, so that Python,
# Kotlin and Swift return the same bits (docs/index-format.md, "Score arithmetic"):
#   - inputs are float32 (model outputs, stored vectors); every value is widened to float64
#     exactly, and a product of two float32 values is exact in float64;
#   - a dot product is the float64 sum of those products, one at a time in index order,
#     starting from +0.0 (never a reordered, pairwise or fused sum; an FMA gives the same
#     bits because the products are exact); an int8-stored vector's dot is that sum over its
#     int8 codes, then times its float32 scale widened to float64;
#   - dense(q, p) = dot(q, p) (the vectors are already unit length, as FlagEmbedding's);
#   - sparse(q, p) = compute_lexical_matching_score: over the token ids both lexical_weights
#     hold, in ascending id order, the float64 sum from +0.0 of w_q * w_p. lexical_weights
#     keep `<mask>` and drop LEXICAL_SKIP_KEYS and weights <= 0 (runtime/postprocess.py);
#   - colbert(Q, P) = colbert_score: for each query vector in order, the largest dot with any
#     passage vector, summed in float64 from +0.0, divided by the number of query vectors.
#     Both sides keep `</s>`'s vector (postprocess.colbert_vectors). No vector on either side:
#     0.0 (FlagEmbedding divides by zero there);
#   - a mode combines them with hybrid_score below; the result is the float64 value, no
#     further rounding. Scores never come out as -0.0 (sums start from +0.0).
# edge_m3/retrieval/scores.py is the numpy implementation of this text.
SCORE_SIGNALS = ("dense", "sparse", "colbert")  # the order of weights_for_different_modes
SCORE_MODES = ("dense", "sparse", "colbert", "sparse+dense", "colbert+sparse+dense")
# compute_score's default when weights_for_different_modes is None: dense, sparse, colbert.
DEFAULT_MODE_WEIGHTS = (1.0, 1.0, 1.0)
# Hybrid search re-scores the union of the top max(k, HYBRID_CANDIDATES) passages by dense and
# by sparse (docs/index-format.md, "Search"): an index of at most this many passages is
# ranked exactly as scoring every passage.
HYBRID_CANDIDATES = 100


def mode_signals(mode: str) -> tuple[str, ...]:
    """The signals a mode adds, in the order compute_score adds them (colbert, sparse, dense)."""
    if mode not in SCORE_MODES:
        raise OptionError("mode", mode, f"unknown (choose from {', '.join(SCORE_MODES)})")
    return tuple(s for s in ("colbert", "sparse", "dense") if s in mode.split("+"))


def mode_weights(weights: Sequence[float] | None) -> tuple[float, float, float]:
    """weights_for_different_modes checked: three finite numbers >= 0 (dense, sparse, colbert)."""
    if weights is None:
        return DEFAULT_MODE_WEIGHTS
    try:
        out = tuple(float(w) for w in weights)
    except (TypeError, ValueError):
        raise OptionError("weights", weights, "must be three numbers (dense, sparse, colbert)") from None
    if len(out) != 3 or not all(w >= 0 and w != float("inf") for w in out):
        raise OptionError("weights", list(weights), "must be three finite numbers >= 0 "
                          "(dense, sparse, colbert)")
    return out  # type: ignore[return-value]


def hybrid_score(mode: str, dense: float, sparse: float, colbert: float,
                 weights: Sequence[float] | None = None) -> float:
    """compute_score's value for `mode` from the three float64 scores, in float64.

    A single mode is its score as is. `sparse+dense` is (sparse*w_s + dense*w_d) /
    (w_s + w_d); `colbert+sparse+dense` is ((colbert*w_c + sparse*w_s) + dense*w_d) /
    ((w_d + w_s) + w_c): FlagEmbedding's order of operations, each one rounded (no FMA).
    The weights a mode uses must not sum to 0.
    """
    signals = mode_signals(mode)
    if len(signals) == 1:
        return {"dense": dense, "sparse": sparse, "colbert": colbert}[signals[0]]
    w_d, w_s, w_c = mode_weights(weights)
    value = {"dense": dense, "sparse": sparse, "colbert": colbert}
    weight = {"dense": w_d, "sparse": w_s, "colbert": w_c}
    num = value[signals[0]] * weight[signals[0]]
    for s in signals[1:]:
        num = num + value[s] * weight[s]
    den = w_s + w_d if mode == "sparse+dense" else (w_d + w_s) + w_c
    if den == 0.0:
        raise OptionError("weights", [w_d, w_s, w_c], f"the weights {mode} uses sum to 0")
    return num / den

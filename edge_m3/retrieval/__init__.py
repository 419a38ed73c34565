"""Retrieval on BGE-M3's three outputs: FlagEmbedding's scores and hybrid, and a shippable index.

Importable with `pip install edge-m3` alone (numpy only). The rules are spec/scoring.py's
("retrieval scores"); docs/index-format.md is the text the kits implement.
"""

from __future__ import annotations

from edge_m3.retrieval.index import Index
from edge_m3.retrieval.index_folder import BundleIdentity, CorruptIndexError
from edge_m3.retrieval.ranking import Hit
from edge_m3.retrieval.scores import (
    colbert_score,
    compute_score,
    dense_score,
    lexical_matching_score,
    score,
)
from edge_m3.spec import DEFAULT_MODE_WEIGHTS, HYBRID_CANDIDATES, SCORE_MODES, hybrid_score

__all__ = ["DEFAULT_MODE_WEIGHTS", "HYBRID_CANDIDATES", "SCORE_MODES", "BundleIdentity", "CorruptIndexError",
           "Hit", "Index", "colbert_score", "compute_score", "dense_score", "hybrid_score",
           "lexical_matching_score", "score"]

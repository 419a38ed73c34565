"""Raw signature outputs -> FlagEmbedding's dense / lexical_weights / colbert_vecs.

The one place these rules live: the builder's golden vectors, the harness and the tests all
call it, and the platform kits mirror it line for line (docs/bundle-format.md, step 5).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from edge_m3.spec import (
    COLBERT_VECS,
    DENSE_VECS,
    LEXICAL_SKIP_KEYS,
    LEXICAL_WEIGHTS,
    SPARSE_WEIGHTS,
)


def lexical_weights(
    input_ids: Sequence[int],
    sparse_weights: Sequence[float] | np.ndarray,
    skip_ids: Iterable[int],
    original_ids: Sequence[int] | None = None,
) -> dict[str, float]:
    """Max weight per token id over the real tokens, specials and non-positive weights dropped.

    FlagEmbedding drops `<s>`, `</s>`, `<pad>`, `<unk>` (keeps `<mask>`) and every weight
    <= 0. Keys are the original vocabulary ids as strings (`original_ids` maps a trimmed
    vocabulary back), so sparse indexes built with the full model stay valid.
    """
    skip = set(int(i) for i in skip_ids)
    keys = input_ids if original_ids is None else original_ids
    out: dict[str, float] = {}
    weights = np.asarray(sparse_weights, dtype=np.float32)
    for i, tok in enumerate(input_ids):
        if int(tok) in skip:
            continue
        w = float(weights[i])
        if w <= 0:
            continue
        key = str(int(keys[i]))
        if w > out.get(key, 0.0):
            out[key] = w
    return out


def colbert_vectors(colbert_vecs: np.ndarray, n_tokens: int) -> np.ndarray:
    """One vector per real token after `<s>` (`</s>` included), as FlagEmbedding keeps them."""
    return np.asarray(colbert_vecs, dtype=np.float32)[: max(n_tokens - 1, 0)]


def special_skip_ids(special_ids: Mapping[str, int]) -> tuple[int, ...]:
    """The ids FlagEmbedding leaves out of lexical_weights (not `<mask>`)."""
    return tuple(int(special_ids[k]) for k in LEXICAL_SKIP_KEYS)


def postprocess(
    raw: Mapping[str, np.ndarray],
    input_ids: Sequence[int],
    special_ids: Mapping[str, int],
    original_ids: Sequence[int] | None = None,
) -> dict[str, Any]:
    """One text's raw batch-of-one outputs -> FlagEmbedding's named outputs."""
    n = len(input_ids)
    out: dict[str, Any] = {}
    if DENSE_VECS in raw:
        out[DENSE_VECS] = np.asarray(raw[DENSE_VECS], dtype=np.float32)[0]
    if SPARSE_WEIGHTS in raw:
        out[LEXICAL_WEIGHTS] = lexical_weights(
            input_ids, np.asarray(raw[SPARSE_WEIGHTS])[0][:n], special_skip_ids(special_ids),
            original_ids,
        )
    if COLBERT_VECS in raw:
        out[COLBERT_VECS] = colbert_vectors(np.asarray(raw[COLBERT_VECS])[0], n)
    return out

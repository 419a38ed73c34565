"""Vocabulary trimming: keep only the embedding rows an app's languages use.

BGE-M3's word-embedding table is 250,002 x 1,024, 45% of every variant. Rows that the target
corpus never produces are dropped; the bundle carries `vocab_map.json` (the kept original ids,
in order: row i of the trimmed table is original id kept_ids[i]) so the device maps
SentencePiece ids to rows and anything else to `<unk>`. Outputs report original ids.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.common.files import read_lines
from edge_m3.errors import EdgeM3Error, OptionError
from edge_m3.spec import SPECIAL_KEYS, VOCAB_MAP


def read_corpus(path: Path, field: str = "vocab_corpus") -> list[str]:
    """The non-blank UTF-8 lines of a corpus file (see edge_m3.common.files); none is an error
    naming the option `field`."""
    texts = [t for t in read_lines(path, field) if t.strip()]
    if not texts:
        raise OptionError(field, path, "empty (no non-blank line)")
    return texts


def count_tokens(tokenizer: Any, texts: Iterable[str]) -> Counter[int]:
    """How often each original id appears (specials excluded)."""
    counts: Counter[int] = Counter()
    for text in texts:
        counts.update(tokenizer.encode(text)[1:-1])
    return counts


@dataclass
class VocabPlan:
    """What a trimmed bundle keeps, and the figures the manifest records."""

    kept_ids: list[int]
    corpus_sha256: list[str]
    min_count: int
    corpus_tokens: int
    covered_tokens: int

    @property
    def coverage(self) -> float:
        return self.covered_tokens / max(self.corpus_tokens, 1)

    def to_json(self) -> dict[str, Any]:
        return {"kept_ids": self.kept_ids, "corpus_sha256": self.corpus_sha256,
                "min_count": self.min_count, "kept": len(self.kept_ids),
                "corpus_tokens": self.corpus_tokens, "coverage": round(self.coverage, 6)}

    def manifest_entry(self) -> dict[str, Any]:
        entry = self.to_json()
        del entry["kept_ids"]
        return {"file": VOCAB_MAP, **entry}


def plan_trim(tokenizer: Any, corpora: Sequence[Path], min_count: int = 1) -> VocabPlan:
    """Specials plus every id the corpora produce at least `min_count` times."""
    if min_count < 1:
        raise OptionError("vocab_min_count", min_count, "must be at least 1")
    counts: Counter[int] = Counter()
    hashes = []
    for path in corpora:
        counts.update(count_tokens(tokenizer, read_corpus(path)))
        hashes.append(hashlib.sha256(Path(path).read_bytes()).hexdigest())
    special = tokenizer.spec.special_ids
    kept = sorted({int(special[k]) for k in SPECIAL_KEYS}
                  | {i for i, c in counts.items() if c >= min_count})
    total = sum(counts.values())
    covered = sum(c for i, c in counts.items() if c >= min_count)
    return VocabPlan(kept, hashes, min_count, total, covered)


def check_kept(kept_ids: Sequence[int], special_ids: Mapping[str, int], vocab_size: int) -> None:
    """A kept set must be sorted, in range, and hold every special token."""
    if not all(isinstance(i, int | np.integer) and not isinstance(i, bool) for i in kept_ids):
        raise EdgeM3Error(f"{VOCAB_MAP}: kept ids must be integers")
    missing = [k for k in SPECIAL_KEYS if int(special_ids[k]) not in set(kept_ids)]
    if missing:
        raise EdgeM3Error(f"{VOCAB_MAP}: kept ids lack the special tokens {missing}")
    arr = np.asarray(kept_ids, dtype=object)
    if (np.diff(arr) <= 0).any() or arr.min() < 0 or arr.max() >= vocab_size:
        raise EdgeM3Error(f"{VOCAB_MAP}: kept ids must be sorted, unique and < {vocab_size}")


def row_map(kept_ids: Sequence[int], special_ids: Mapping[str, int],
            vocab_size: int, reach: int | None = None) -> np.ndarray:
    """Original id -> row of the trimmed table; ids not kept go to the `<unk>` row.

    `reach`: only ids below it are ever looked up (the tokenizer's), so the map stops there: a
    manifest's vocab_size is not an allocation size."""
    check_kept(kept_ids, special_ids, vocab_size)
    kept = np.asarray(kept_ids, dtype=np.int64)
    unk_row = int(np.searchsorted(kept, int(special_ids["unk"])))
    size = vocab_size if reach is None else min(vocab_size, reach)
    rows = np.full(size, unk_row, dtype=np.int64)
    inside = kept < size
    rows[kept[inside]] = np.arange(len(kept))[inside]
    return rows


def oov_share(tokenizer: Any, kept_ids: Sequence[int], texts: Iterable[str]) -> tuple[int, int]:
    """(tokens outside the kept set, all tokens) over held-out texts."""
    kept = set(int(i) for i in kept_ids)
    counts = count_tokens(tokenizer, texts)
    return sum(c for i, c in counts.items() if i not in kept), sum(counts.values())

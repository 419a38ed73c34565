"""What every device tokenizer shares, whatever its kind: the interface the pipeline, the bulk
engine and the index call (`encode`, `encode_chunks`, `encode_batch`, `to_model_ids`, `pad`,
`encode_padded_batch`), the special-token split, the per-word cache, truncation and padding.

A kind (XLM-R's SentencePiece in tokenizer.py, WordPiece in wordpiece.py, byte-level BPE in
bpe.py) reads its own file, checks it against the manifest's TokenizerSpec, calls
`DeviceTokenizer.__init__` and supplies `words` (the text's words as its reference cuts them)
and `_word` (one word's ids).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from edge_m3.errors import EdgeM3Error
from edge_m3.spec import CHUNK_OVERLAP_PERCENT, TokenizerSpec

WORD_CACHE_SIZE = 100_000  # words whose ids each tokenizer keeps (the reference caches them too)


class InvalidTextError(EdgeM3Error, ValueError):
    """Text that no tokenizer can take (not a string, or not encodable as UTF-8)."""


def pad_ids(ids: Sequence[int], length: int, pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """int32 ids right-padded with pad_id to `length`, and the attention mask (1 = real)."""
    if len(ids) > length:
        raise EdgeM3Error(f"{len(ids)} tokens do not fit length {length}")
    out = np.full(length, pad_id, dtype=np.int32)
    out[: len(ids)] = ids
    mask = np.zeros(length, dtype=np.int32)
    mask[: len(ids)] = 1
    return out, mask


def check_text(text: Any) -> str:
    """The text itself, or a clear error: None, bytes, numbers and lone surrogates are refused."""
    if not isinstance(text, str):
        raise InvalidTextError(f"text must be a str, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidTextError(f"text is not valid Unicode (lone surrogate at index "
                               f"{exc.start})") from None
    return text


def check_texts(texts: Any) -> Sequence[Any]:
    """A batch must be a sequence of texts, not one text (a str would iterate characters)."""
    if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
        raise InvalidTextError(f"texts must be a sequence of str, got {type(texts).__name__}")
    return texts


def chunk_spans(n: int, max_length: int, overlap: int | None = None) -> list[tuple[int, int]]:
    """[start, end) of each window over `n` content tokens for signatures of `max_length`
    (docs/index-format.md, "Passages and chunks"): W = max_length - 2 tokens each, the next one
    W - overlap tokens on, until one reaches the end."""
    width = max_length - 2
    if overlap is None:
        overlap = width * CHUNK_OVERLAP_PERCENT // 100
    if isinstance(overlap, bool) or not isinstance(overlap, int | np.integer) or not 0 <= overlap < width:
        raise EdgeM3Error(f"chunk overlap {overlap!r}: must be an integer from 0 to {width - 1} "
                          f"(windows of {width} tokens)")
    starts = [0]
    while starts[-1] + width < n:
        starts.append(starts[-1] + width - int(overlap))
    return [(s, min(s + width, n)) for s in starts]


class DeviceTokenizer(ABC):
    """`encode` -> `bos pieces eos` in model ids; `pad` -> fixed-length ids and mask.

    `specials`: the special-token strings split out of the raw text (leftmost-longest), each
    its id; a kind with its own added-token rules (BPE) passes none and overrides `_segments`.
    `to_model_ids` is the identity unless a kind sets `_row` (a trimmed vocabulary's row map).
    """

    def __init__(self, spec: TokenizerSpec, specials: Mapping[str, int]) -> None:
        self.spec = spec
        s = spec.special_ids
        self.bos, self.eos, self.pad_id, self.unk = s["bos"], s["eos"], s["pad"], s["unk"]
        self._special_of = dict(specials)
        alternatives = sorted(self._special_of, key=len, reverse=True)  # leftmost-longest
        self._special_re = re.compile("|".join(map(re.escape, alternatives))) if alternatives else None
        self._word_ids: dict[str, list[int]] = {}
        self._row: np.ndarray | None = None

    @abstractmethod
    def words(self, text: str) -> list[str]:
        """A text between special tokens as the kind's reference cuts it into words."""

    @abstractmethod
    def _word(self, word: str) -> list[int]:
        """One word's ids."""

    def _pieces(self, text: str) -> list[int]:
        # Each word's ids (each kind's `_word`); words repeat, so their ids are cached (as the
        # reference caches them).
        out: list[int] = []
        cache = self._word_ids
        for word in self.words(text):
            ids = cache.get(word)
            if ids is None:
                ids = self._word(word)
                if len(cache) >= WORD_CACHE_SIZE:
                    cache.clear()
                cache[word] = ids
            out.extend(ids)
        return out

    def _segments(self, text: str) -> list[int]:
        """Pieces of the text between special-token strings, and those strings' ids."""
        if self._special_re is None:
            return self._pieces(text)
        out: list[int] = []
        pos = 0
        for m in self._special_re.finditer(text):
            out.extend(self._pieces(text[pos:m.start()]))
            out.append(self._special_of[m.group()])
            pos = m.end()
        out.extend(self._pieces(text[pos:]))
        return out

    def encode(self, text: str, max_length: int | None = None) -> list[int]:
        """Original vocabulary ids, `<s>`/`</s>` added; truncation keeps `</s>`.

        `max_length` below 2 is refused (the reference silently ignores it)."""
        text = check_text(text)
        if max_length is not None and (not isinstance(max_length, int | np.integer) or max_length < 2):
            raise EdgeM3Error(f"max_length {max_length!r}: must be an integer of at least 2")
        ids = [self.bos, *self._segments(text), self.eos]
        if max_length is not None:
            if len(ids) > max_length:
                ids = [*ids[: max_length - 1], self.eos]
        return ids

    def encode_chunks(self, text: str, max_length: int, overlap: int | None = None) -> list[list[int]]:
        """The text split into windows of `max_length - 2` tokens overlapping by `overlap`, each
        with `<s>`/`</s>`, so a long passage is indexed whole rather than truncated
        (docs/index-format.md, "Passages and chunks"). The first chunk is `encode(text, max_length)`."""
        text = check_text(text)
        if isinstance(max_length, bool) or not isinstance(max_length, int | np.integer) or max_length < 3:
            raise EdgeM3Error(f"max_length {max_length!r}: chunks need an integer of at least 3")
        content = self._segments(text)
        spans = chunk_spans(len(content), int(max_length), overlap)
        return [[self.bos, *content[s:e], self.eos] for s, e in spans]

    def encode_batch(self, texts: Sequence[str], max_length: int | None = None) -> list[list[int]]:
        """`encode` of each text."""
        return [self.encode(t, max_length) for t in check_texts(texts)]

    def to_model_ids(self, ids: Sequence[int]) -> list[int]:
        """Rows of the (possibly trimmed) embedding table; identity for a full vocabulary."""
        if self._row is None:
            return list(ids)
        return [int(self._row[i]) for i in ids]

    def pad(self, ids: Sequence[int], length: int) -> tuple[np.ndarray, np.ndarray]:
        """int32 ids padded with `<pad>` to `length`, and the attention mask."""
        return pad_ids(ids, length, self.pad_id)

    def encode_padded_batch(self, texts: Sequence[str], length: int) -> tuple[np.ndarray, np.ndarray]:
        """`[B, length]` ids and mask, each text truncated to `length`."""
        rows = [self.pad(self.to_model_ids(self.encode(t, length)), length) for t in check_texts(texts)]
        if not rows:
            return np.zeros((0, length), np.int32), np.zeros((0, length), np.int32)
        return np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])


"""The device-side tokenizer: the bundled SentencePiece model plus XLM-R's fairseq id mapping.

Its ids equal those of the reference for every text: FlagEmbedding's
`AutoTokenizer.from_pretrained(snapshot)`, i.e. transformers 5.x's XLMRobertaTokenizer. That
class rebuilds its pipeline from code even when the snapshot carries a tokenizer.json (only
the vocabulary, the charsmap and the added tokens come from the file), so the reference is:

1. split the raw text on the special-token strings (`<s>`, `<pad>`, `</s>`, `<unk>`,
   `<mask>`; leftmost-longest): each becomes its id, the text between is tokenized alone;
2. SentencePiece's precompiled charsmap, one extended grapheme cluster at a time, a cluster
   under 6 bytes replaced whole (edge_m3.tokenizer.normalizer; clusters cut by edge_m3.tokenizer.graphemes as
   the reference's Unicode 16 segmentation cuts them);
3. split on Unicode whitespace (runs, leading and trailing whitespace vanish), "▁" before
   each word, and a new piece boundary before every "▁";
4. unigram Viterbi per word over XLM-R's fairseq vocabulary, the specials included at score 0
   (a full-width "＜mask＞" normalises to "<mask>" and is the mask token), with the
   reference's tie-breaking (edge_m3.tokenizer.unigram).

The SentencePiece library's own `encode` differs at steps 1, 2 and 4: it composes NFD Hangul,
Japanese dakuten, Vietnamese and Greek stacks across graphemes, and on XLM-R's real vocabulary
"s74ddd1b" gives `▁s 74 dd d 1 b` where the reference gives `▁s 74 d dd 1 b` (equal-score
paths). Preprocessing the text fixes steps 1-3 but never step 4, so the pieces and scores come
from the bundled model file and the search follows the reference; an app must do the same
(a SentencePiece `encode` call alone is not enough). The id mapping (special ids and strings,
offset) comes from the manifest, never from scattered constants.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.errors import EdgeM3Error
from edge_m3.spec import CHUNK_OVERLAP_PERCENT, VOCAB_MAP, XLMR_SPECIAL_TOKENS, TokenizerSpec, file_name
from edge_m3.tokenizer.spmodel import (
    CONTROL,
    UNKNOWN,
    USER_DEFINED,
    ModelFileError,
    SentencePieceModel,
    read_model,
)

_WORD_CACHE_SIZE = 100_000


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


def read_sentencepiece(sp_model_path: Path) -> SentencePieceModel:
    """The model file's pieces, scores, types and charsmap (edge_m3.tokenizer.spmodel)."""
    path = Path(sp_model_path)
    if not path.is_file():
        raise EdgeM3Error(f"{path}: missing SentencePiece model")
    try:
        return read_model(path.read_bytes())
    except OSError as exc:
        raise EdgeM3Error(f"{path}: cannot read ({exc.strerror})") from None
    except ModelFileError as exc:
        raise EdgeM3Error(f"{path}: not a SentencePiece model ({exc})") from None


def spec_for_sentencepiece(sp_model: Path | SentencePieceModel) -> TokenizerSpec:
    """fairseq's layout: <s>=0 <pad>=1 </s>=2 <unk>=3, pieces +1, <mask> last.

    <s> </s> <unk> are also SentencePiece pieces 1, 2, 0.
    """
    where = "SentencePiece model" if isinstance(sp_model, SentencePieceModel) else str(sp_model)
    model = sp_model if isinstance(sp_model, SentencePieceModel) else read_sentencepiece(sp_model)
    n = len(model)
    pieces = model.pieces[:3]
    if pieces != ["<unk>", "<s>", "</s>"] or model.types[0] != UNKNOWN:
        raise EdgeM3Error(f"{where}: first pieces are {pieces}, expected XLM-R's "
                          "['<unk>', '<s>', '</s>']")
    tokens = {"bos": pieces[1], "pad": XLMR_SPECIAL_TOKENS["pad"], "eos": pieces[2],
              "unk": pieces[0], "mask": XLMR_SPECIAL_TOKENS["mask"]}
    return TokenizerSpec(special_ids={"bos": 0, "pad": 1, "eos": 2, "unk": 3, "mask": n + 1},
                         sp_unk_id=0, id_offset=1, vocab_size=n + 2, special_tokens=tokens)


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


def _check_texts(texts: Any) -> Sequence[Any]:
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


class Tokenizer:
    """`encode` -> `<s> pieces </s>` in model ids; `pad` -> fixed-length ids and mask."""

    def __init__(self, sp_model_path: Path, spec: TokenizerSpec | None = None) -> None:
        from edge_m3.tokenizer.normalizer import CharsMap
        from edge_m3.tokenizer.unigram import UnigramModel

        path = Path(sp_model_path)
        model = read_sentencepiece(path)
        self.spec = spec or spec_for_sentencepiece(model)
        try:
            self.unigram = UnigramModel(model, added=list(self.spec.special_tokens.values()))
            blob = model.precompiled_charsmap
            self.charsmap = CharsMap(blob, str(path)) if blob else None
        except ValueError as exc:
            raise EdgeM3Error(f"{path}: not a SentencePiece model ({exc})") from None
        self.piece_count = len(model)
        top = self.piece_count - 1 + self.spec.id_offset
        if top >= self.spec.vocab_size:
            raise EdgeM3Error(f"{path}: {self.piece_count} pieces map past the manifest's "
                              f"vocab_size {self.spec.vocab_size} (wrong SentencePiece model?)")
        s = self.spec.special_ids
        outside = {k: v for k, v in s.items() if not 0 <= int(v) < self.spec.vocab_size}
        if outside:  # the model's embedding table has vocab_size rows: an id past it reads past it
            raise EdgeM3Error(f"manifest.json: tokenizer special_ids {outside} lie outside vocab_size "
                              f"{self.spec.vocab_size}")
        odd = [(i, t) for i, t in enumerate(self.unigram.types) if i > 2 and t in (CONTROL, USER_DEFINED)]
        if odd or self.spec.sp_unk_id != self.unigram.unk_id:
            raise EdgeM3Error(f"{path}: not an XLM-R SentencePiece model (control or user-defined "
                              f"pieces past </s>: {odd[:3]}, or <unk> not at id {self.spec.sp_unk_id})")
        # SentencePiece id (then the added specials) -> model id; the specials' strings map to
        # their ids wherever the reference's vocabulary holds them.
        off = self.spec.id_offset
        self._id_of = [p + off for p in range(len(self.unigram.scores))]
        self._id_of[self.unigram.unk_id] = int(s["unk"])
        for key, string in self.spec.special_tokens.items():
            if string in self.unigram.ids:
                self._id_of[self.unigram.ids[string]] = int(s[key])
        self.bos, self.eos, self.pad_id, self.unk = s["bos"], s["eos"], s["pad"], s["unk"]
        # Special-token strings in the text -> their ids (the reference's added tokens).
        self._special_of = {t: int(s[k]) for k, t in self.spec.special_tokens.items() if t}
        alternatives = sorted(self._special_of, key=len, reverse=True)  # leftmost-longest
        self._special_re = re.compile("|".join(map(re.escape, alternatives))) if alternatives else None
        self._word_ids: dict[str, list[int]] = {}
        self._row: np.ndarray | None = self.read_row_map(path.parent) if self.spec.vocab_map else None

    def read_row_map(self, folder: Path) -> np.ndarray:
        """The manifest's vocab_map file in the bundle folder `folder` (a trimmed vocabulary):
        original id -> table row, for every id `encode` can give."""
        name = file_name((self.spec.vocab_map or {}).get("file"), "tokenizer.vocab_map.file")
        top = self.piece_count - 1 + self.spec.id_offset
        reach = max(top, *(int(i) for i in self.spec.special_ids.values())) + 1  # the largest id encode gives
        return _load_row_map(folder / name, self.spec, reach)

    def with_row_map(self, folder: Path) -> Tokenizer:
        """This tokenizer reading its rows from the vocab_map file in `folder` instead (nothing
        else read again): the row map alone, as the tokenizer reads it at open (issue 38's
        `vocab_map` fuzz target)."""
        other = copy.copy(self)
        other._row = self.read_row_map(folder)
        return other

    def words(self, text: str) -> list[str]:
        """The text as the reference tokenizer sees it: charsmap per grapheme, then split on
        Unicode whitespace (see edge_m3.tokenizer.normalizer for why SentencePiece's own pass differs)."""
        from edge_m3.tokenizer.normalizer import split_whitespace

        return split_whitespace(self.charsmap.normalize(text) if self.charsmap else text)

    def _word(self, word: str) -> list[int]:
        """One word's ids: a lattice with the reference's tie-breaking (edge_m3.tokenizer.unigram)."""
        return [self._id_of[p] for p in self.unigram.encode_words([word])]

    def _pieces(self, text: str) -> list[int]:
        # Each word's ids (each kind's `_word`); words repeat, so their ids are cached (as the
        # reference caches them).
        out: list[int] = []
        cache = self._word_ids
        for word in self.words(text):
            ids = cache.get(word)
            if ids is None:
                ids = self._word(word)
                if len(cache) >= _WORD_CACHE_SIZE:
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
        return [self.encode(t, max_length) for t in _check_texts(texts)]

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
        rows = [self.pad(self.to_model_ids(self.encode(t, length)), length) for t in _check_texts(texts)]
        if not rows:
            return np.zeros((0, length), np.int32), np.zeros((0, length), np.int32)
        return np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])


def _load_row_map(path: Path, spec: TokenizerSpec, reach: int) -> np.ndarray:
    """Original id -> row of the trimmed embedding table (see edge_m3.tokenizer.vocab), for the
    ids below `reach`."""
    import json

    from edge_m3.tokenizer.vocab import row_map

    try:
        kept = json.loads(path.read_text(encoding="utf-8"))["kept_ids"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise EdgeM3Error(f"{path}: unreadable vocabulary map ({exc})") from None
    if not isinstance(kept, list) or not kept:
        raise EdgeM3Error(f"{path}: kept_ids must be a non-empty list of integers")
    if len(kept) != spec.model_rows:  # a row past the bundled table would be read past its end
        raise EdgeM3Error(f"{path}: {len(kept)} kept ids, the manifest's vocab_map says {spec.model_rows} rows")
    try:
        return row_map(kept, spec.special_ids, spec.vocab_size, reach)
    except EdgeM3Error as exc:
        raise EdgeM3Error(f"{path}: {str(exc).removeprefix(VOCAB_MAP + ': ')}") from None

"""Unigram segmentation of one word, tie for tie as the reference tokenizer does it.

The bundled SentencePiece model supplies the pieces and scores; the search is the reference
(`tokenizers`) Viterbi: positions left to right, candidate pieces shortest first, a later
candidate replaces an earlier one only with a strictly higher score, characters with no
single-character piece become `<unk>` (min score - 10), and runs of `<unk>` fuse into one.
SentencePiece's own encoder breaks equal-score ties differently ("0111" -> 0|1|11 vs 0|11|1),
so the device pipeline segments with this and keeps SentencePiece only for its model file.

The reference's vocabulary is XLM-R's fairseq one: `<s> <pad> </s> <unk>` at score 0, every
SentencePiece piece past the first three (whatever its type), then `<mask>` at score 0. All of
them can match inside a word: a full-width "＜mask＞" normalises to "<mask>" and becomes the
mask token. `added` lists the specials' strings; those the SentencePiece model lacks (`<pad>`,
`<mask>`) get the ids after the model's pieces.
"""

from __future__ import annotations

from collections.abc import Sequence

from edge_m3.tokenizer.spmodel import UNKNOWN, SentencePieceModel

UNK_PENALTY = 10.0
META = "\u2581"  # SentencePiece's visible space


class UnigramModel:
    """Pieces, scores and the Viterbi search over them; ids are SentencePiece ids, then `added`."""

    def __init__(self, model: SentencePieceModel, added: Sequence[str] = ()) -> None:
        self.pieces = list(model.pieces)
        self.types = list(model.types)
        n = len(self.pieces)
        unknown = [i for i, t in enumerate(self.types) if t == UNKNOWN]
        if n < 3 or unknown != [0]:
            raise ValueError("not an XLM-R-style model: expected exactly one <unk> piece, at id 0")
        self.unk_id = 0
        # The reference scores fairseq's specials (ids 0..2 here, and `added`) at 0.
        self.scores = [0.0] * 3 + [float(x) for x in model.scores[3:]]
        self.ids: dict[str, int] = {}
        for i, piece in enumerate(self.pieces):
            if piece in self.ids:
                raise ValueError(f"piece {piece!r} occurs twice in the model")
            self.ids[piece] = i
        for piece in added:
            if piece not in self.ids:
                self.ids[piece] = len(self.scores)
                self.scores.append(0.0)
        self.min_score = min(self.scores)
        self.unk_score = self.min_score - UNK_PENALTY
        self.max_len = max((len(p) for p in self.ids), default=1)

    def encode_word(self, word: str) -> list[int]:
        """Best segmentation of one pre-token (already carrying its leading "▁")."""
        n = len(word)
        score = [0.0] * (n + 1)
        start_of: list[int | None] = [None] * (n + 1)
        piece_id = [0] * (n + 1)
        ids, scores = self.ids, self.scores
        for start in range(n):
            base = score[start]
            single = False
            for end in range(start + 1, min(n, start + self.max_len) + 1):
                pid = ids.get(word[start:end])
                if pid is None:
                    continue
                cand = base + scores[pid]
                if start_of[end] is None or cand > score[end]:
                    score[end], start_of[end], piece_id[end] = cand, start, pid
                if end == start + 1:
                    single = True
            if not single:
                end = start + 1
                cand = base + self.unk_score
                if start_of[end] is None or cand > score[end]:
                    score[end], start_of[end], piece_id[end] = cand, start, self.unk_id
        out: list[int] = []
        end = n
        while end > 0:
            start = start_of[end]
            assert start is not None
            pid = piece_id[end]
            if not (pid == self.unk_id and out and out[-1] == self.unk_id):  # fuse <unk> runs
                out.append(pid)
            end = start
        out.reverse()
        return out

    def encode_words(self, words: Sequence[str]) -> list[int]:
        """Pieces of whitespace-split words, pre-tokenized as the reference's Metaspace does:
        "▁" prepended unless already there, then split before every "▁"."""
        out: list[int] = []
        for word in words:
            if not word.startswith(META):
                word = META + word
            for part in word.split(META)[1:]:
                out.extend(self.encode_word(META + part))
        return out

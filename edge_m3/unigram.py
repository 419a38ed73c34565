"""Unigram segmentation of one word, tie for tie as the reference tokenizer does it.

The bundled SentencePiece model supplies the pieces and scores; the search is the reference
(`tokenizers`) Viterbi: positions left to right, candidate pieces shortest first, a later
candidate replaces an earlier one only with a strictly higher score, characters with no
single-character piece become `<unk>` (min score - 10), and runs of `<unk>` fuse into one.
SentencePiece's own encoder breaks equal-score ties differently ("0111" -> 0|1|11 vs 0|11|1),
so the device pipeline segments with this and keeps SentencePiece only for its model file.
"""

from __future__ import annotations

from collections.abc import Sequence

UNK_PENALTY = 10.0
META = "\u2581"  # SentencePiece's visible space
# SentencePiece piece types that the reference puts in its vocabulary trie.
_NORMAL, _USER_DEFINED = 1, 4


class UnigramModel:
    """Pieces, scores and the Viterbi search over them; ids are SentencePiece ids."""

    def __init__(self, model_bytes: bytes) -> None:
        from sentencepiece import sentencepiece_model_pb2 as pb

        proto = pb.ModelProto()
        proto.ParseFromString(model_bytes)
        self.ids: dict[str, int] = {}
        self.scores: list[float] = []
        self.unk_id = 0
        for i, piece in enumerate(proto.pieces):
            self.scores.append(float(piece.score))
            if piece.type == 2:  # UNKNOWN
                self.unk_id = i
            elif piece.type in (_NORMAL, _USER_DEFINED):
                self.ids.setdefault(piece.piece, i)
        # The reference's vocabulary also holds the specials at score 0: they count for min.
        self.min_score = min([0.0, *(self.scores[i] for i in self.ids.values())])
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

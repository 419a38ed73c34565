"""The device-side tokenizer: the bundled SentencePiece model plus XLM-R's fairseq id mapping.

Its ids must equal those of `transformers`' XLMRobertaTokenizer (what FlagEmbedding uses)
built from the same `sentencepiece.bpe.model`, for any text. The SentencePiece library's own
encoder does not guarantee that (grapheme-wise normalisation, Viterbi ties: see
edge_m3.normalizer and edge_m3.unigram), so the pieces and scores come from the model file and
the normalisation and search follow the reference; the platform kits mirror these steps.
The mapping (special ids, offset) comes from the manifest, never from scattered constants.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.errors import EdgeM3Error


class InvalidTextError(EdgeM3Error, ValueError):
    """Text that no tokenizer can take (not a string, or not encodable as UTF-8)."""


@dataclass(frozen=True)
class TokenizerSpec:
    """XLM-R's mapping from SentencePiece ids to model ids, as recorded in the manifest."""

    special_ids: Mapping[str, int]
    sp_unk_id: int = 0
    id_offset: int = 1
    vocab_size: int = 0
    vocab_map: Mapping[str, Any] | None = field(default=None)

    @classmethod
    def for_sentencepiece(cls, sp_model_path: Path) -> TokenizerSpec:
        """fairseq's layout: <s>=0 <pad>=1 </s>=2 <unk>=3, pieces +1, <mask> last."""
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(sp_model_path))
        n = sp.get_piece_size()
        pieces = [sp.id_to_piece(i) for i in range(min(n, 3))]
        if pieces != ["<unk>", "<s>", "</s>"]:
            raise EdgeM3Error(f"{sp_model_path}: first pieces are {pieces}, expected XLM-R's "
                              "['<unk>', '<s>', '</s>']")
        return cls(special_ids={"bos": 0, "pad": 1, "eos": 2, "unk": 3, "mask": n + 1},
                   sp_unk_id=sp.unk_id(), id_offset=1, vocab_size=n + 2)

    @classmethod
    def from_manifest(cls, d: Mapping[str, Any]) -> TokenizerSpec:
        try:
            special = {k: int(d["special_ids"][k]) for k in ("bos", "pad", "eos", "unk", "mask")}
            return cls(special_ids=special, sp_unk_id=int(d["sp_unk_id"]),
                       id_offset=int(d["id_offset"]), vocab_size=int(d["vocab_size"]),
                       vocab_map=d.get("vocab_map"))
        except (KeyError, TypeError, ValueError) as exc:
            raise EdgeM3Error(f"manifest.json: bad tokenizer entry ({exc!r})") from None

    def to_manifest(self) -> dict[str, Any]:
        return {"kind": "xlmr-sentencepiece", "special_ids": dict(self.special_ids),
                "sp_unk_id": self.sp_unk_id, "id_offset": self.id_offset,
                "vocab_size": self.vocab_size, "vocab_map": self.vocab_map}


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


class Tokenizer:
    """`encode` -> `<s> pieces </s>` in model ids; `pad` -> fixed-length ids and mask."""

    def __init__(self, sp_model_path: Path, spec: TokenizerSpec | None = None) -> None:
        import sentencepiece as spm

        path = Path(sp_model_path)
        if not path.is_file():
            raise EdgeM3Error(f"{path}: missing SentencePiece model")
        from edge_m3.normalizer import CharsMap, charsmap_of
        from edge_m3.unigram import UnigramModel

        try:
            self.sp = spm.SentencePieceProcessor(model_file=str(path))
            blob = path.read_bytes()
            self.unigram = UnigramModel(blob)
            charsmap = charsmap_of(blob)
            self.charsmap = CharsMap(charsmap) if charsmap else None
        except Exception as exc:
            raise EdgeM3Error(f"{path}: not a SentencePiece model ({exc})") from None
        self.spec = spec or TokenizerSpec.for_sentencepiece(path)
        s = self.spec.special_ids
        self.bos, self.eos, self.pad_id, self.unk = s["bos"], s["eos"], s["pad"], s["unk"]
        self._row: np.ndarray | None = None
        vm = self.spec.vocab_map
        if vm:
            self._row = _load_row_map(path.parent / vm["file"], self.spec)

    def words(self, text: str) -> list[str]:
        """The text as the reference tokenizer sees it: charsmap per grapheme, then split on
        Unicode whitespace (see edge_m3.normalizer for why SentencePiece's own pass differs)."""
        from edge_m3.normalizer import split_whitespace

        return split_whitespace(self.charsmap.normalize(text) if self.charsmap else text)

    def _pieces(self, text: str) -> list[int]:
        # One lattice per word with the reference's tie-breaking (edge_m3.unigram).
        off, sp_unk = self.spec.id_offset, self.spec.sp_unk_id
        return [self.unk if p == sp_unk else p + off
                for p in self.unigram.encode_words(self.words(text))]

    def encode(self, text: str, max_length: int | None = None) -> list[int]:
        """Original vocabulary ids, `<s>`/`</s>` added; truncation keeps `</s>`."""
        ids = [self.bos, *self._pieces(check_text(text)), self.eos]
        if max_length is not None:
            if max_length < 2:
                raise EdgeM3Error(f"max_length {max_length}: must be at least 2")
            if len(ids) > max_length:
                ids = [*ids[: max_length - 1], self.eos]
        return ids

    def encode_batch(self, texts: Sequence[str], max_length: int | None = None) -> list[list[int]]:
        return [self.encode(t, max_length) for t in texts]

    def to_model_ids(self, ids: Sequence[int]) -> list[int]:
        """Rows of the (possibly trimmed) embedding table; identity for a full vocabulary."""
        if self._row is None:
            return list(ids)
        return [int(self._row[i]) for i in ids]

    def pad(self, ids: Sequence[int], length: int) -> tuple[np.ndarray, np.ndarray]:
        """int32 ids padded with `<pad>` to `length`, and the attention mask."""
        if len(ids) > length:
            raise EdgeM3Error(f"{len(ids)} tokens do not fit length {length}")
        out = np.full(length, self.pad_id, dtype=np.int32)
        out[: len(ids)] = ids
        mask = np.zeros(length, dtype=np.int32)
        mask[: len(ids)] = 1
        return out, mask

    def encode_padded_batch(self, texts: Sequence[str], length: int) -> tuple[np.ndarray, np.ndarray]:
        """`[B, length]` ids and mask, each text truncated to `length`."""
        rows = [self.pad(self.to_model_ids(self.encode(t, length)), length) for t in texts]
        return np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])


def _load_row_map(path: Path, spec: TokenizerSpec) -> np.ndarray:
    """Original id -> row of the trimmed embedding table (see edge_m3.vocab)."""
    import json

    from edge_m3.vocab import row_map

    try:
        kept = json.loads(path.read_text(encoding="utf-8"))["kept_ids"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EdgeM3Error(f"{path}: unreadable vocabulary map ({exc})") from None
    return row_map(kept, spec.special_ids, spec.vocab_size)

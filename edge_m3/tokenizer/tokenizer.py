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
from pathlib import Path

import numpy as np

from edge_m3.errors import EdgeM3Error
from edge_m3.spec import VOCAB_MAP, XLMR_SPECIAL_TOKENS, TokenizerSpec, file_name
from edge_m3.tokenizer.base import DeviceTokenizer
from edge_m3.tokenizer.spmodel import (
    CONTROL,
    UNKNOWN,
    USER_DEFINED,
    ModelFileError,
    SentencePieceModel,
    read_model,
)


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


class XlmrTokenizer(DeviceTokenizer):
    """XLM-R's (kind `xlmr-sentencepiece`): `encode` -> `<s> pieces </s>` in model ids, over the
    bundled SentencePiece model; the rest of the interface is DeviceTokenizer's. Its vocabulary
    may be trimmed (`_row`: the manifest's vocab_map)."""

    def __init__(self, sp_model_path: Path, spec: TokenizerSpec | None = None) -> None:
        from edge_m3.tokenizer.normalizer import CharsMap
        from edge_m3.tokenizer.unigram import UnigramModel

        path = Path(sp_model_path)
        model = read_sentencepiece(path)
        spec = spec or spec_for_sentencepiece(model)
        try:
            self.unigram = UnigramModel(model, added=list(spec.special_tokens.values()))
            blob = model.precompiled_charsmap
            self.charsmap = CharsMap(blob, str(path)) if blob else None
        except ValueError as exc:
            raise EdgeM3Error(f"{path}: not a SentencePiece model ({exc})") from None
        self.piece_count = len(model)
        top = self.piece_count - 1 + spec.id_offset
        if top >= spec.vocab_size:
            raise EdgeM3Error(f"{path}: {self.piece_count} pieces map past the manifest's "
                              f"vocab_size {spec.vocab_size} (wrong SentencePiece model?)")
        s = spec.special_ids
        outside = {k: v for k, v in s.items() if not 0 <= int(v) < spec.vocab_size}
        if outside:  # the model's embedding table has vocab_size rows: an id past it reads past it
            raise EdgeM3Error(f"manifest.json: tokenizer special_ids {outside} lie outside vocab_size "
                              f"{spec.vocab_size}")
        odd = [(i, t) for i, t in enumerate(self.unigram.types) if i > 2 and t in (CONTROL, USER_DEFINED)]
        if odd or spec.sp_unk_id != self.unigram.unk_id:
            raise EdgeM3Error(f"{path}: not an XLM-R SentencePiece model (control or user-defined "
                              f"pieces past </s>: {odd[:3]}, or <unk> not at id {spec.sp_unk_id})")
        # Special-token strings in the text -> their ids (the reference's added tokens).
        super().__init__(spec, {t: int(s[k]) for k, t in spec.special_tokens.items() if t})
        # SentencePiece id (then the added specials) -> model id; the specials' strings map to
        # their ids wherever the reference's vocabulary holds them.
        off = spec.id_offset
        self._id_of = [p + off for p in range(len(self.unigram.scores))]
        self._id_of[self.unigram.unk_id] = int(s["unk"])
        for key, string in spec.special_tokens.items():
            if string in self.unigram.ids:
                self._id_of[self.unigram.ids[string]] = int(s[key])
        if spec.vocab_map:
            self._row = self.read_row_map(path.parent)

    def read_row_map(self, folder: Path) -> np.ndarray:
        """The manifest's vocab_map file in the bundle folder `folder` (a trimmed vocabulary):
        original id -> table row, for every id `encode` can give."""
        name = file_name((self.spec.vocab_map or {}).get("file"), "tokenizer.vocab_map.file")
        top = self.piece_count - 1 + self.spec.id_offset
        reach = max(top, *(int(i) for i in self.spec.special_ids.values())) + 1  # the largest id encode gives
        return _load_row_map(folder / name, self.spec, reach)

    def with_row_map(self, folder: Path) -> XlmrTokenizer:
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


Tokenizer = XlmrTokenizer  # the name the public API and the docs have always used for XLM-R's


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

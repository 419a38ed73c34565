"""sentencepiece.bpe.model read without the SentencePiece library: a small protobuf reader.

The device tokenizer needs four things from the model file: each piece's string, score and
type, the normalizer's precompiled charsmap, and the trainer's model type (only unigram is
tokenized the reference's way). Reading them here keeps the runtime install pure Python: no
`sentencepiece` (a C++ extension without wheels for every device) and no `protobuf`. Field
numbers are those of SentencePiece's `sentencepiece_model.proto`; every other field is skipped,
so files written by newer trainers still load. tests/test_tokenizer.py compares what this
reads with the SentencePiece library's own parser on three vocabularies.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# sentencepiece_model.proto: ModelProto fields
_PIECES, _TRAINER_SPEC, _NORMALIZER_SPEC = 1, 2, 3
# ModelProto.SentencePiece fields
_PIECE, _SCORE, _TYPE = 1, 2, 3
# TrainerSpec.model_type (field 3) and NormalizerSpec.precompiled_charsmap (field 2)
_MODEL_TYPE, _CHARSMAP = 3, 2
# Protobuf wire types
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5

# ModelProto.SentencePiece.Type and TrainerSpec.ModelType values (and the proto's defaults).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
UNIGRAM = 1
MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}


class ModelFileError(ValueError):
    """Bytes that are not a SentencePiece model (the caller names the file)."""


@dataclass(frozen=True)
class SentencePieceModel:
    """What tokenization reads from a model file, nothing more."""

    pieces: list[str]
    scores: list[float]
    types: list[int]
    precompiled_charsmap: bytes
    model_type: int = UNIGRAM

    def __len__(self) -> int:
        return len(self.pieces)


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ModelFileError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ModelFileError("varint longer than 10 bytes")


def _next_field(buf: bytes, pos: int, end: int) -> tuple[int, int, Any, int]:
    """(field number, wire type, value, next position) of the field at `pos`: an int for
    varints, (start, end) for length-delimited fields, the raw bytes for fixed-size ones."""
    key, pos = _varint(buf, pos)
    field, wire = key >> 3, key & 7
    if field == 0:
        raise ModelFileError("field number 0")
    if wire == _VARINT:
        value, pos = _varint(buf, pos)
        if pos > end:  # issue 38: a varint crossing its message's end was read from the next one
            raise ModelFileError(f"field {field} runs past the end of its message")
        return field, wire, value, pos
    if wire == _LEN:
        size, pos = _varint(buf, pos)
        if pos + size > end:
            raise ModelFileError(f"field {field} runs past the end of its message")
        return field, wire, (pos, pos + size), pos + size
    if wire in (_I32, _I64):
        size = 4 if wire == _I32 else 8
        if pos + size > end:
            raise ModelFileError(f"field {field} runs past the end of its message")
        return field, wire, buf[pos:pos + size], pos + size
    # groups (3, 4) are not in this schema; 6 and 7 do not exist
    raise ModelFileError(f"field {field} has wire type {wire}")


def _fields(buf: bytes, start: int, end: int) -> Iterator[tuple[int, int, Any]]:
    """Every field of one message, in order."""
    pos = start
    while pos < end:
        field, wire, value, pos = _next_field(buf, pos, end)
        yield field, wire, value


def _expect(field: int, wire: int, want: int, what: str) -> None:
    if wire != want:
        raise ModelFileError(f"{what} (field {field}) has wire type {wire}, expected {want}")


_F32 = struct.Struct("<f")
_INT32_MAX = 2**31 - 1


def _piece(buf: bytes, start: int, end: int) -> tuple[str, float, int]:
    # The usual layout, read directly (250,002 pieces: the general loop takes 4x longer):
    # piece (tag 0x0a, length < 128), score (tag 0x15), type (tag 0x18, one byte) if not NORMAL.
    if end - start > 2 and buf[start] == 0x0A and buf[start + 1] < 0x80:
        mid = start + 2 + buf[start + 1]
        if mid + 5 <= end and buf[mid] == 0x15 and mid > start + 2:
            after = mid + 5
            kind = NORMAL
            if after + 2 == end and buf[after] == 0x18 and buf[after + 1] < 0x80:
                kind, after = buf[after + 1], end
            if after == end:
                try:
                    return buf[start + 2:mid].decode("utf-8"), _F32.unpack_from(buf, mid + 1)[0], kind
                except UnicodeDecodeError:
                    raise ModelFileError("a piece is not UTF-8") from None
    piece, score, kind = None, 0.0, NORMAL
    for field, wire, value in _fields(buf, start, end):
        if field == _PIECE:
            _expect(field, wire, _LEN, "piece")
            try:
                piece = buf[value[0]:value[1]].decode("utf-8")
            except UnicodeDecodeError:
                raise ModelFileError("a piece is not UTF-8") from None
        elif field == _SCORE:
            _expect(field, wire, _I32, "score")
            (score,) = _F32.unpack(value)
        elif field == _TYPE:
            _expect(field, wire, _VARINT, "type")
            if value > _INT32_MAX:  # an enum is an int32 (issue 38: the kits' Int; -1 is 2^64 - 1 here)
                raise ModelFileError(f"a piece type {value} is past int32")
            kind = value
    if not piece:
        raise ModelFileError("a piece has no string")
    return piece, score, kind


def read_model(data: bytes) -> SentencePieceModel:
    """Parse a serialized `ModelProto`; ModelFileError (one line) when it is not one."""
    buf = bytes(data)
    pieces: list[str] = []
    scores: list[float] = []
    types: list[int] = []
    charsmap, model_type = b"", UNIGRAM
    pos, end = 0, len(buf)
    while pos < end:
        if buf[pos] == 0x0A and pos + 1 < end and buf[pos + 1] < 0x80:  # a short piece: hot path
            field, wire, value = _PIECES, _LEN, (pos + 2, pos + 2 + buf[pos + 1])
            pos = value[1]
            if pos > end:
                raise ModelFileError("a piece runs past the end of the file")
        else:
            field, wire, value, pos = _next_field(buf, pos, end)
        if field == _PIECES:
            _expect(field, wire, _LEN, "pieces")
            piece, score, kind = _piece(buf, *value)
            pieces.append(piece)
            scores.append(score)
            types.append(kind)
        elif field == _TRAINER_SPEC:
            _expect(field, wire, _LEN, "trainer_spec")
            for f, w, v in _fields(buf, *value):
                if f == _MODEL_TYPE:
                    _expect(f, w, _VARINT, "trainer_spec.model_type")
                    model_type = v
        elif field == _NORMALIZER_SPEC:
            _expect(field, wire, _LEN, "normalizer_spec")
            for f, w, v in _fields(buf, *value):
                if f == _CHARSMAP:
                    _expect(f, w, _LEN, "normalizer_spec.precompiled_charsmap")
                    charsmap = buf[v[0]:v[1]]
    if not pieces:
        raise ModelFileError("no pieces")
    if model_type != UNIGRAM:
        raise ModelFileError(f"model type {MODEL_TYPES.get(model_type, model_type)}, "
                             "expected unigram (XLM-R's)")
    return SentencePieceModel(pieces, scores, types, charsmap, model_type)

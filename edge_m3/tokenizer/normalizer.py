"""The reference tokenizer's text normalisation, reproduced so device ids match it exactly.

FlagEmbedding tokenizes with the `tokenizers` library, whose Precompiled normalizer applies
SentencePiece's charsmap one extended grapheme cluster at a time (a cluster under 6 bytes
as a whole, otherwise character by character; clusters as edge_m3.tokenizer.graphemes cuts them), then
splits on Unicode whitespace. The
SentencePiece library instead takes the longest charsmap match anywhere, so it composes
sequences the reference leaves alone: NFD Hangul jamo, Vietnamese and Greek stacked
accents, Indic vowel signs. Same model file, different ids. The device pipeline therefore
normalises like the reference, then segments with edge_m3.tokenizer.unigram.
"""

from __future__ import annotations

import struct

from edge_m3.errors import EdgeM3Error
from edge_m3.tokenizer.graphemes import graphemes

# Rust's char::is_whitespace (Unicode White_Space): what the reference's WhitespaceSplit uses.
# Python's str.isspace() differs (it adds U+001C..U+001F), so the set is spelled out.
WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
# Grapheme clusters shorter than this many UTF-8 bytes are looked up whole.
WHOLE_GRAPHEME_BYTES = 6


class CharsMapError(EdgeM3Error, ValueError):
    """A corrupt charsmap, met where a lookup would read past the trie or the strings."""


class CharsMap:
    """SentencePiece's precompiled charsmap: a darts-clone trie plus replacement strings.

    The trie is only checked as it is walked (a full check would visit every node at load):
    an offset past its end or a replacement that is not UTF-8 is a CharsMapError naming `where`.
    """

    def __init__(self, blob: bytes, where: str = "precompiled charsmap") -> None:
        self.where = where
        if len(blob) < 4:
            raise ValueError("charsmap too short")
        (trie_size,) = struct.unpack_from("<I", blob, 0)
        if not trie_size or trie_size % 4 or 4 + trie_size > len(blob):
            raise ValueError("charsmap trie size is corrupt")
        self.units = struct.unpack_from(f"<{trie_size // 4}I", blob, 4)
        self.normalized = blob[4 + trie_size:]
        self._cache: dict[str, str | None] = {}

    @staticmethod
    def _offset(unit: int) -> int:
        return (unit >> 10) << ((unit & (1 << 9)) >> 6)

    def _first_prefix_value(self, key: bytes) -> int | None:
        """Value of the shortest trie key that is a prefix of `key` (as the reference does)."""
        units = self.units
        pos = self._offset(units[0])
        for c in key:
            if c == 0:
                return None
            pos ^= c
            if pos >= len(units):
                return None
            unit = units[pos]
            if unit & 0x800000FF != c:
                return None
            pos ^= self._offset(unit)
            if (unit >> 8) & 1:
                if pos >= len(units):
                    raise CharsMapError(f"{self.where}: corrupt charsmap (a value past the trie's end)")
                return units[pos] & 0x7FFFFFFF
        return None

    def transform(self, chunk: str) -> str | None:
        """The replacement for a chunk whose shortest charsmap key matches, else None."""
        if chunk in self._cache:
            return self._cache[chunk]
        start = self._first_prefix_value(chunk.encode("utf-8"))
        out = None
        if start is not None and start < len(self.normalized):
            end = self.normalized.find(b"\0", start)
            try:
                out = self.normalized[start: end if end >= 0 else None].decode("utf-8")
            except UnicodeDecodeError:
                raise CharsMapError(f"{self.where}: corrupt charsmap (a replacement is not UTF-8)") from None
        if len(self._cache) < 65536:
            self._cache[chunk] = out
        return out

    def normalize(self, text: str) -> str:
        """Grapheme by grapheme, exactly like the reference's Precompiled normalizer (a short
        grapheme is replaced whole by the value of its shortest matching key)."""
        out: list[str] = []
        for grapheme in graphemes(text):
            if len(grapheme.encode("utf-8")) < WHOLE_GRAPHEME_BYTES:
                norm = self.transform(grapheme)
                if norm is not None:
                    out.append(norm)
                    continue
            for ch in grapheme:
                norm = self.transform(ch)
                out.append(ch if norm is None else norm)
        return "".join(out)


def split_whitespace(text: str) -> list[str]:
    """Words between runs of Unicode whitespace (empty words dropped)."""
    words, cur = [], []
    for ch in text:
        if ch in WHITESPACE:
            if cur:
                words.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        words.append("".join(cur))
    return words

"""Extended grapheme clusters exactly as the reference tokenizer cuts them.

The reference's Precompiled normalizer walks the graphemes of the Rust crate
unicode-segmentation (1.13 inside tokenizers 0.23: UAX #29 rules of Unicode 16, GB9c
included), and a grapheme under 6 bytes is normalised whole, so every boundary can change
ids. The `regex` module's `\\X` is no stand-in: it joins a virama to a following consonant
without a consonant before it ("\\xa0\\u094d\\u0915" is one cluster there, two in the
reference) and knows Unicode 17's new marks. So this is the crate's rule set (GB3-GB999, with
its state for GB9c, GB11 and GB12/13), over character properties read from `regex`, minus
the marks the reference's Unicode version lacks.
"""

from __future__ import annotations

import regex

# Categories, as in the crate: GCB values plus Extended_Pictographic and InCB=Consonant
# (disjoint from the others in the Unicode data the crate is built from).
(OTHER, CR, LF, CONTROL, EXTEND, ZWJ, RI, PREPEND, SPACING_MARK, L, V, T, LV, LVT, PICTO,
 CONSONANT) = range(16)
_CLASSIFY = regex.compile(
    r"(?P<CR>\r)|(?P<LF>\n)|(?P<CONTROL>\p{GCB=Control})|(?P<ZWJ>\p{GCB=ZWJ})"
    r"|(?P<EXTEND>\p{GCB=Extend})|(?P<RI>\p{GCB=Regional_Indicator})|(?P<PREPEND>\p{GCB=Prepend})"
    r"|(?P<SPACING_MARK>\p{GCB=SpacingMark})|(?P<LVT>\p{GCB=LVT})|(?P<LV>\p{GCB=LV})"
    r"|(?P<L>\p{GCB=L})|(?P<V>\p{GCB=V})|(?P<T>\p{GCB=T})|(?P<PICTO>\p{Extended_Pictographic})"
    r"|(?P<CONSONANT>\p{InCB=Consonant})"
)
_LINKER = regex.compile(r"\p{InCB=Linker}")
_NAMES = {"CR": CR, "LF": LF, "CONTROL": CONTROL, "ZWJ": ZWJ, "EXTEND": EXTEND, "RI": RI,
          "PREPEND": PREPEND, "SPACING_MARK": SPACING_MARK, "LVT": LVT, "LV": LV, "L": L, "V": V,
          "T": T, "PICTO": PICTO, "CONSONANT": CONSONANT}
_LINKER_FLAG = 16
ZWNJ = "\u200c"

# Marks of Unicode 17 (known to `regex`) that the reference's Unicode 16 data lacks: plain
# characters there. Found by probing the reference with every code point; the test
# tests/test_tokenizer.py::test_grapheme_segmentation_matches_the_reference re-probes, so an
# upgrade on either side shows up.
NOT_IN_REFERENCE = frozenset(
    [0x05C8, 0x05C9, 0x0B53, 0x0B54, 0x1ADE, 0x1ADF, *range(0x1AEC, 0x1AF1), *range(0x10ECB, 0x10ED0),
     *range(0x10EF0, 0x10EFA), 0x11DF0, 0x1D127, 0x1D128, 0x1D250, 0x1D251, 0x1D252, 0x1D25B,
     0x1D25C, 0x1D25F, 0x1D280, 0x1D281])

_cache: dict[str, int] = {}


def category(ch: str) -> int:
    """The crate's category of one character, with `_LINKER_FLAG` set for InCB=Linker."""
    cat = _cache.get(ch)
    if cat is None:
        if ord(ch) in NOT_IN_REFERENCE:
            cat = OTHER
        else:
            m = _CLASSIFY.match(ch)
            cat = _NAMES[m.lastgroup] if m else OTHER
            if cat == EXTEND and _LINKER.match(ch):
                cat |= _LINKER_FLAG
        _cache[ch] = cat
    return cat


def _joins(before: int, after: int, incb_linked: bool, emoji_zwj: bool, ris_odd: bool) -> bool:
    """No boundary between two categories, given the state of the text before (UAX #29)."""
    if before == CR and after == LF:  # GB3
        return True
    if before in (CONTROL, CR, LF) or after in (CONTROL, CR, LF):  # GB4, GB5
        return False
    if before == L and after in (L, V, LV, LVT):  # GB6
        return True
    if before in (LV, V) and after in (V, T):  # GB7
        return True
    if before in (LVT, T) and after == T:  # GB8
        return True
    if after in (EXTEND, ZWJ, SPACING_MARK) or before == PREPEND:  # GB9, GB9a, GB9b
        return True
    if after == CONSONANT:  # GB9c
        return incb_linked
    if before == ZWJ and after == PICTO:  # GB11
        return emoji_zwj
    if before == RI and after == RI:  # GB12, GB13
        return ris_odd
    return False  # GB999


def graphemes(text: str) -> list[str]:
    """The text cut into the reference's extended grapheme clusters."""
    if text.isascii() and "\r\n" not in text:
        return list(text)  # ASCII clusters are single characters, CR LF aside
    out: list[str] = []
    start = 0
    before = -1
    # The crate's state: conjunct run (GB9c), pictographic run and armed ZWJ (GB11), RI parity.
    incb_run = incb_linked = extpic_run = emoji_zwj = ris_odd = False
    for i, ch in enumerate(text):
        raw = category(ch)
        cat = raw & 15
        if before >= 0 and not _joins(before, cat, incb_linked, emoji_zwj, ris_odd):
            out.append(text[start:i])
            start = i
        if cat == EXTEND:
            if incb_run and ch != ZWNJ:
                incb_linked = incb_linked or bool(raw & _LINKER_FLAG)
            else:
                incb_run = incb_linked = False
            emoji_zwj = ris_odd = False
        elif cat == ZWJ:  # InCB=Extend: a conjunct run carries on
            emoji_zwj, ris_odd = extpic_run, False
            extpic_run = False
        elif cat == PICTO:
            extpic_run, emoji_zwj, ris_odd, incb_run, incb_linked = True, False, False, False, False
        elif cat == RI:
            ris_odd = not ris_odd
            extpic_run = emoji_zwj = incb_run = incb_linked = False
        elif cat == CONSONANT:
            incb_run, incb_linked = True, False
            extpic_run = emoji_zwj = ris_odd = False
        else:
            incb_run = incb_linked = extpic_run = emoji_zwj = ris_odd = False
        before = cat
    if text:
        out.append(text[start:])
    return out

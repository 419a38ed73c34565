"""Writes the byte-level BPE tokenizer's Unicode tables by probing the reference, code point by code point.

    python -m tools.codegen.gen_bpe_tables           # rewrite bpe_tables.py and the kits' BpeTables
    python -m tools.codegen.gen_bpe_tables --check   # exit 1 if it differs from what it writes now (~3 s)

A byte-level tokenizer.json (GPT-2, GPT-NeoX, OLMo, ModernBERT) splits text with the GPT-2 regex
`'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`, run by the
Oniguruma that `tokenizers` (0.23.3) bundles, whose Unicode version is neither Python's `regex`
module's nor a phone's. Some of them normalize with NFC first, which `tokenizers` takes from the
crate unicode-normalization-alignments (an old Unicode, unlike Python's unicodedata 14). So the
data source is the reference itself:

- letter / number / space: the code points that `\\p{L}`, `\\p{N}`, `\\s` match, probed with the
  reference's own regex engine (`tokenizers.Regex` in a Split pre-tokenizer: the same SysRegex
  as ByteLevel's);
- compositions: the pairs the reference's NFC composes, probed over every canonical pair that
  Python's unicodedata knows (NFC of `a b` is the composite `c`; Hangul is the algorithm,
  checked here for all 11,172 syllables); NFD and the combining classes are the WordPiece
  tables' (edge_m3/tokenizer/generated/wordpiece_tables.py: the same crate);
- nfc_unsafe: the code points where Python's unicodedata.normalize("NFC") may differ from the
  reference (another decomposition or combining class, a composition one side lacks, or a
  decomposition holding such a code point): a text without any of them takes Python's NFC.

The output is edge_m3/tokenizer/generated/bpe_tables.py, in the WordPiece tables' encoding (hex
ranges and maps), decoded by edge_m3.tokenizer.bpe; the same strings, probed once, go as they are
into the kits' generated/BpeTables.kt and Generated/BpeTables.swift, which their BpeTokenizer
decodes the same way (all but nfc_unsafe: the kits have no Python NFC to fall back on and always
take the tables' NFC, whose decompositions and classes are the kits' WordPieceTables).
tests/test_generated.py checks that all three are current.
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from pathlib import Path

from tools.codegen import ROOT, generate, header
from tools.codegen.gen_wordpiece_tables import (
    LINE_WIDTH,
    encode_map,
    encode_ranges,
    every_code_point,
    probe_batched,
    reference_name,
    table_module,
    wrap_chunks,
)

PYTHON_OUT = ROOT / "edge_m3/tokenizer/generated/bpe_tables.py"
KOTLIN_OUT = ROOT / "android_assets/src/main/java/dev/edgem3/generated/BpeTables.kt"
SWIFT_OUT = ROOT / "ios_assets/Sources/EdgeM3/Generated/BpeTables.swift"
_HEADER = header("gen_bpe_tables", "the reference `tokenizers`")
_CHUNK = 8192
DOCS = {
    "letter": "\\p{L} of the reference's regex engine (Oniguruma), the GPT-2 pattern's letters.",
    "number": "\\p{N} of the reference's regex engine, the GPT-2 pattern's numbers.",
    "space": "\\s of the reference's regex engine, the GPT-2 pattern's whitespace.",
    "compositions": "NFC's primary composites: composite -> its two code points (Hangul aside).",
    "nfc_unsafe": "Where Python's NFC may differ from the reference's: a text holding none takes Python's.",
}


def _matched(pattern: str, chars: list[str]) -> set[int]:
    """The code points a one-character pattern matches, by the reference's regex engine."""
    from tokenizers import Regex
    from tokenizers.pre_tokenizers import Split

    split = Split(Regex(pattern), "removed")
    out: set[int] = set()
    for k in range(0, len(chars), _CHUNK):
        chunk = chars[k:k + _CHUNK]
        kept = [False] * len(chunk)  # offsets are in characters: what survives did not match
        for _, (a, b) in split.pre_tokenize_str("".join(chunk)):
            kept[a:b] = [True] * (b - a)
        out.update(ord(c) for c, keep in zip(chunk, kept, strict=True) if not keep)
    return out


def _reference_nfd() -> dict[int, str]:
    """NFD of every code point it changes, from the WordPiece tables (probed from the same crate)."""
    from edge_m3.tokenizer.wordpiece import HANGUL, hangul_decomposition, wordpiece_tables

    return wordpiece_tables().decompose | {cp: hangul_decomposition(cp) for cp in HANGUL}


def _reference_classes() -> dict[int, int]:
    from edge_m3.tokenizer.wordpiece import wordpiece_tables

    return {ord(c): v for c, v in wordpiece_tables().combining.items()}


def probe() -> dict[str, object]:
    """Every table, from the installed `tokenizers` (see the module doc)."""
    from tokenizers.normalizers import NFC

    from edge_m3.tokenizer.bpe import hangul_compose

    chars = every_code_point()
    nfc = NFC().normalize_str
    # Canonical pairs as Python knows them (a composite's one-step decomposition a b).
    candidates: dict[int, str] = {}
    for cp in range(0x110000):
        d = unicodedata.decomposition(chr(cp))
        if d and not d.startswith("<") and len(d.split()) == 2:
            candidates[cp] = "".join(chr(int(h, 16)) for h in d.split())
    cps = sorted(candidates)
    composed = probe_batched(nfc, [candidates[cp] for cp in cps], "\n")
    compositions = {cp: candidates[cp] for cp, out in zip(cps, composed, strict=True) if out == chr(cp)}
    python_compositions = {cp for cp in cps if unicodedata.normalize("NFC", candidates[cp]) == chr(cp)}
    syllables = [chr(cp) for cp in range(0xAC00, 0xAC00 + 11172)]
    decomposed = [unicodedata.normalize("NFD", s) for s in syllables]
    if probe_batched(nfc, decomposed, "\n") != syllables or any(
            hangul_compose(d) != s for d, s in zip(decomposed, syllables, strict=True)):
        raise SystemExit("probe: the reference's Hangul composition is not the algorithm")
    # Where Python's NFC may differ: decomposition, class, or a composition one side lacks ...
    nfd, classes = _reference_nfd(), _reference_classes()
    unsafe = {ord(c) for c in chars
              if unicodedata.normalize("NFD", c) != nfd.get(ord(c), c)
              or unicodedata.combining(c) != classes.get(ord(c), 0)}
    for cp in set(compositions) ^ python_compositions:
        unsafe |= {cp, *map(ord, candidates[cp])}
    # ... and every code point whose decomposition holds one of those (to a fixed point).
    while True:
        more = {ord(c) for c in chars if ord(c) not in unsafe
                and any(ord(x) in unsafe for x in unicodedata.normalize("NFD", c))}
        if not more:
            break
        unsafe |= more
    return {
        "letter": _matched(r"\p{L}", chars), "number": _matched(r"\p{N}", chars),
        "space": _matched(r"\s", chars), "compositions": compositions, "nfc_unsafe": unsafe,
    }


@functools.cache
def tables() -> dict[str, str]:
    """Each table's encoded string, named as the generated constants are (upper case)."""
    data = probe()
    out = {name: encode_ranges(data[name]) for name in ("letter", "number", "space", "nfc_unsafe")}  # type: ignore[arg-type]
    out["compositions"] = encode_map(data["compositions"])  # type: ignore[arg-type]
    return out


def python_source() -> str:
    """bpe_tables.py: one string constant per table."""
    return table_module(_HEADER, "edge_m3.tokenizer.bpe", tables(), DOCS)


# The kits' copies: every table but nfc_unsafe (see the module doc).
KIT_TABLES = ("letter", "number", "space", "compositions")
_KIT_TITLE = ("The byte-level BPE tokenizer's Unicode tables, probed from the reference ({}): hex ranges "
              "'a-b,c', maps 'cp:hex hex'; line breaks inside a table are not data. NFC's decompositions "
              "and combining classes, and the Hangul constants, are WordPieceTables'.")


def kotlin_source() -> str:
    """BpeTables.kt: an internal object of constants (raw strings: one JVM constant each)."""
    lines = [f"// {_HEADER}", "package dev.edgem3", "", f"/** {_KIT_TITLE.format(reference_name())} */",
             "internal object BpeTables {", f'    const val REFERENCE = "{reference_name()}"']
    for name in KIT_TABLES:
        lines += [f"    /** {DOCS[name]} */", f'    const val {name.upper()} = """']
        lines += [f"        {chunk}" for chunk in wrap_chunks(tables()[name], LINE_WIDTH)]
        lines[-1] += '"""'
    return "\n".join([*lines, "}", ""])


def swift_source() -> str:
    """BpeTables.swift: an enum of constants (multi-line literals joined by a trailing '\\')."""
    from tools.codegen.kit_manifest import camel

    lines = [f"// {_HEADER}", "", f"/// {_KIT_TITLE.format(reference_name())}", "nonisolated enum BpeTables {",
             f'    static let reference = "{reference_name()}"']
    for name in KIT_TABLES:
        chunks = wrap_chunks(tables()[name], LINE_WIDTH)
        lines += [f"    /// {DOCS[name]}", f'    static let {camel(name)} = """']
        lines += [f"        {chunk}\\" for chunk in chunks[:-1]] + [f"        {chunks[-1]}", '        """']
    return "\n".join([*lines, "}", ""])


def outputs() -> dict[Path, str]:
    """Each generated file and its text."""
    return {PYTHON_OUT: python_source(), KOTLIN_OUT: kotlin_source(), SWIFT_OUT: swift_source()}


def main(argv: list[str] | None = None) -> int:
    return generate("gen_bpe_tables", __doc__, outputs, argv)


if __name__ == "__main__":
    sys.exit(main())

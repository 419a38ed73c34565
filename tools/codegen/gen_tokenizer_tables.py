"""Writes the kits' tokenizer tables from the Python tokenizer, so all three agree by construction.

    python -m tools.codegen.gen_tokenizer_tables           # rewrite the generated Kotlin and Swift files
    python -m tools.codegen.gen_tokenizer_tables --check   # exit 1 if they differ from what it writes now

The Kotlin and Swift ports of the device tokenizer (android_assets/.../XlmrTokenizer.kt,
ios_assets/Sources/EdgeM3/Tokenizer/) cut graphemes with the reference's Unicode data, not the
phone's ICU (whose version moves with the OS): the grapheme category of every code point comes
from edge_m3.tokenizer.graphemes.category, which already matches the reference's Unicode 16 tables. The
whitespace set and the algorithm's constants come from the same modules. Categories are written
as runs (start, category) in a short ASCII string that each port decodes once at load, which
keeps the Kotlin class under the JVM's 64 KB constant and method limits.

This is the one place that imports the tokenizer internals (edge_m3.tokenizer.graphemes, normalizer,
unigram); tests/test_generated.py checks that the committed files are current.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from tools.codegen import ROOT, generate, header

KOTLIN_OUT = ROOT / "android_assets/src/main/java/dev/edgem3/generated/TokenizerTables.kt"
SWIFT_OUT = ROOT / "ios_assets/Sources/EdgeM3/Generated/TokenizerTables.swift"
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_HEADER = header("gen_tokenizer_tables", "edge_m3.tokenizer.graphemes, edge_m3.tokenizer.normalizer and "
                 "edge_m3.tokenizer.unigram")


def _base36(n: int) -> str:
    out = ""
    while True:
        n, d = divmod(n, 36)
        out = _DIGITS[d] + out
        if n == 0:
            return out


@functools.cache
def categories() -> list[int]:
    """The grapheme category of every code point (edge_m3.tokenizer.graphemes' numbering, InCB=Linker flag
    included), surrogates too (the ports refuse them before segmenting)."""
    from edge_m3.tokenizer.graphemes import category

    return [category(chr(cp)) for cp in range(0x110000)]


def category_runs() -> str:
    """`categories()` as runs: base-36 gap to the run's start, then a letter 'A' + category."""
    parts: list[str] = []
    prev_start, prev_cat = 0, None
    for cp, cat in enumerate(categories()):
        if cat != prev_cat:
            if not 0 <= cat < 26:
                raise SystemExit(f"category {cat} of U+{cp:04X} does not fit one letter")
            parts.append(_base36(cp - prev_start) + chr(ord("A") + cat))
            prev_start, prev_cat = cp, cat
    return "".join(parts)


def constants() -> dict[str, int | float]:
    """The algorithm's numbers, named as in the Python modules."""
    from edge_m3.tokenizer import graphemes as g
    from edge_m3.tokenizer.normalizer import WHOLE_GRAPHEME_BYTES
    from edge_m3.tokenizer.unigram import META, UNK_PENALTY

    names = ("OTHER", "CR", "LF", "CONTROL", "EXTEND", "ZWJ", "RI", "PREPEND", "SPACING_MARK", "L", "V",
             "T", "LV", "LVT", "PICTO", "CONSONANT")
    out: dict[str, int | float] = {n: getattr(g, n) for n in names}
    out.update(LINKER_FLAG=g._LINKER_FLAG, ZWNJ=ord(g.ZWNJ), META=ord(META),
               WHOLE_GRAPHEME_BYTES=WHOLE_GRAPHEME_BYTES, UNK_PENALTY=float(UNK_PENALTY))
    return out


def whitespace() -> list[int]:
    from edge_m3.tokenizer.normalizer import WHITESPACE

    return sorted(map(ord, WHITESPACE))


def default_special_tokens() -> dict[str, str]:
    """XLM-R's special-token strings, for manifests written before `special_tokens` existed."""
    from edge_m3.tokenizer import TokenizerSpec

    return dict(TokenizerSpec(special_ids={}).special_tokens)


def _chunks(s: str, width: int) -> list[str]:
    return [s[i:i + width] for i in range(0, len(s), width)]


_DOCS = {
    "title": "Unicode data and constants of the tokenizer, from the Python reference (XlmrTokenizer).",
    "whitespace": "Unicode White_Space (Rust's char::is_whitespace): the reference's word breaks.",
    "special": "XLM-R's special-token strings, for manifests without `special_tokens`.",
    "runs": "Grapheme category runs: base-36 gap to the run's start, then 'A' + category.",
}


def _lit(value: int | float) -> str:
    return repr(value) if isinstance(value, float) else f"0x{value:04X}" if value > 255 else str(value)


def kotlin_source() -> str:
    """TokenizerTables.kt: an internal object of constants (Kotlin 1.3 syntax)."""
    ws = ", ".join(map(_lit, whitespace()))
    sp = ", ".join(f'"{k}" to "{v}"' for k, v in default_special_tokens().items())
    runs = " +\n        ".join(f'"{c}"' for c in _chunks(category_runs(), 96))
    return "\n".join([
        f"// {_HEADER}", "package dev.edgem3", "",
        f"/** {_DOCS['title']} */", "internal object TokenizerTables {",
        *(f"    const val {name} = {_lit(value)}" for name, value in constants().items()),
        f"    /** {_DOCS['whitespace']} */", f"    val WHITESPACE = intArrayOf({ws})",
        f"    /** {_DOCS['special']} */", f"    val DEFAULT_SPECIAL_TOKENS = linkedMapOf({sp})",
        f"    /** {_DOCS['runs']} */", f"    const val CATEGORY_RUNS = {runs}",
        "}", ""])


def _swift_constant(name: str, value: int | float) -> str:
    words = name.lower().split("_")
    ident = words[0] + "".join(w.capitalize() for w in words[1:])
    typ = "Double" if isinstance(value, float) else "UInt32" if name in ("ZWNJ", "META") else "Int"
    return f"    static let {ident}: {typ} = {_lit(value)}"


def swift_source() -> str:
    """TokenizerTables.swift: an enum of constants (no import needed)."""
    ws = ", ".join(map(_lit, whitespace()))
    sp = ", ".join(f'("{k}", "{v}")' for k, v in default_special_tokens().items())
    return "\n".join([
        f"// {_HEADER}", "", f"/// {_DOCS['title']}", "nonisolated enum TokenizerTables {",
        *(_swift_constant(name, value) for name, value in constants().items()),
        f"    /// {_DOCS['whitespace']}", f"    static let whitespace: [UInt32] = [{ws}]",
        f"    /// {_DOCS['special']}", f"    static let defaultSpecialTokens: [(String, String)] = [{sp}]",
        # An array literal: a chain of `+` type-checks slowly.
        f"    /// {_DOCS['runs']}", "    static let categoryRuns: String = [",
        *(f'        "{c}",' for c in _chunks(category_runs(), 96)),
        "    ].joined()", "}", ""])


def outputs() -> dict[Path, str]:
    """Each generated file and its text."""
    return {KOTLIN_OUT: kotlin_source(), SWIFT_OUT: swift_source()}


def main(argv: list[str] | None = None) -> int:
    return generate("gen_tokenizer_tables", __doc__, outputs, argv)


if __name__ == "__main__":
    sys.exit(main())

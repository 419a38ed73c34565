"""Writes the WordPiece tokenizer's Unicode tables by probing the reference, code point by code point.

    python -m tools.codegen.gen_wordpiece_tables           # rewrite wordpiece_tables.py and the kits' copies
    python -m tools.codegen.gen_wordpiece_tables --check   # exit 1 if it differs from what it writes (~10 s)

A BERT tokenizer.json behaves as `tokenizers` (0.23.3) was compiled: `char::is_whitespace` and
`char::to_lowercase` from the Rust standard library of its build, `is_other` / `is_punctuation` /
`is_mark_nonspacing` from the crate unicode_categories (0.1, tables of an old Unicode), NFD and
combining classes from the crate unicode-normalization-alignments (0.1, older still). Python's
unicodedata (Unicode 14) and `regex` (Unicode 17) agree with none of them exactly (e.g. every code
point assigned after the crates' Unicode version is "other" there, so BertNormalizer drops it; a
mark that is new since then is neither stripped nor reordered; lowercasing is per character, no
final sigma). So the data source is the reference itself: each property below is what its own
normalizer or pre-tokenizer class does to each code point (surrogates aside: no Python str that
reaches it holds one), probed in large batches joined by a separator the step leaves alone:

- clean_drop / clean_space: BertNormalizer(clean_text only) removes the character / makes it " ";
- split / punct: BertPreTokenizer removes it (whitespace) / isolates it, between two letters;
- chinese: BertNormalizer(handle_chinese_chars only) puts spaces around it;
- nonspacing: an NFD-stable character that BertNormalizer(strip_accents only) removes;
- decompositions: NFD's output for each character it changes (Hangul syllables aside: the
  algorithm, edge_m3.tokenizer.wordpiece.hangul_decomposition, checked here for all 11,172);
- combining classes: the non-starters (a character that moves in NFD between two copies of U+0301
  or of U+0316), each one's class found by which anchor marks (one per class of Python's
  unicodedata, their mutual order checked) it moves past; the tokenizer needs only the order;
- lowercase: the Lowercase normalizer's output for each character it changes.

The output is edge_m3/tokenizer/generated/wordpiece_tables.py: ranges and maps as short hex strings
that the Python tokenizer decodes once; the same strings, probed once, go as they are into the kits'
generated/WordPieceTables.kt and Generated/WordPieceTables.swift (with the Hangul constants of
edge_m3.tokenizer.wordpiece), which their WordPieceTokenizer decodes the same way
(tests/test_generated.py checks that all three are current).
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from collections.abc import Callable, Iterable
from pathlib import Path

from tools.codegen import ROOT, generate, header

PYTHON_OUT = ROOT / "edge_m3/tokenizer/generated/wordpiece_tables.py"
KOTLIN_OUT = ROOT / "android_assets/src/main/java/dev/edgem3/generated/WordPieceTables.kt"
SWIFT_OUT = ROOT / "ios_assets/Sources/EdgeM3/Generated/WordPieceTables.swift"
_HEADER = header("gen_wordpiece_tables", "the reference `tokenizers`")
_CHUNK = 8192
LINE_WIDTH = 100
PROPERTIES = ("clean_drop", "clean_space", "split", "punct", "chinese", "nonspacing")
# Docstrings of the generated constants (also for the kits' copies).
DOCS = {
    "clean_drop": "BertNormalizer(clean_text) removes these: NUL, U+FFFD and `is_other` but \\t \\n \\r.",
    "clean_space": "BertNormalizer(clean_text) turns these into ' ' (whitespace, \\t \\n \\r).",
    "split": "BertPreTokenizer splits on these and drops them (char::is_whitespace).",
    "punct": "BertPreTokenizer isolates each of these (ASCII or Unicode punctuation).",
    "chinese": "BertNormalizer(handle_chinese_chars) puts a space before and after these.",
    "nonspacing": "BertNormalizer(strip_accents) drops these after NFD (is_mark_nonspacing).",
    "decompositions": "NFD: code point -> its full canonical decomposition (Hangul syllables aside).",
    "combining": "Canonical combining classes of the non-starters (NFD's stable sort key).",
    "lowercase": "char::to_lowercase of each code point it changes (one or more code points).",
}


def every_code_point() -> list[str]:
    """Every Unicode scalar value as a one-character string (surrogates left out)."""
    return [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]


def probe_batched(fn: Callable[[str], str], items: list[str], sep: str) -> list[str]:
    """fn of each item, many items per call: joined by `sep`, which fn leaves alone and which
    separates contexts; an item holding `sep` goes alone."""
    out: list[str] = [""] * len(items)
    alone = [i for i, s in enumerate(items) if sep in s]
    rest = [i for i, s in enumerate(items) if sep not in s]
    for i in alone:
        out[i] = fn(items[i])
    for k in range(0, len(rest), _CHUNK):
        idx = rest[k:k + _CHUNK]
        parts = fn(sep.join(items[i] for i in idx)).split(sep)
        if len(parts) != len(idx):
            raise SystemExit(f"probe: {len(parts)} outputs for {len(idx)} inputs (separator {sep!r} moved)")
        for i, p in zip(idx, parts, strict=True):
            out[i] = p
    return out


def _pretokenize_classes(chars: list[str]) -> tuple[set[str], set[str]]:
    """The characters BertPreTokenizer removes and those it isolates, each probed as 'a' c 'a'."""
    from tokenizers.pre_tokenizers import BertPreTokenizer

    pre = BertPreTokenizer()
    split: set[str] = set()
    punct: set[str] = set()
    for k in range(0, len(chars), _CHUNK):
        chunk = chars[k:k + _CHUNK]
        pieces = [p for p, _ in pre.pre_tokenize_str(" ".join(f"a{c}a" for c in chunk))]
        j = 0
        for c in chunk:  # each item is one piece, three (isolated) or two (removed)
            if pieces[j] == f"a{c}a":
                j += 1
            elif pieces[j:j + 3] == ["a", c, "a"]:
                punct.add(c)
                j += 3
            elif pieces[j:j + 2] == ["a", "a"]:
                split.add(c)
                j += 2
            else:
                raise SystemExit(f"probe: BertPreTokenizer gave {pieces[j:j + 3]} for U+{ord(c):04X}")
        if j != len(pieces):
            raise SystemExit("probe: BertPreTokenizer pieces left over")
    return split, punct


def _combining_classes(nfd: Callable[[str], str], stable: list[str]) -> dict[int, int]:
    """The non-starters among NFD-stable characters and their classes (see the module doc)."""
    acute, grave_below = "\u0301", "\u0316"  # classes 230 and 220
    probes = [m + c + m for m in (acute, grave_below) for c in stable]
    moved = [p != q for p, q in zip(probes, probe_batched(nfd, probes, "\n"), strict=True)]
    n = len(stable)
    nonstarters = [c for i, c in enumerate(stable) if moved[i] or moved[n + i]]
    known = set(nonstarters)
    anchors: dict[int, str] = {}  # class -> the lowest code point with that class in unicodedata
    for cp in range(0x110000):
        v = unicodedata.combining(chr(cp))
        if v and v not in anchors and chr(cp) in known:
            anchors[v] = chr(cp)
    classes = sorted(anchors)
    pairs = [anchors[b] + anchors[a] for i, a in enumerate(classes) for b in classes[i + 1:]]
    if probe_batched(nfd, pairs, "\n") != [p[::-1] for p in pairs]:
        raise SystemExit("probe: the anchor marks' order differs from unicodedata's combining classes")
    probes = [x for c in nonstarters for v in classes for x in (anchors[v] + c, c + anchors[v])]
    out = probe_batched(nfd, probes, "\n")
    result: dict[int, int] = {}
    for i, c in enumerate(nonstarters):
        k = 2 * len(classes) * i
        equal = [v for j, v in enumerate(classes) if out[k + 2 * j] == probes[k + 2 * j]
                 and out[k + 2 * j + 1] == probes[k + 2 * j + 1]]
        if len(equal) != 1:
            raise SystemExit(f"probe: U+{ord(c):04X} has a combining class no anchor has")
        result[ord(c)] = equal[0]
    return result


def probe() -> dict[str, object]:
    """Every table, from the installed `tokenizers` (see the module doc)."""
    from tokenizers.normalizers import NFD, BertNormalizer, Lowercase

    def bert(**on: bool) -> Callable[[str], str]:
        flags = dict(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=False)
        return BertNormalizer(**(flags | on)).normalize_str

    chars = every_code_point()
    clean = probe_batched(bert(clean_text=True), chars, "x")
    chinese = probe_batched(bert(handle_chinese_chars=True), chars, "\n")
    nfd_fn = NFD().normalize_str
    nfd = probe_batched(nfd_fn, chars, "\n")  # "\u1e8b" decomposes to "x\u0307"
    strip = probe_batched(bert(strip_accents=True), chars, "\n")
    lower = probe_batched(Lowercase().normalize_str, chars, "\n")
    split, punct = _pretokenize_classes(chars)
    from edge_m3.tokenizer.wordpiece import HANGUL, hangul_decomposition

    decompositions: dict[int, str] = {}
    for c, d in zip(chars, nfd, strict=True):
        cp = ord(c)
        if cp in HANGUL:
            if d != hangul_decomposition(cp):
                raise SystemExit(f"probe: Hangul U+{cp:04X} decomposes to {d!r}, not by the algorithm")
        elif d != c:
            decompositions[cp] = d
    stable = [c for c, d in zip(chars, nfd, strict=True) if d == c]
    stable_set = set(stable)
    return {
        "clean_drop": {ord(c) for c, o in zip(chars, clean, strict=True) if o == ""},
        "clean_space": {ord(c) for c, o in zip(chars, clean, strict=True) if o == " "},
        "split": set(map(ord, split)), "punct": set(map(ord, punct)),
        "chinese": {ord(c) for c, o in zip(chars, chinese, strict=True) if o == f" {c} "},
        "nonspacing": {ord(c) for c, o in zip(chars, strip, strict=True) if o == "" and c in stable_set},
        "decompositions": decompositions,
        "combining": _combining_classes(nfd_fn, stable),
        "lowercase": {ord(c): o for c, o in zip(chars, lower, strict=True) if o != c},
    }


# --------------------------------------------------------------------------- encoding


def encode_ranges(cps: Iterable[int]) -> str:
    """Sorted code points as 'start-end' / 'cp' hex items joined by ','."""
    out: list[str] = []
    run: list[int] = []
    for cp in sorted(cps):
        if run and cp == run[1] + 1:
            run[1] = cp
            continue
        if run:
            out.append(f"{run[0]:x}" if run[0] == run[1] else f"{run[0]:x}-{run[1]:x}")
        run = [cp, cp]
    if run:
        out.append(f"{run[0]:x}" if run[0] == run[1] else f"{run[0]:x}-{run[1]:x}")
    return ",".join(out)


def encode_map(mapping: dict[int, str]) -> str:
    """Code point -> string as 'cp:hex hex' items joined by ','."""
    return ",".join(f"{cp:x}:{' '.join(f'{ord(c):x}' for c in s)}" for cp, s in sorted(mapping.items()))


def encode_classes(classes: dict[int, int]) -> str:
    """Code point -> class as 'start-end:class' items (decimal class) joined by ','."""
    by_class: dict[int, list[int]] = {}
    for cp, v in classes.items():
        by_class.setdefault(v, []).append(cp)
    items = []
    for v, cps in by_class.items():
        items += [(int(r.split("-")[0], 16), f"{r}:{v}") for r in encode_ranges(cps).split(",")]
    return ",".join(s for _, s in sorted(items))


@functools.cache
def tables() -> dict[str, str]:
    """Each table's encoded string, named as the generated constants are (upper case)."""
    data = probe()
    out = {name: encode_ranges(data[name]) for name in PROPERTIES}  # type: ignore[arg-type]
    out["decompositions"] = encode_map(data["decompositions"])  # type: ignore[arg-type]
    out["combining"] = encode_classes(data["combining"])  # type: ignore[arg-type]
    out["lowercase"] = encode_map(data["lowercase"])  # type: ignore[arg-type]
    return out


def wrap_chunks(s: str, width: int) -> list[str]:
    """Cut at item boundaries (',') so that each line stays under `width`."""
    lines, line = [], ""
    for item in s.split(","):
        piece = item if not line else "," + item
        if line and len(line) + len(piece) > width:
            lines.append(line + ",")
            line = item
        else:
            line += piece
    return [*lines, line]


def table_module(header: str, decoder: str, encoded: dict[str, str], docs: dict[str, str]) -> str:
    """A generated tables module: one string constant per table, each with its comment."""
    import tokenizers

    lines = [f'"""{header}', "",
             f"Probed from tokenizers {tokenizers.__version__}; decoded by {decoder}.",
             '"""', "",
             f"REFERENCE = \"tokenizers {tokenizers.__version__}\""]
    for name, value in encoded.items():
        lines += ["", f"# {docs[name]}", f"{name.upper()} = ("]
        lines += [f'    "{chunk}"' for chunk in wrap_chunks(value, LINE_WIDTH)]
        lines.append(")")
    return "\n".join(lines) + "\n"


def reference_name() -> str:
    """The probed reference and its version, as the generated tables name it."""
    import tokenizers

    return f"tokenizers {tokenizers.__version__}"


def hangul() -> dict[str, int]:
    """The Hangul decomposition's constants (edge_m3.tokenizer.wordpiece), for the kits."""
    from edge_m3.tokenizer import wordpiece as w

    return {n: getattr(w, n) for n in ("SBASE", "LBASE", "VBASE", "TBASE", "LCOUNT", "VCOUNT", "TCOUNT")}


_KIT_TITLE = ("The WordPiece tokenizer's Unicode tables, probed from the reference ({}): hex ranges "
              "'a-b,c', maps 'cp:hex hex', classes 'a-b:class'; line breaks inside a table are not data.")
_KIT_HANGUL = "Hangul syllables decompose by an algorithm (Unicode 3.12), not a table."

def _hex(v: int) -> str:
    """A Hangul constant as the kits spell it: hex past one byte."""
    return f"0x{v:04X}" if v > 255 else str(v)


def kotlin_source() -> str:
    """WordPieceTables.kt: an internal object of constants (raw strings: one JVM constant each)."""
    lines = [f"// {_HEADER}", "package dev.edgem3", "", f"/** {_KIT_TITLE.format(reference_name())} */",
             "internal object WordPieceTables {", f'    const val REFERENCE = "{reference_name()}"',
             f"    /** {_KIT_HANGUL} */"]
    lines += [f"    const val {n} = {_hex(v)}" for n, v in hangul().items()]
    for name, value in tables().items():
        lines += [f"    /** {DOCS[name]} */", f'    const val {name.upper()} = """']
        lines += [f"        {chunk}" for chunk in wrap_chunks(value, LINE_WIDTH)]
        lines[-1] += '"""'
    return "\n".join([*lines, "}", ""])


def swift_source() -> str:
    """WordPieceTables.swift: an enum of constants (multi-line literals joined by a trailing '\\')."""
    from tools.codegen.kit_manifest import camel

    lines = [f"// {_HEADER}", "", f"/// {_KIT_TITLE.format(reference_name())}",
             "nonisolated enum WordPieceTables {",
             f'    static let reference = "{reference_name()}"', f"    /// {_KIT_HANGUL}"]
    lines += [f"    static let {camel(n)}: UInt32 = {_hex(v)}" for n, v in hangul().items()]
    for name, value in tables().items():
        chunks = wrap_chunks(value, LINE_WIDTH)
        lines += [f"    /// {DOCS[name]}", f'    static let {camel(name)} = """']
        lines += [f"        {chunk}\\" for chunk in chunks[:-1]] + [f"        {chunks[-1]}", '        """']
    return "\n".join([*lines, "}", ""])


def python_source() -> str:
    """wordpiece_tables.py: one string constant per table."""
    return table_module(_HEADER, "edge_m3.tokenizer.wordpiece", tables(), DOCS)


def outputs() -> dict[Path, str]:
    """Each generated file and its text."""
    return {PYTHON_OUT: python_source(), KOTLIN_OUT: kotlin_source(), SWIFT_OUT: swift_source()}


def main(argv: list[str] | None = None) -> int:
    return generate("gen_wordpiece_tables", __doc__, outputs, argv)


if __name__ == "__main__":
    sys.exit(main())

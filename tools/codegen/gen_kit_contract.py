"""Write the kits' copies of the bundle contract from edge_m3/spec/ (the one definition).

    python -m tools.codegen.gen_kit_contract            # rewrite the generated kit files
    python -m tools.codegen.gen_kit_contract --check    # exit 1 if one is stale (make lint, the tests)

Kotlin (android_assets/src/main/java/dev/edgem3/generated/): EdgeM3Contract.kt (object
EdgeM3Contract), Manifest.kt, and EdgeM3Errors.kt (the error kinds and one exception class per
kind, from spec.KIT_ERROR_KINDS); Swift (ios_assets/Sources/EdgeM3/Generated/):
EdgeM3Contract.swift (enum EdgeM3Contract, EdgeM3ErrorKind, ScoreMode) and Manifest.swift. The
manifest types come from tools/codegen/kit_manifest.py's table.
"""

from __future__ import annotations

import sys
from pathlib import Path

from edge_m3 import spec as c
from edge_m3.bundle.kits import ANDROID_ASSETS, IOS_RESOURCES, IOS_TEST_RESOURCES
from tools.codegen import ROOT, generate, header
from tools.codegen.kit_manifest import camel as _camel
from tools.codegen.kit_manifest import kotlin_manifest, swift_manifest
from tools.codegen.kit_manifest import quote as _q

KOTLIN_DIR = ROOT / "android_assets/src/main/java/dev/edgem3/generated"
SWIFT_DIR = ROOT / "ios_assets/Sources/EdgeM3/Generated"
KOTLIN = KOTLIN_DIR / "EdgeM3Contract.kt"
SWIFT = SWIFT_DIR / "EdgeM3Contract.swift"
KOTLIN_MANIFEST = KOTLIN_DIR / "Manifest.kt"
KOTLIN_ERRORS = KOTLIN_DIR / "EdgeM3Errors.kt"
SWIFT_MANIFEST = SWIFT_DIR / "Manifest.swift"
HEADER = header("gen_kit_contract", "edge_m3/spec/")

# name -> value of the plain constants both kits get (Kotlin UPPER_SNAKE, Swift lowerCamel).
STRINGS = {
    "MANIFEST": c.MANIFEST, "GOLDEN": c.GOLDEN, "VOCAB_MAP": c.VOCAB_MAP,
    "SENTENCEPIECE": c.SENTENCEPIECE, "INPUT_IDS": c.INPUT_IDS, "ATTENTION_MASK": c.ATTENTION_MASK,
    "DENSE_VECS": c.DENSE_VECS, "SPARSE_WEIGHTS": c.SPARSE_WEIGHTS, "COLBERT_VECS": c.COLBERT_VECS,
    "LEXICAL_WEIGHTS": c.LEXICAL_WEIGHTS, "ASSET_DIR": ANDROID_ASSETS.name,
    "RESOURCE_FOLDER": str(IOS_RESOURCES), "TEST_RESOURCE_FOLDER": str(IOS_TEST_RESOURCES),
    "IN_MEMORY_WEIGHT_CACHE": c.IN_MEMORY_WEIGHT_CACHE, "WEIGHT_CACHE_SUFFIX": c.WEIGHT_CACHE_SUFFIX,
    # retrieval (issue 25, docs/index-format.md)
    "INDEX_FORMAT": c.INDEX_FORMAT, "INDEX_MANIFEST": c.INDEX_MANIFEST, "INDEX_IDS": c.INDEX_IDS,
    "INDEX_POSTING_WEIGHTS": c.INDEX_POSTING_WEIGHTS,
    # the writable index (issue 35): its database, schema and meta keys
    "INDEX_DB": c.INDEX_DB, "INDEX_DB_FORMAT": c.INDEX_DB_FORMAT, "INDEX_BASE_PREFIX": c.INDEX_BASE_PREFIX,
    # tokenizer kinds (issue 33): the manifest's `tokenizer.kind` values and a WordPiece vocabulary's file
    "XLMR_SENTENCEPIECE": c.XLMR_SENTENCEPIECE, "WORDPIECE": c.WORDPIECE, "WORDPIECE_VOCAB": c.WORDPIECE_VOCAB,
    # the byte-level BPE kind (issue 37) and its bundle file
    "BYTE_LEVEL_BPE": c.BYTE_LEVEL_BPE, "BPE_FILE": c.BPE_FILE,
}
INTS = {"DEVICE_THREADS": c.DEVICE_THREADS, "WEIGHT_CACHE_KEY_CHARS": c.WEIGHT_CACHE_KEY_CHARS,
        # retrieval (issue 25)
        "INDEX_FORMAT_VERSION": c.INDEX_FORMAT_VERSION, "HYBRID_CANDIDATES": c.HYBRID_CANDIDATES,
        # the writable index (issue 35)
        "INDEX_DB_VERSION": c.INDEX_DB_VERSION, "INDEX_DB_APPLICATION_ID": c.INDEX_DB_APPLICATION_ID,
        "INDEX_DB_BUSY_MS": c.INDEX_DB_BUSY_MS, "INDEX_DB_RELOADS": c.INDEX_DB_RELOADS,
        "INDEX_MAX_DIM": c.INDEX_MAX_DIM,
        # chunks of a long passage (issue 35, docs/index-format.md "Passages and chunks")
        "CHUNK_OVERLAP_PERCENT": c.CHUNK_OVERLAP_PERCENT}
LISTS = {"SPECIAL_KEYS": c.SPECIAL_KEYS, "LEXICAL_SKIP_KEYS": c.LEXICAL_SKIP_KEYS, "QUANTS": c.QUANTS,
         # retrieval (issue 25)
         "SCORE_SIGNALS": c.SCORE_SIGNALS, "SCORE_MODES": c.SCORE_MODES,
         "DENSE_STORES": c.DENSE_STORES, "COLBERT_STORES": c.COLBERT_STORES,
         # tokenizer kinds (issue 33): one tokenizer class each, EdgeM3Tokenizer.open picks it
         "TOKENIZER_KINDS": c.TOKENIZER_KINDS,
         # the writable index (issue 35): its tables, created in this order, and its meta keys
         "INDEX_DB_SCHEMA": c.INDEX_DB_SCHEMA, "INDEX_DB_META_KEYS": c.INDEX_DB_META_KEYS,
         # an index's `bundle`: the strings it must hold when not null
         "INDEX_BUNDLE_KEYS": c.INDEX_BUNDLE_KEYS,
         # a byte-level BPE bundle's `options.normalizer` values ("" for none)
         "BPE_NORMALIZERS": c.BPE_NORMALIZERS,
         # a file name from manifest.json is not a path (issue 38; spec.is_file_name)
         "NOT_FILE_NAMES": c.NOT_FILE_NAMES, "FILE_NAME_SEPARATORS": c.FILE_NAME_SEPARATORS}
# Retrieval (issue 25): lists of doubles and string maps.
DOUBLE_LISTS = {"DEFAULT_MODE_WEIGHTS": c.DEFAULT_MODE_WEIGHTS}
STRING_MAPS = {"INDEX_ARRAYS": c.INDEX_ARRAYS}


# spec.weight_cache_name in each kit's language (ASCII letters, digits, '.' and '_' kept).
KOTLIN_CACHE_NAME = """\
    fun weightCacheName(modelSha256: String, runtimeKey: String): String {
        val key = runtimeKey.map { if (it in 'a'..'z' || it in 'A'..'Z' || it in '0'..'9' || it == '.' ||
            it == '_') it else '_' }.joinToString("")
        return modelSha256.take(WEIGHT_CACHE_KEY_CHARS) + "-" + key + WEIGHT_CACHE_SUFFIX"""
# spec.escape_line_breaks in each kit's language: every message of an EdgeM3Exception (Kotlin) or
# an EdgeM3Error (Swift) goes through it, so a refusal is one line whatever the file held.
KOTLIN_ESCAPE = """\
    fun escapeLineBreaks(message: String): String {
        if (message.none { it in LINE_BREAK_ESCAPES }) return message
        val out = StringBuilder(message.length + 16)
        for (ch in message) out.append(LINE_BREAK_ESCAPES[ch] ?: ch.toString())
        return out.toString()"""
SWIFT_ESCAPE = """\
    public static func escapeLineBreaks(_ message: String) -> String {
        guard message.unicodeScalars.contains(where: { lineBreakEscapes[$0] != nil }) else { return message }
        var out = String.UnicodeScalarView()
        for u in message.unicodeScalars {
            if let e = lineBreakEscapes[u] { out.append(contentsOf: e.unicodeScalars) } else { out.append(u) }
        }
        return String(out)"""


KOTLIN_CHAR, SWIFT_SCALAR = "'\\u%04x'", '"\\u{%x}"'  # a character literal, by code point


def _line_break_escapes(char: str, sep: str) -> str:
    """spec.LINE_BREAKS -> their escapes, as a Kotlin or Swift map's entries (`char`: KOTLIN_CHAR...)."""
    return ", ".join(f"{char % ord(ch)}{sep}{_q(c.escape_line_breaks(ch))}" for ch in c.LINE_BREAKS)


SWIFT_CACHE_NAME = """\
    public static func weightCacheName(modelSha256: String, runtimeKey: String) -> String {
        let key = String(runtimeKey.map { ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "." ||
            $0 == "_" ? $0 : "_" })
        return String(modelSha256.prefix(weightCacheKeyChars)) + "-" + key + weightCacheSuffix"""


def _doc(fn: object) -> str:
    """A Python docstring's first line, for the generated function's comment."""
    return (getattr(fn, "__doc__", "") or "").strip().splitlines()[0]


def _mode_case(mode: str) -> str:
    """`sparse+dense` -> `SPARSE_DENSE` (Kotlin); Swift takes _camel of it."""
    return mode.replace("+", "_").upper()


def _kotlin_class(kind: str) -> str:
    default = "EdgeM3" + "".join(p.capitalize() for p in kind.split("_")) + "Exception"
    return c.KIT_EXCEPTION_CLASSES.get(kind) or default


def kotlin_errors() -> str:
    """EdgeM3ErrorKind, EdgeM3Failure and one exception class per kind (spec.KIT_ERROR_KINDS)."""
    base = _kotlin_class("invalid_input")
    lines = [f"// {HEADER}", "package dev.edgem3", "",
             "/** What went wrong, for a caller to branch on (`EdgeM3Failure.kind`; "
             "spec.KIT_ERROR_KINDS). */",
             "enum class EdgeM3ErrorKind(val wire: String) {"]
    kinds = list(c.KIT_ERROR_KINDS.items())
    for i, (k, doc) in enumerate(kinds):
        lines += [f"    /** {doc} */", f"    {k.upper()}({_q(k)}){',' if i < len(kinds) - 1 else ''}"]
    lines += ["}", "",
              "/** Every exception the kit throws: [EdgeM3Exception] and its subclasses, and "
              "[EdgeM3CancelledException]. */",
              "interface EdgeM3Failure {", "    val kind: EdgeM3ErrorKind", "}", "",
              f"/** {c.KIT_ERROR_KINDS['invalid_input']} "
              "Every other kind but `cancelled` is a subclass. */",
              "// The message's line breaks escaped (EdgeM3Contract.escapeLineBreaks): a refusal is one line.",
              f"open class {base}(message: String, cause: Throwable? = null) : "
              "RuntimeException(EdgeM3Contract.escapeLineBreaks(message), cause), "
              "EdgeM3Failure {",
              "    override val kind: EdgeM3ErrorKind get() = EdgeM3ErrorKind.INVALID_INPUT", "",
              "    companion object {",
              "        /** The exception class of `kind`, as the kit throws it. */",
              "        fun of(kind: EdgeM3ErrorKind, message: String, cause: Throwable? = null): "
              "RuntimeException = when (kind) {"]
    lines += [f"            EdgeM3ErrorKind.{k.upper()} -> {_kotlin_class(k)}(message, cause)"
              for k, _ in kinds]
    lines += ["        }", "    }", "}"]
    for k, doc in kinds:
        if k == "invalid_input":
            continue
        name = _kotlin_class(k)
        lines += ["", f"/** {doc} */"]
        if k == "cancelled":
            lines += [f"class {name}(message: String, cause: Throwable? = null) : "
                      "java.util.concurrent.CancellationException(EdgeM3Contract.escapeLineBreaks(message)), "
                      "EdgeM3Failure {",
                      "    init {", "        if (cause != null) initCause(cause)", "    }", "",
                      f"    override val kind: EdgeM3ErrorKind get() = EdgeM3ErrorKind.{k.upper()}", "}"]
        else:
            lines += [f"class {name}(message: String, cause: Throwable? = null) : {base}(message, cause) {{",
                      f"    override val kind: EdgeM3ErrorKind get() = EdgeM3ErrorKind.{k.upper()}", "}"]
    return "\n".join(lines) + "\n"


def kotlin() -> str:
    lines = [f"// {HEADER}", "package dev.edgem3", "",
             "/** The bundle contract shared with the Python builder and the Swift kit. */",
             "object EdgeM3Contract {", f"    const val SCHEMA_VERSION = {c.SCHEMA_VERSION}"]
    lines += [f"    const val {k} = {_q(v)}" for k, v in STRINGS.items()]
    lines += [f"    const val {k} = {v}" for k, v in INTS.items()]
    lines += [f"    val {k}: List<String> = listOf({', '.join(map(_q, v))})" for k, v in LISTS.items()]
    lines += [f"    val {k}: List<Double> = listOf({', '.join(map(repr, v))})" for k, v in DOUBLE_LISTS.items()]
    lines += [f"    val {k}: Map<String, String> = mapOf("
              f"{', '.join(f'{_q(a)} to {_q(b)}' for a, b in v.items())})" for k, v in STRING_MAPS.items()]
    lines += ["", "    /** Live outputs vs golden.json on a device: kernel rounding only. */",
              "    class Tolerance(val denseCosineMin: Double, val maxAbs: Float)", "",
              "    /** Per quant variant: the device tolerance. */",
              "    val TOLERANCES: Map<String, Tolerance> = mapOf("]
    lines += [f"        {_q(r.name)} to Tolerance({r.device_tolerance.dense_cosine_min!r}, "
              f"{r.device_tolerance.max_abs!r}f)," for r in c.RECIPES.values()]
    lines[-1] = lines[-1].rstrip(",")
    lines += ["    )", "", "    /** Per quant variant: the oldest TF Lite runtime whose kernels run it. */",
              "    val OLDEST_TFLITE: Map<String, String> = mapOf("]
    lines += [f"        {_q(r.name)} to {_q(r.oldest_tflite)}," for r in c.RECIPES.values()]
    lines[-1] = lines[-1].rstrip(",")
    lines += ["    )", "", "    /** Per quant variant: the oldest LiteRT seen to compute it right. */",
              "    val OLDEST_LITERT: Map<String, String> = mapOf("]
    lines += [f"        {_q(r.name)} to {_q(r.oldest_litert)}," for r in c.RECIPES.values()]
    lines[-1] = lines[-1].rstrip(",")
    lines += ["    )", "", f"    /** {_doc(c.weight_cache_name)} */",
              *KOTLIN_CACHE_NAME.splitlines(),
              "    }", "",
              "    /** What Python's str.splitlines splits on (spec.LINE_BREAKS), each with its escape. */",
              "    val LINE_BREAK_ESCAPES: Map<Char, String> = mapOf("
              f"{_line_break_escapes(KOTLIN_CHAR, ' to ')})", "",
              f"    /** {_doc(c.escape_line_breaks)} */",
              *KOTLIN_ESCAPE.splitlines(),
              "    }", "}", "",
              "/** A score mode (spec.SCORE_MODES): what `Retrieval.score` and `EdgeM3Index.search` "
              "take, as an enum. */",
              "enum class ScoreMode(val wire: String) {"]
    lines += [f"    {_mode_case(m)}({_q(m)}){',' if i < len(c.SCORE_MODES) - 1 else ''}"
              for i, m in enumerate(c.SCORE_MODES)]
    lines += ["}", ""]
    return "\n".join(lines)


def swift() -> str:
    lines = [f"// {HEADER}", "", "/// The bundle contract shared with the Python builder and the Kotlin kit.",
             "nonisolated public enum EdgeM3Contract {",
             f"    public static let schemaVersion = {c.SCHEMA_VERSION}"]
    lines += [f"    public static let {_camel(k)} = {_q(v)}" for k, v in STRINGS.items()]
    lines += [f"    public static let {_camel(k)} = {v}" for k, v in INTS.items()]
    lines += [f"    public static let {_camel(k)}: [String] = [{', '.join(map(_q, v))}]"
              for k, v in LISTS.items()]
    lines += [f"    public static let {_camel(k)}: [Double] = [{', '.join(map(repr, v))}]"
              for k, v in DOUBLE_LISTS.items()]
    lines += [f"    public static let {_camel(k)}: [String: String] = "
              f"[{', '.join(f'{_q(a)}: {_q(b)}' for a, b in v.items())}]" for k, v in STRING_MAPS.items()]
    lines += ["", "    /// Per quant variant: the device tolerance.",
              "    public static let tolerances: [String: Tolerance] = ["]
    lines += [f"        {_q(r.name)}: Tolerance(denseCosineMin: {r.device_tolerance.dense_cosine_min!r}, "
              f"maxAbs: {r.device_tolerance.max_abs!r})," for r in c.RECIPES.values()]
    lines += ["    ]", "", "    /// Per quant variant: the oldest TF Lite runtime whose kernels run it.",
              "    public static let oldestTFLite: [String: String] = ["]
    lines += [f"        {_q(r.name)}: {_q(r.oldest_tflite)}," for r in c.RECIPES.values()]
    lines += ["    ]", "", "    /// Per quant variant: the oldest LiteRT seen to compute it right.",
              "    public static let oldestLiteRT: [String: String] = ["]
    lines += [f"        {_q(r.name)}: {_q(r.oldest_litert)}," for r in c.RECIPES.values()]
    lines += ["    ]", "", f"    /// {_doc(c.weight_cache_name)}",
              *SWIFT_CACHE_NAME.splitlines(),
              "    }", "",
              "    /// What Python's str.splitlines splits on (spec.LINE_BREAKS), each with its escape.",
              "    public static let lineBreakEscapes: [Unicode.Scalar: String] = ["
              f"{_line_break_escapes(SWIFT_SCALAR, ': ')}]", "",
              f"    /// {_doc(c.escape_line_breaks)}",
              *SWIFT_ESCAPE.splitlines(),
              "    }", "}", "",
              "/// Live outputs vs golden.json on a device: the same file on another CPU differs by kernel",
              "/// rounding only (ids, signature and post-processing always compare exactly).",
              "nonisolated public struct Tolerance: Hashable, Sendable {",
              "    public var denseCosineMin: Double",
              "    public var maxAbs: Float", "",
              "    public init(denseCosineMin: Double, maxAbs: Float) {",
              "        self.denseCosineMin = denseCosineMin", "        self.maxAbs = maxAbs", "    }", "}", "",
              "/// What went wrong, for a caller to branch on (`EdgeM3Error.kind`; spec.KIT_ERROR_KINDS).",
              "nonisolated public enum EdgeM3ErrorKind: String, CaseIterable, Hashable, Sendable {"]
    lines += [f"    /// {doc}\n    case {_camel(k.upper())} = {_q(k)}" for k, doc in c.KIT_ERROR_KINDS.items()]
    lines += ["}", "",
              "/// A score mode (spec.SCORE_MODES): what `Retrieval.score` and `EdgeM3Index.search` "
              "take, as an enum.",
              "nonisolated public enum ScoreMode: String, CaseIterable, Hashable, Sendable {"]
    lines += [f"    case {_camel(_mode_case(m))} = {_q(m)}" for m in c.SCORE_MODES]
    lines += ["}", ""]
    return "\n".join(lines)


def outputs() -> dict[Path, str]:
    """Every generated kit file and its text."""
    return {KOTLIN: kotlin(), SWIFT: swift(), KOTLIN_ERRORS: kotlin_errors(),
            KOTLIN_MANIFEST: kotlin_manifest(HEADER), SWIFT_MANIFEST: swift_manifest(HEADER)}


def main(argv: list[str] | None = None) -> int:
    return generate("gen_kit_contract", __doc__, outputs, argv)


if __name__ == "__main__":
    sys.exit(main())

"""Write the kits' copies of the index formats' validation rules from edge_m3/spec/index.py.

    python -m tools.codegen.gen_index_spec            # rewrite the generated kit files
    python -m tools.codegen.gen_index_spec --check    # exit 1 if one is stale (make lint, the tests)

Kotlin: android_assets/src/main/java/dev/edgem3/generated/IndexSpec.kt (object IndexSpec);
Swift: ios_assets/Sources/EdgeM3/Generated/IndexSpec.swift (enum IndexSpec). Both hold the same
tables as spec.index: index.json's checked fields (and the text each refusal says it must be),
the arrays per dense/ColBERT store with their dtypes and shapes, the offsets, ascending, positive
and finite arrays, the meta table's keys with their types and bounds, the passages columns with
their dtype per store (NULL where none), the NULL columns of every store pair, the id and integer
bounds, and the first chunk's number. The kits' readers check a file by reading these tables.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from edge_m3.spec import index as s
from tools.codegen import ROOT, generate, header
from tools.codegen.gen_kit_contract import STRINGS
from tools.codegen.kit_manifest import camel
from tools.codegen.kit_manifest import quote as _q

KOTLIN = ROOT / "android_assets/src/main/java/dev/edgem3/generated/IndexSpec.kt"
SWIFT = ROOT / "ios_assets/Sources/EdgeM3/Generated/IndexSpec.swift"
HEADER = header("gen_index_spec", "edge_m3/spec/index.py")
# A value EdgeM3Contract already names is read from it, never spelled again (test_contract's rule).
_NAMED = {v: k for k, v in reversed(STRINGS.items())} | {s.INDEX_POSTING_WEIGHTS: "INDEX_POSTING_WEIGHTS"}


def _str(v: str, lang: str) -> str:
    """A string value: EdgeM3Contract's constant when it names it, else a literal."""
    if v in _NAMED:
        return f"EdgeM3Contract.{_NAMED[v] if lang == 'kt' else camel(_NAMED[v])}"
    return _q(v)


def _bound(v: int | None, lang: str) -> str:
    """An int64 bound literal (None: no bound)."""
    if v is None:
        return "null" if lang == "kt" else "nil"
    if v == s.INDEX_ID_MIN:
        return "Long.MIN_VALUE" if lang == "kt" else "Int64.min"
    if v == s.INDEX_ID_MAX:
        return "Long.MAX_VALUE" if lang == "kt" else "Int64.max"
    return f"{v}L" if lang == "kt" else str(v)


def _list(items: Any, lang: str) -> str:
    body = ", ".join(_str(x, lang) for x in items)
    return f"listOf({body})" if lang == "kt" else f"[{body}]"


def _map(d: dict[str, Any], lang: str, value: Any = None) -> str:
    value = value or (lambda v: _str(v, lang))
    if lang == "kt":
        return f"mapOf({', '.join(f'{_str(k, lang)} to {value(v)}' for k, v in d.items())})"
    return f"[{', '.join(f'{_str(k, lang)}: {value(v)}' for k, v in d.items())}]" if d else "[:]"


def _manifest_fields(lang: str) -> list[str]:
    """index.json's fields: (key, type, least, most, allowed values, the refusal's `must be` text)."""
    out = []
    for key, kind, rule in s.INDEX_MANIFEST_FIELDS:
        lo, hi = rule if kind == "int" else (None, None)
        values = rule if kind == "enum" else ()
        args = [_q(key), _q(kind), _bound(lo, lang), _bound(hi, lang), _list(values, lang),
                _q(s.manifest_want(kind, rule))]
        out.append(_call("ManifestField", ["key", "type", "min", "max", "values", "want"], args, lang))
    return out


def _arrays(lang: str) -> list[str]:
    out = []
    for name, key, dtypes, shape in s.INDEX_ARRAY_RULES:
        args = [_str(name, lang), _q(s.INDEX_ARRAYS[name]), _q(key), _map(dtypes, lang), _list(shape, lang)]
        out.append(_call("ArrayRule", ["name", "file", "storeKey", "dtypes", "shape"], args, lang))
    return out


def _meta(lang: str) -> list[str]:
    out = []
    for key, (kind, rule) in s.INDEX_DB_META.items():
        lo, hi = rule if kind == "int" else (None, None)
        text = rule if isinstance(rule, str) else ""
        number = rule if kind == "version" else None
        values = rule if isinstance(rule, tuple) and kind != "int" else ()
        args = [_q(key), _q(kind), _str(text, lang), _bound(number, lang), _bound(lo, lang), _bound(hi, lang),
                _list(values, lang)]
        out.append(_call("MetaRule", ["key", "type", "text", "number", "min", "max", "values"], args, lang))
    return out


def _columns(lang: str) -> list[str]:
    out = []
    for name, key, dtypes, count in s.INDEX_DB_COLUMNS:
        args = [_q(name), _q(key), _map(dtypes, lang), _q(count)]
        out.append(_call("Column", ["name", "storeKey", "dtypes", "count"], args, lang))
    return out


def _call(cls: str, names: list[str], args: list[str], lang: str) -> str:
    if lang == "kt":
        return f"{cls}({', '.join(args)})"
    return f"{cls}({', '.join(f'{n}: {a}' for n, a in zip(names, args, strict=True))})"


def _null_columns() -> dict[str, tuple[str, ...]]:
    """"dense/colbert" -> the passages columns such an index leaves NULL."""
    return {f"{d}/{c}": s.null_columns(d, c) for d in s.DENSE_STORES for c in s.COLBERT_STORES}


OFFSETS_DOC = 'Offsets arrays: offsets -> (the array it indexes, the array its starts follow or "rows").'
# (name, Kotlin type, Swift type) of each record's fields.
RECORDS = {
    "ManifestField": [("key", "String", "String"), ("type", "String", "String"), ("min", "Long?", "Int64?"),
                      ("max", "Long?", "Int64?"), ("values", "List<String>", "[String]"),
                      ("want", "String", "String")],
    "ArrayRule": [("name", "String", "String"), ("file", "String", "String"), ("storeKey", "String", "String"),
                  ("dtypes", "Map<String, String>", "[String: String]"), ("shape", "List<String>", "[String]")],
    "MetaRule": [("key", "String", "String"), ("type", "String", "String"), ("text", "String", "String"),
                 ("number", "Long?", "Int64?"), ("min", "Long?", "Int64?"), ("max", "Long?", "Int64?"),
                 ("values", "List<String>", "[String]")],
    "Column": [("name", "String", "String"), ("storeKey", "String", "String"),
               ("dtypes", "Map<String, String>", "[String: String]"), ("count", "String", "String")],
}
DOCS = {
    "ManifestField": "An index.json field: its type (int, enum, arrays, files), bounds, values, and the "
                     "refusal's `must be` text.",
    "ArrayRule": "An array of the index folder: its file, the manifest key deciding it (\"\": every "
                 "index), its dtype per value of that key (absent: no such array), its shape's symbols.",
    "MetaRule": "A meta key of index.sqlite: its type (const, version, int, enum, json, base, "
                "sha256_of) and rule.",
    "Column": "A passages column: the meta key deciding it (\"\": every index), its little-endian dtype "
              "per value (absent: NULL), its count rule.",
}


def _tables(lang: str) -> list[tuple[str, str, list[str], str]]:
    """(name, element type, element literals, doc) of the list tables."""
    return [
        ("MANIFEST_FIELDS", "ManifestField", _manifest_fields(lang),
         "index.json's checked fields, in check order (after format and format_version)."),
        ("ARRAYS", "ArrayRule", _arrays(lang), "The arrays, in the order a reader checks and names them."),
        ("META", "MetaRule", _meta(lang), "index.sqlite's meta keys, in INDEX_DB_META_KEYS' order."),
        ("COLUMNS", "Column", _columns(lang), "The passages table's vector columns, in check order."),
    ]


def _lists() -> dict[str, tuple[str, ...]]:
    return {"ASCENDING": s.INDEX_ASCENDING, "POSITIVE": s.INDEX_POSITIVE, "FINITE": s.INDEX_FINITE}


def _ints() -> dict[str, int]:
    return {"MAX_DIM": s.INDEX_MAX_DIM, "DB_INT_DIGITS": s.INDEX_DB_INT_DIGITS,
            "DB_FIRST_CHUNK": s.INDEX_DB_FIRST_CHUNK}


def kotlin() -> str:
    lines = [f"// {HEADER}", "package dev.edgem3", "",
             "/** The index folder's and index.sqlite's validation rules (edge_m3/spec/index.py), as data. */",
             "object IndexSpec {"]
    lines += [f"    const val {k} = {v}" for k, v in _ints().items()]
    lines += [f"    const val ID_MIN = {_bound(s.INDEX_ID_MIN, 'kt')}",
              f"    const val ID_MAX = {_bound(s.INDEX_ID_MAX, 'kt')}",
              f"    const val DB_INT_MAX = {_bound(s.INDEX_DB_INT_MAX, 'kt')}"]
    lines += [f"    val {k}: List<String> = {_list(v, 'kt')}" for k, v in _lists().items()]
    lines += [f"    /** {OFFSETS_DOC} */",
              "    val OFFSETS: Map<String, Pair<String, String>> = mapOf("
              + ", ".join(f"{_q(k)} to Pair({_q(a)}, {_q(b)})" for k, (a, b) in s.INDEX_OFFSETS.items()) + ")",
              "    /** \"dense/colbert\" stores -> the passages columns such an index leaves NULL. */",
              "    val NULL_COLUMNS: Map<String, List<String>> = "
              f"{_map(_null_columns(), 'kt', lambda v: _list(v, 'kt'))}"]
    for cls, fields in RECORDS.items():
        lines += ["", f"    /** {DOCS[cls]} */",
                  f"    data class {cls}({', '.join(f'val {n}: {t}' for n, t, _ in fields)})"]
    for name, cls, items, doc in _tables("kt"):
        lines += ["", f"    /** {doc} */", f"    val {name}: List<{cls}> = listOf("]
        lines += [f"        {x}," for x in items]
        lines[-1] = lines[-1].rstrip(",")
        lines += ["    )"]
    lines += ["}"]
    return "\n".join(lines) + "\n"


def swift() -> str:
    lines = [f"// {HEADER}", "",
             "/// The index folder's and index.sqlite's validation rules (edge_m3/spec/index.py), as data.",
             "nonisolated public enum IndexSpec {"]
    lines += [f"    public static let {camel(k)} = {v}" for k, v in _ints().items()]
    lines += [f"    public static let idMin: Int64 = {_bound(s.INDEX_ID_MIN, 'swift')}",
              f"    public static let idMax: Int64 = {_bound(s.INDEX_ID_MAX, 'swift')}",
              f"    public static let dbIntMax: Int64 = {_bound(s.INDEX_DB_INT_MAX, 'swift')}"]
    lines += [f"    public static let {camel(k)}: [String] = {_list(v, 'swift')}" for k, v in _lists().items()]
    lines += [f"    /// {OFFSETS_DOC}",
              "    public static let offsets: [String: (indexes: String, starts: String)] = ["
              + ", ".join(f"{_q(k)}: ({_q(a)}, {_q(b)})" for k, (a, b) in s.INDEX_OFFSETS.items()) + "]",
              "    /// \"dense/colbert\" stores -> the passages columns such an index leaves NULL.",
              "    public static let nullColumns: [String: [String]] = "
              f"{_map(_null_columns(), 'swift', lambda v: _list(v, 'swift'))}"]
    for cls, fields in RECORDS.items():
        lines += ["", f"    /// {DOCS[cls]}", f"    public struct {cls}: Hashable, Sendable {{"]
        lines += [f"        public let {n}: {t}" for n, _, t in fields]
        lines += ["    }"]
    for name, cls, items, doc in _tables("swift"):
        lines += ["", f"    /// {doc}", f"    public static let {camel(name)}: [{cls}] = ["]
        lines += [f"        {x}," for x in items]
        lines += ["    ]"]
    lines += ["}"]
    return "\n".join(lines) + "\n"


def outputs() -> dict[Path, str]:
    return {KOTLIN: kotlin(), SWIFT: swift()}


def main(argv: list[str] | None = None) -> int:
    return generate("gen_index_spec", __doc__, outputs, argv)


if __name__ == "__main__":
    sys.exit(main())

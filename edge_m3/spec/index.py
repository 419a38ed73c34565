"""The index folder and the writable index's `index.sqlite`: names, arrays, bounds, schema, and
their validation rules as data (the tables at the end), which Python's readers check a file by
and tools/codegen/gen_index_spec.py writes into the kits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# --------------------------------------------------------------------------- retrieval index
# An index folder (docs/index-format.md): INDEX_MANIFEST, and raw little-endian arrays that the
# kits memory-map. Read, written and validated by edge_m3/retrieval/index_folder.py only.
INDEX_FORMAT = "edge-m3-index"
INDEX_FORMAT_VERSION = 1
INDEX_MANIFEST = "index.json"
INDEX_IDS = "ids.json"  # the passage ids, a JSON array (strings or integers), row order
DENSE_STORES = ("float32", "int8")
COLBERT_STORES = ("fp16", "int8", "none")
# The postings' weights array: named like the model output SPARSE_WEIGHTS, another thing.
INDEX_POSTING_WEIGHTS = "sparse_weights"
# Array name -> file; the manifest gives each one's dtype and shape.
INDEX_ARRAYS = {
    "dense": "dense.bin",  # [N, D] float32, or int8 codes with dense_scale
    "dense_scale": "dense_scale.bin",  # [N] float32 (int8 store only)
    "sparse_tokens": "sparse_tokens.bin",  # [T] int32, ascending token ids
    "sparse_offsets": "sparse_offsets.bin",  # [T + 1] int64 into the postings
    "sparse_rows": "sparse_rows.bin",  # [P] int32 passage rows, ascending within a token
    INDEX_POSTING_WEIGHTS: "sparse_weights.bin",  # [P] float32, > 0
    "colbert_offsets": "colbert_offsets.bin",  # [N + 1] int64 into the vectors
    "colbert": "colbert.bin",  # [V, D] float16, or int8 codes with colbert_scale
    "colbert_scale": "colbert_scale.bin",  # [V] float32 (int8 store only)
}
# dtype names in the manifest -> numpy's little-endian spelling (the kits read the same bytes).
INDEX_DTYPES = {"float32": "<f4", "float16": "<f2", "int8": "i1", "int32": "<i4", "int64": "<i8"}
# An index's width (index.json's `dim`, a writable index's meta `dim`): 1 to INDEX_MAX_DIM. No
# text-embedding model's hidden size comes near it (BGE-M3's is 1024); a larger one is a corrupt
# file, refused as corrupt_index before a reader sizes anything by it (a query of 2^31 floats, or
# `dim * 4` past an integer's range, as Swift's writable reader trapped on before issue 38).
INDEX_MAX_DIM = 65536
# The integers a writable index's meta holds as text (format_version, dim, generation): ASCII
# decimal digits only, no sign, space or other script's digits (each language's own integer parser
# accepts a different superset), and at most 2^63 - 1.
INDEX_DB_INT_MAX = 2**63 - 1
# What an index's `bundle` (index.json's entry, a writable index's meta `bundle`) must hold as
# strings when it is not null: the model and tokenizer that embedded the passages (Python's
# retrieval.index_folder.BundleIdentity; `quant` and `path` are informational). Anything else is refused
# as corrupt_index by all three readers.
INDEX_BUNDLE_KEYS = ("model_file", "model_sha256", "tokenizer_file", "tokenizer_sha256")
# A passage longer than the largest signature is split into windows of W = L - 2 tokens that
# overlap by W * CHUNK_OVERLAP_PERCENT // 100 tokens (docs/index-format.md, "Passages and
# chunks"); rows sharing an id are one passage's chunks, and search ranks passages by their best.
CHUNK_OVERLAP_PERCENT = 25

# --------------------------------------------------------------------------- writable index
# A writable index (issue 35; docs/index-format.md, "The writable index"): INDEX_DB in the index
# folder holds what was written since its base (a format-1 folder, memory-mapped, read-only):
# the passages added since, in their stored form, and the base rows removed. Read and written by
# edge_m3/retrieval/writable.py and the kits' EdgeM3WritableIndex, with this schema only.
INDEX_DB = "index.sqlite"
INDEX_DB_FORMAT = "edge-m3-index-db"
# 2: passages have a `chunk` column (issue 35, "Passages and chunks"); 1 (a pre-release of
# 2026-11-25, never in a release) is refused as older.
INDEX_DB_VERSION = 2
# PRAGMA application_id of every INDEX_DB ("EM3I"): another program's SQLite file is refused.
INDEX_DB_APPLICATION_ID = 0x454D3349
# A compaction writes the new base into INDEX_BASE_PREFIX + generation (a format-1 folder).
INDEX_BASE_PREFIX = "base-"
# A second writer waits this long for the first one's transaction, then is refused ("busy").
INDEX_DB_BUSY_MS = 5000
# A reload is one committed state: when another connection commits while one reads the database
# and the base it names (a compaction deletes the base it replaced right after its commit), the
# reader reads again (PRAGMA data_version before and after); after this many tries in a row it
# reads under the writer lock (BEGIN IMMEDIATE: no commit, no compaction meanwhile).
INDEX_DB_RELOADS = 3
# meta keys (values are text): format, format_version, dim, dense, colbert, bundle (JSON, or
# "null"), base ("" none, "." the folder itself, or INDEX_BASE_PREFIX + n, n an integer as the
# others: ASCII digits, at most INDEX_DB_INT_MAX), base_sha256 (sha256 of
# the base's INDEX_MANIFEST, "" without a base), generation (decimal, +1 per compaction).
# The writable index's meta table: key -> (type, rule), in INDEX_DB_META_KEYS' order. Types:
#   "const": exactly this text; "version": a meta integer equal to this (older/newer named);
#   "int": a meta integer (ASCII digits, <= INDEX_DB_INT_MAX) within (least, most);
#   "enum": one of these; "json": JSON, null or an object of INDEX_BUNDLE_KEYS' strings;
#   "base": "" (none), "." (the folder itself) or INDEX_BASE_PREFIX + a meta integer;
#   "sha256_of": "" exactly when that key is "" (the base's INDEX_MANIFEST sha256).
INDEX_DB_META: dict[str, tuple[str, Any]] = {
    "format": ("const", INDEX_DB_FORMAT),
    "format_version": ("version", INDEX_DB_VERSION),
    "dim": ("int", (1, INDEX_MAX_DIM)),
    "dense": ("enum", DENSE_STORES),
    "colbert": ("enum", COLBERT_STORES),
    "bundle": ("json", INDEX_BUNDLE_KEYS),
    "base": ("base", INDEX_BASE_PREFIX),
    "base_sha256": ("sha256_of", "base"),
    "generation": ("int", (0, INDEX_DB_INT_MAX)),
}
INDEX_DB_META_KEYS = tuple(INDEX_DB_META)
# The tables, created in this order in one transaction. One passages row per chunk: a passage's
# chunks are 0, 1, ... in consecutive seqs (docs/index-format.md, "Passages and chunks"). `id`
# has no declared type (SQLite's BLOB affinity): an integer id and a text id stay what they
# are, 1 and "1" are two ids. A passage's
# vectors are stored as the index stores them (little-endian): dense float32 [D] or int8 [D]
# codes with dense_scale float32 [1]; lex_tokens int32 [n] ascending and lex_weights float32 [n];
# colbert float16 [m, D] or int8 [m, D] codes with colbert_scale float32 [m]; NULL without ColBERT.
INDEX_DB_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)",
    "CREATE TABLE passages (seq INTEGER PRIMARY KEY AUTOINCREMENT, id NOT NULL, "
    "chunk INTEGER NOT NULL, dense BLOB NOT NULL, dense_scale BLOB, lex_tokens BLOB NOT NULL, "
    "lex_weights BLOB NOT NULL, colbert BLOB, colbert_scale BLOB, UNIQUE (id, chunk))",
    "CREATE TABLE removed (row INTEGER PRIMARY KEY NOT NULL)",
)

# --------------------------------------------------------------------------- the rules, as data
# What a reader checks, written once (issue 59): Python's readers (retrieval/index_folder.py:
# read_manifest, read_folder, check_layout; retrieval/store.py: the database) read these tables, and
# tools/codegen/gen_index_spec.py writes them into the kits (generated IndexSpec.kt / IndexSpec.swift).

# A passage id: an int64 or a string (ids.json, the passages table's `id`); an integer outside these
# bounds is refused.
INDEX_ID_MIN, INDEX_ID_MAX = -(2**63), 2**63 - 1
# A meta integer's most digits (INDEX_DB_INT_MAX has 19): a longer text is refused before parsing.
INDEX_DB_INT_DIGITS = len(str(INDEX_DB_INT_MAX))

# index.json's checked keys, in the order they are checked, each (key, type, rule):
#   "int": (least, most or None); "enum": the allowed strings; "arrays" and "files": the nested
#   objects below (INDEX_ARRAY_FIELDS, INDEX_FILE_FIELDS). `format` must be INDEX_FORMAT and
#   `format_version` INDEX_FORMAT_VERSION, checked first; `bundle` is null or INDEX_BUNDLE_KEYS.
INDEX_MANIFEST_FIELDS: tuple[tuple[str, str, Any], ...] = (
    ("count", "int", (0, None)),
    ("dim", "int", (1, INDEX_MAX_DIM)),
    ("dense", "enum", DENSE_STORES),
    ("colbert", "enum", COLBERT_STORES),
    ("arrays", "arrays", "known arrays with file, dtype and shape"),
    ("files", "files", "{file: {sha256, size}}"),
)
# An `arrays` entry: {file: INDEX_ARRAYS[name], dtype: a key of INDEX_DTYPES, shape: [ints >= 0]};
# a `files` entry: {sha256: string, size: integer}. Every array's file and INDEX_IDS are listed.
INDEX_ARRAY_FIELDS = {"file": "string", "dtype": "string", "shape": "list of int"}
INDEX_FILE_FIELDS = {"sha256": "string", "size": "int"}

# The arrays an index holds, in the order a reader checks (and names) them: (array, the manifest
# key whose value decides it or "" for every index, {that value: dtype} (a value not listed: the
# array must be absent), shape). Shape symbols: rows (count), dim, tokens (postings lists),
# postings, vectors (ColBERT vectors); "+1" an offsets array's extra end.
INDEX_ARRAY_RULES: tuple[tuple[str, str, dict[str, str], tuple[str, ...]], ...] = (
    ("dense", "dense", {"float32": "float32", "int8": "int8"}, ("rows", "dim")),
    ("sparse_tokens", "", {"": "int32"}, ("tokens",)),
    ("sparse_offsets", "", {"": "int64"}, ("tokens+1",)),
    ("sparse_rows", "", {"": "int32"}, ("postings",)),
    (INDEX_POSTING_WEIGHTS, "", {"": "float32"}, ("postings",)),
    ("dense_scale", "dense", {"int8": "float32"}, ("rows",)),
    ("colbert_offsets", "colbert", {"fp16": "int64", "int8": "int64"}, ("rows+1",)),
    ("colbert", "colbert", {"fp16": "float16", "int8": "int8"}, ("vectors", "dim")),
    ("colbert_scale", "colbert", {"int8": "float32"}, ("vectors",)),
)
# Offsets arrays: {offsets: (the array it indexes, its starts' array or "rows")}: starts at 0,
# never decreases, ends at the indexed array's length.
INDEX_OFFSETS = {"colbert_offsets": ("colbert", "rows"), "sparse_offsets": ("sparse_rows", "sparse_tokens")}
# Arrays whose values are strictly ascending: sparse_tokens over the whole array, sparse_rows
# within each token's postings.
INDEX_ASCENDING = ("sparse_tokens", "sparse_rows")
# Arrays whose every value is finite and > 0 (scales are max|x| / 127, weights > 0), in check order.
INDEX_POSITIVE = ("dense_scale", "colbert_scale", INDEX_POSTING_WEIGHTS)
# Arrays whose float values are finite (checked with the sha256).
INDEX_FINITE = ("dense", "colbert")

# The passages table's vector columns, in check order: (column, the meta key whose value decides
# it or "" for every index, {that value: little-endian dtype} (a value not listed: NULL), count).
# Counts: "dim" ([D]), "1", "any" (n), "lex_tokens" (as many as it), "rows of dim" ([m, D]),
# "colbert rows" (m).
INDEX_DB_COLUMNS: tuple[tuple[str, str, dict[str, str], str], ...] = (
    ("dense", "dense", {"float32": "<f4", "int8": "i1"}, "dim"),
    ("dense_scale", "dense", {"int8": "<f4"}, "1"),
    ("lex_tokens", "", {"": "<i4"}, "any"),
    ("lex_weights", "", {"": "<f4"}, "lex_tokens"),
    ("colbert", "colbert", {"fp16": "<f2", "int8": "i1"}, "rows of dim"),
    ("colbert_scale", "colbert", {"int8": "<f4"}, "colbert rows"),
)
# A passage's chunks: rows in seq order, its chunks INDEX_DB_FIRST_CHUNK, +1, ... in consecutive
# seqs (one transaction wrote them); an id is an integer or text, never both in one passage.
INDEX_DB_FIRST_CHUNK = 0


def column_dtype(column: str, meta: Mapping[str, str]) -> str | None:
    """A passages column's dtype for these stores (meta dense/colbert), or None: it must be NULL."""
    for name, key, dtypes, _ in INDEX_DB_COLUMNS:
        if name == column:
            return dtypes.get(meta[key] if key else "")
    raise KeyError(column)


def null_columns(dense: str, colbert: str) -> tuple[str, ...]:
    """The passages columns a dense/colbert index leaves NULL."""
    stores = {"dense": dense, "colbert": colbert, "": ""}
    return tuple(name for name, key, dtypes, _ in INDEX_DB_COLUMNS if stores[key] not in dtypes)


def array_dtypes(dense: str, colbert: str) -> dict[str, str]:
    """The arrays a dense/colbert index holds and their dtypes, in INDEX_ARRAY_RULES' order."""
    stores = {"dense": dense, "colbert": colbert, "": ""}
    return {name: dtypes[stores[key]] for name, key, dtypes, _ in INDEX_ARRAY_RULES if stores[key] in dtypes}


def manifest_want(kind: str, rule: Any) -> str:
    """What an index.json field must be, as its refusal says it (`{key}: must be {want}`)."""
    if kind == "int":
        return f"an integer >= {rule[0]}" if rule[1] is None else f"an integer from {rule[0]} to {rule[1]}"
    if kind == "enum":
        return f"one of {', '.join(rule)}"
    return str(rule)

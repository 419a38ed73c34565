"""The index folder and the writable index's `index.sqlite`: names, arrays, bounds, schema
(moved verbatim from contract.py's "retrieval index" and "writable index" sections)."""

from __future__ import annotations

# --------------------------------------------------------------------------- retrieval index
# An index folder (docs/index-format.md): INDEX_MANIFEST, and raw little-endian arrays that the
# kits memory-map. Read, written and validated by edge_m3/retrieval/store.py only.
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
# retrieval.index.BundleIdentity; `quant` and `path` are informational). Anything else is refused
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
INDEX_DB_META_KEYS = ("format", "format_version", "dim", "dense", "colbert", "bundle", "base",
                      "base_sha256", "generation")
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

"""A writable index's database that SQLite reads without complaint but whose content lies: each
case is a committed `writable` seed changed by SQL (issue 38: found by the three-way differential
of tools/fuzz/kits/loop.py, whose mutator changes databases through SQLite itself). Every reader
(Python, Kotlin, Swift) must refuse each one as corrupt_index (docs/index-format.md, "The
schema"); built here rather than committed as binaries. tests/test_fuzz.py asks Python,
tests/test_fuzz_kits.py all three."""

from __future__ import annotations

import sqlite3
import struct
import tempfile
from pathlib import Path

from tools.fuzz.harness import SEEDS

_F16, _NONE, _INT8 = "float32-fp16.sqlite", "float32-none.sqlite", "int8-int8.sqlite"



def _set(column: str, value: object) -> tuple[str, tuple]:
    """The first passage's `column` set to `value`."""
    return f"UPDATE passages SET {column} = ? WHERE seq = 1", (value,)


def _meta(key: str, value: str) -> str:
    return f"UPDATE meta SET value = '{value}' WHERE key = '{key}'"


# name: (seed, statements: SQL, or SQL and its parameters); the comments say what the readers did
# before the fixes of 2026-11-27
LIES: dict[str, tuple[str, list]] = {
    # a column the stores do not use holds a value (Python ignored it; the kits refused)
    "float32-dense-scale": (_F16, [_set("dense_scale", struct.pack("<f", 0.5))]),
    "fp16-colbert-scale": (_F16, [_set("colbert_scale", struct.pack("<3f", 1, 1, 1))]),
    "none-colbert-text": (_NONE, [_set("colbert", "abcdefg")]),
    # a vector column that is text, not a blob (Swift read the text's bytes as the vector)
    "dense-text": (_F16, ["UPDATE passages SET dense = CAST(dense AS TEXT) WHERE seq = 1"]),
    # a scale not > 0, a value not finite (the kits searched with it; Python refused at search only)
    "int8-dense-scale-negative": (_INT8, [_set("dense_scale", struct.pack("<f", -1e-38))]),
    "int8-colbert-scale-zero": (_INT8, ["UPDATE passages SET colbert_scale = zeroblob(length(colbert_scale))"]),
    "fp16-colbert-inf": (_F16, [("UPDATE passages SET colbert = ? || substr(colbert, 3)", (b"\x00\x7c",))]),
    "float32-dense-nan": (_F16, [_set("dense", b"\x00\x00\xc0\x7f" * 8)]),
    # meta: a key that is not text (Python and Swift read it), text that is not UTF-8 (the kits
    # read it with replacement characters)
    "meta-key-blob": (_F16, [("INSERT INTO meta VALUES (?, '')", (b"\xff" * 8,))]),
    "meta-key-not-utf8": (_F16, [("INSERT INTO meta VALUES (CAST(? AS TEXT), 'null')", (b"b\xc3",))]),
    "id-not-utf8": (_F16, [("UPDATE passages SET id = CAST(? AS TEXT) WHERE seq = 1", (b"a\xff",))]),
    # meta values past their rule (Python took each of these)
    "base-sha256-without-base": (_F16, [_meta("base_sha256", "fp16")]),
    "meta-bundle-no-model": (_F16, [_meta("bundle", '{"a": 1}')]),
    "dim-past-max": (_F16, [_meta("dim", "65537"), "DELETE FROM passages"]),
    "generation-past-int64": (_F16, [_meta("generation", "9223372036854775808")]),
    "generation-signed": (_F16, [_meta("generation", "+0")]),
    "generation-5000-digits": (_F16, [_meta("generation", "1" * 5000)]),
    "user-version-newer": (_F16, ["PRAGMA user_version = 16777218"]),
    # Swift trapped on `dim * 4` (a crash); Python raised ValueError from int("²") (a traceback)
    "dim-int64-max": (_F16, [_meta("dim", "9223372036854775807")]),
    "format-version-superscript": (_F16, [_meta("format_version", "\u00b2")]),
}


def build(name: str) -> bytes:
    """The case's database bytes: its seed changed by its statements, in rollback-journal mode."""
    seed, statements = LIES[name]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "index.sqlite"
        path.write_bytes((SEEDS / "writable" / seed).read_bytes())
        con = sqlite3.connect(path, isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode=DELETE")
            for s in statements:
                con.execute(*s) if isinstance(s, tuple) else con.execute(s)
        finally:
            con.close()
        return path.read_bytes()

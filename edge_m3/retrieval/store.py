"""The writable index's store: INDEX_DB's SQLite I/O and its validation (docs/index-format.md,
"The writable index").

One module speaks SQL: it makes the database, connects to it (the header's checks), reads one
committed state (meta, tombstones, passages) and refuses a corrupt one in one line each, and
writes a transaction. What the state means (a base plus a delta, searched) is segments.py's.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.errors import EdgeM3Error, OptionError, one_line
from edge_m3.retrieval.index_folder import BundleIdentity, CorruptIndexError, PassageId
from edge_m3.spec import (
    INDEX_BASE_PREFIX,
    INDEX_DB,
    INDEX_DB_APPLICATION_ID,
    INDEX_DB_BUSY_MS,
    INDEX_DB_FORMAT,
    INDEX_DB_INT_MAX,
    INDEX_DB_SCHEMA,
    INDEX_DB_VERSION,
)
from edge_m3.spec.index import (
    INDEX_DB_COLUMNS,
    INDEX_DB_META,
    INDEX_ID_MAX,
    INDEX_ID_MIN,
    column_dtype,
    null_columns,
)

_INT64 = (INDEX_ID_MIN, INDEX_ID_MAX)
INDEX_DB_COLUMN_NAMES = tuple(name for name, *_ in INDEX_DB_COLUMNS)  # the SELECT's vector columns
_SELECT_PASSAGES = f"SELECT id, chunk, {', '.join(INDEX_DB_COLUMN_NAMES)} FROM passages ORDER BY seq"
_INSERT_PASSAGE = (f"INSERT INTO passages (id, chunk, {', '.join(INDEX_DB_COLUMN_NAMES)}) "
                   f"VALUES ({', '.join('?' * (2 + len(INDEX_DB_COLUMN_NAMES)))})")
# What reading or writing the database raises: SQLite's errors, and a UnicodeDecodeError where
# CPython decodes SQLite's message or a text value as UTF-8 and a malformed file holds other bytes
# (a damaged schema's "near ..." message; issue 38, regression writable/schema-message-not-utf8).
DB_ERRORS = (sqlite3.Error, UnicodeDecodeError)


class WriteRefused(EdgeM3Error):
    """A write that changed nothing, with the kits' error kind (spec.KIT_ERROR_KINDS):
    duplicate_id, unknown_id, index_busy or write_failed."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Retry(Exception):
    """Another connection committed between our check and our lock: reload and check again."""


@dataclass(frozen=True)
class Stored:
    """One passage as the index stores it: the bytes a format-1 base would hold for its row."""

    dense: np.ndarray  # float32 [D] or int8 [D]
    dense_scale: np.ndarray | None  # float32 [1] (int8 store)
    lex_tokens: np.ndarray  # int32 [n] ascending
    lex_weights: np.ndarray  # float32 [n] > 0
    colbert: np.ndarray | None  # float16 or int8 [m, D]; None without ColBERT
    colbert_scale: np.ndarray | None  # float32 [m] (int8 store)


@dataclass(frozen=True)
class Meta:
    """The meta table, checked: the index's shape, its bundle and the base it is written on."""

    dim: int
    dense: str
    colbert: str
    bundle: BundleIdentity | None
    base: str
    base_sha256: str
    generation: int


@dataclass(frozen=True)
class Snapshot:
    """One committed state as read: data_version, meta rows, tombstones, passages rows (unchecked)."""

    version: int
    meta_rows: list[Any]
    removed: list[Any]
    rows: list[Any]


def id_value(pid: Any, what: str = "id") -> PassageId:
    """An id checked: a string, or an integer SQLite holds (64 bits)."""
    if isinstance(pid, bool) or not isinstance(pid, int | str | np.integer):
        raise OptionError(what, repr(pid), "must be an integer or a string")
    if isinstance(pid, int | np.integer):
        pid = int(pid)
        if not _INT64[0] <= pid <= _INT64[1]:
            raise OptionError(what, pid, "must fit in 64 bits")
    return pid


def meta_int(text: str) -> int | None:
    """A meta integer (spec.INDEX_DB_INT_MAX): ASCII digits only, at most 2^63 - 1; else None."""
    # (the length first: int() of over 4,300 digits raises ValueError rather than read them)
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        return None
    value = int(text)
    return value if value <= INDEX_DB_INT_MAX else None


def base_generation(name: str) -> int | None:
    """The n of a base folder's name, INDEX_BASE_PREFIX + n (n a meta integer); else None."""
    return meta_int(name[len(INDEX_BASE_PREFIX):]) if name.startswith(INDEX_BASE_PREFIX) else None


def meta_values(dim: int, dense: str, colbert: str, bundle: BundleIdentity | None, base: str,
                base_sha: str, generation: int) -> dict[str, str]:
    """The meta table's rows (INDEX_DB_META_KEYS, all text)."""
    return {"format": INDEX_DB_FORMAT, "format_version": str(INDEX_DB_VERSION), "dim": str(dim),
            "dense": dense, "colbert": colbert,
            "bundle": json.dumps(bundle.to_json() if bundle else None, sort_keys=True),
            "base": base, "base_sha256": base_sha, "generation": str(generation)}


# ---------------------------------------------------------------------- errors


def corrupt(where: str, exc: BaseException) -> CorruptIndexError:
    return CorruptIndexError(f"{where}: unreadable ({one_line(exc)}); refusing a corrupt index database")


def refusal(exc: BaseException, where: Path) -> EdgeM3Error:
    """SQLite's and the OS's failures as the kits' kinds, one line (a malformed database: corrupt_index)."""
    text = one_line(exc)
    low = text.lower()
    if "locked" in low or "busy" in low:
        return WriteRefused("index_busy", f"{where}: another writer holds the index ({text})")
    if isinstance(exc, OSError) or any(w in low for w in ("readonly", "read-only", "full", "disk i/o",
                                                          "unable to open")):
        return WriteRefused("write_failed", f"{where}: cannot write ({text}); nothing was changed")
    return CorruptIndexError(f"{where}: {text}; refusing a corrupt index database")


# ---------------------------------------------------------------------- files


def read_only_fs(path: Path) -> bool:
    """Whether `path` is on a filesystem mounted read-only (root can write anything else)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def fsync_path(path: Path) -> None:
    """fsync a file or a folder (a folder: its entries, so a link survives a power cut)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_db(folder: Path, meta: Mapping[str, str]) -> None:
    """INDEX_DB written whole under a temporary name, then linked in: never half a database,
    and of two processes creating it at once one wins and the other opens it."""
    tmp = folder / f".{INDEX_DB}.{os.getpid()}.tmp"
    final = folder / INDEX_DB
    try:
        for stale in (tmp, Path(f"{tmp}-journal")):
            stale.unlink(missing_ok=True)
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            con.execute(f"PRAGMA application_id = {INDEX_DB_APPLICATION_ID}")
            con.execute(f"PRAGMA user_version = {INDEX_DB_VERSION}")
            con.execute("PRAGMA journal_mode = WAL")
            con.execute("BEGIN")
            for sql in INDEX_DB_SCHEMA:
                con.execute(sql)
            con.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
            con.execute("COMMIT")
        finally:
            con.close()
        fsync_path(tmp)
        try:
            os.link(tmp, final)
        except FileExistsError:
            pass  # another process made it first: open theirs
        tmp.unlink()
        fsync_path(folder)
    except (OSError, sqlite3.Error) as exc:
        tmp.unlink(missing_ok=True)
        raise WriteRefused("write_failed", f"{final}: cannot create the database "
                           f"({one_line(exc)})") from None


# ---------------------------------------------------------------------- connecting


def connect(folder: Path, durable: bool, verify: bool) -> sqlite3.Connection:
    """A connection to the folder's INDEX_DB, its header checked (application_id, user_version,
    quick_check when `verify`); any refusal closes it."""
    where = folder / INDEX_DB
    db: sqlite3.Connection | None = None
    try:
        db = sqlite3.connect(where, timeout=INDEX_DB_BUSY_MS / 1000, isolation_level=None,
                             check_same_thread=False)
        db, app = _application_id(db, folder)
        _check_header(db, where, app)
        if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            try:
                db.execute("PRAGMA journal_mode = WAL")
            except sqlite3.OperationalError:
                pass  # a read-only file: searched as it is
        db.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
        if verify:
            bad = db.execute("PRAGMA quick_check").fetchone()[0]
            if bad != "ok":
                raise CorruptIndexError(f"{where}: damaged ({one_line(bad)}); refusing a corrupt index "
                                        "database")
        return db
    except DB_ERRORS as exc:
        if db is not None:
            db.close()
        raise corrupt(str(where), exc) from None
    except EdgeM3Error:
        if db is not None:
            db.close()
        raise


def _application_id(db: sqlite3.Connection, folder: Path) -> tuple[sqlite3.Connection, int]:
    """The header's application_id, reopening a database on a read-only filesystem as immutable."""
    where = folder / INDEX_DB
    try:
        return db, db.execute("PRAGMA application_id").fetchone()[0]
    except sqlite3.OperationalError:
        # A WAL database on a read-only filesystem cannot make its -shm file: with no -wal
        # file (nothing uncheckpointed) it is read as immutable, and searched as it is.
        if os.access(folder, os.W_OK) and not read_only_fs(folder):
            raise
        db.close()
        if Path(f"{where}-wal").exists():
            raise EdgeM3Error(f"{where}: on a read-only filesystem with a {where.name}-wal file "
                              "not yet folded in; open it once where it can be written") from None
        db = sqlite3.connect(f"{where.resolve().as_uri()}?immutable=1", uri=True,
                             isolation_level=None, check_same_thread=False)
        return db, db.execute("PRAGMA application_id").fetchone()[0]


def _check_header(db: sqlite3.Connection, where: Path, app: int) -> None:
    if app != INDEX_DB_APPLICATION_ID:
        raise CorruptIndexError(f"{where}: not an edge-m3 index database (application_id {app})")
    version = db.execute("PRAGMA user_version").fetchone()[0]  # the header's, as the kits read it
    if version != INDEX_DB_VERSION:
        who = "an older" if version < INDEX_DB_VERSION else "a newer"
        raise CorruptIndexError(f"{where}: user_version {version}: written by {who} edge-m3 (this one "
                                f"reads {INDEX_DB_VERSION})")


def data_version(db: sqlite3.Connection, where: Path) -> int:
    """PRAGMA data_version: changes when another connection commits."""
    try:
        return db.execute("PRAGMA data_version").fetchone()[0]
    except DB_ERRORS as exc:
        raise CorruptIndexError(f"{where}: unreadable ({one_line(exc)})") from None


# ---------------------------------------------------------------------- reading


def read_version(db: sqlite3.Connection, folder: Path) -> int:
    """PRAGMA data_version before a read (a failure: a corrupt database, as the SELECTs')."""
    try:
        return db.execute("PRAGMA data_version").fetchone()[0]
    except DB_ERRORS as exc:
        raise corrupt(str(folder / INDEX_DB), exc) from None


def read_snapshot(db: sqlite3.Connection, folder: Path, version: int) -> Snapshot | None:
    """Meta, tombstones and passages as one committed state (`version`: read_version's, just
    before); None when another connection committed between the SELECTs (read again)."""
    where = folder / INDEX_DB
    try:
        meta_rows = db.execute("SELECT key, value FROM meta").fetchall()
        removed = [r for (r,) in db.execute("SELECT row FROM removed ORDER BY row")]
        rows = db.execute(_SELECT_PASSAGES).fetchall()
    except DB_ERRORS as exc:
        raise corrupt(str(where), exc) from None
    if data_version(db, where) != version:
        return None
    return Snapshot(version, meta_rows, removed, rows)


def _or(keys: Sequence[str]) -> str:
    """`a, b or c`: the keys a refusal names."""
    return f"{', '.join(keys[:-1])} or {keys[-1]}" if len(keys) > 1 else "".join(keys)


def _of_kind(*kinds: str) -> list[str]:
    """The meta keys of these types (spec.index.INDEX_DB_META), in its order."""
    return [k for k, (kind, _) in INDEX_DB_META.items() if kind in kinds]


def _meta_text(meta_rows: Sequence[Any], where: str) -> dict[str, str]:
    """The meta rows as {key: value}: every key and value text, every key there."""
    if any(not isinstance(k, str) or not isinstance(v, str) for k, v in meta_rows):
        raise CorruptIndexError(f"{where}: meta holds a key or value that is not text; not an edge-m3 "
                                "index database")
    meta = dict(meta_rows)
    missing = [k for k in INDEX_DB_META if k not in meta]
    if missing:
        raise CorruptIndexError(f"{where}: meta lacks {', '.join(missing)}; not an edge-m3 index database")
    return meta


def _check_format(meta: Mapping[str, str], where: str) -> None:
    """The "const" keys (format) and the "version" keys (format_version, older or newer named)."""
    for key in _of_kind("const"):
        if meta[key] != INDEX_DB_META[key][1]:
            raise CorruptIndexError(f"{where}: {key} {meta[key]!r} is not {INDEX_DB_META[key][1]}")
    for key in _of_kind("version"):
        want, version = INDEX_DB_META[key][1], meta_int(meta[key])
        if version != want:
            older = version is not None and version < want
            raise CorruptIndexError(f"{where}: {key} {meta[key]!r}: written by "
                                    f"{'an older' if older else 'a newer'} edge-m3 (this one reads {want})")


def _in_rule(kind: str, rule: Any, text: str, value: int | None) -> bool:
    return (rule[0] <= value <= rule[1]) if kind == "int" and value is not None else text in rule


def check_meta(meta_rows: Sequence[Any], where: str) -> Meta:
    """The meta table checked by spec.index.INDEX_DB_META, key by key (one line per problem)."""
    meta = _meta_text(meta_rows, where)
    _check_format(meta, where)
    ints = {k: meta_int(meta[k]) for k in _of_kind("int")}
    try:
        parsed = {k: json.loads(meta[k]) for k in _of_kind("json")}
    except (ValueError, RecursionError):  # RecursionError: a bundle of deeply nested lists
        raise CorruptIndexError(f"{where}: meta {_or(_of_kind('json'))} malformed") from None
    if any(v is None for v in ints.values()):
        raise CorruptIndexError(f"{where}: meta {_or(list(ints))} malformed")
    # the bounds a meta integer's own range does not already hold, and the stores
    ranged = [k for k in _of_kind("int", "enum") if INDEX_DB_META[k][1] != (0, INDEX_DB_INT_MAX)]
    if not all(_in_rule(*INDEX_DB_META[k], meta[k], ints.get(k)) for k in ranged):
        raise CorruptIndexError(f"{where}: meta {_or(ranged)} malformed")
    for key in _of_kind("base"):
        if meta[key] not in ("", ".") and base_generation(meta[key]) is None:
            raise CorruptIndexError(f"{where}: meta {key} {meta[key]!r} is not a base folder name")
    for key in _of_kind("sha256_of"):  # a base's sha256 is set with it, and only then
        of = INDEX_DB_META[key][1]
        if (meta[of] == "") != (meta[key] == ""):
            raise CorruptIndexError(f"{where}: meta {key} {meta[key]!r} for {of} {meta[of]!r}")
    bundle_json = parsed["bundle"]
    bundle = None if bundle_json is None else BundleIdentity.from_json(bundle_json, where)
    return Meta(ints["dim"], meta["dense"], meta["colbert"], bundle, meta["base"], meta["base_sha256"],
                ints["generation"])  # type: ignore[arg-type]


def check_removed(removed: Sequence[Any], base_ids: Sequence[PassageId] | None,
                  base_rows: Mapping[PassageId, list[int]], where: str) -> list[int]:
    """The tombstones: rows of the base, and a passage's every chunk's row or none."""
    n_base = len(base_ids) if base_ids is not None else 0
    if any(not isinstance(r, int) or not 0 <= r < n_base for r in removed):
        raise CorruptIndexError(f"{where}: a removed row is outside the base; refusing a corrupt index "
                                "database")
    if removed and base_ids is not None:  # a passage is removed whole: every chunk's row or none
        gone = set(removed)
        if any(x not in gone for r in removed for x in base_rows[base_ids[r]]):
            raise CorruptIndexError(f"{where}: a base passage is removed in part (some of its chunks' "
                                    "rows); refusing a corrupt index database")
    return list(removed)


def read_passages(rows: Iterable[Sequence[Any]], meta: Meta, where: str) -> dict[PassageId, list[Stored]]:
    """The passages rows in seq order as {id: its chunks}: a passage's chunks are 0, 1, ... in
    consecutive seqs (one transaction wrote them)."""
    delta: dict[PassageId, list[Stored]] = {}
    last: PassageId | None = None
    for pid, chunk, *cols in rows:
        if not isinstance(pid, int | str):
            raise CorruptIndexError(f"{where}: a passage id is neither an integer nor text")
        if chunk == 0 and type(chunk) is int and pid not in delta:
            delta[pid] = []
        elif not (type(chunk) is int and pid == last and type(pid) is type(last)
                  and chunk == len(delta[pid])):
            raise CorruptIndexError(f"{where}: id {pid!r} has chunk {chunk!r} out of order; refusing a "
                                    "corrupt index database")
        delta[pid].append(stored_of(cols, meta, where))
        last = pid
    return delta


def _unblob(b: Any, dtype: str, count: int | None, where: str) -> np.ndarray:
    """A column's bytes as a little-endian array; refuse a length that is not `count` items."""
    item = np.dtype(dtype).itemsize
    if not isinstance(b, bytes) or len(b) % item or (count is not None and len(b) != count * item):
        raise CorruptIndexError(f"{where}: a passage's {dtype} column has "
                                f"{len(b) if isinstance(b, bytes) else 'no'} bytes; refusing a corrupt index "
                                "database")
    return np.frombuffer(b, dtype).copy()


def stored_of(cols: Sequence[Any], meta: Meta, where: str) -> Stored:
    """A passages row's vector columns checked (spec.index.INDEX_DB_COLUMNS: NULL where the stores
    use none, each column's dtype and length; then order, finite, scales > 0) as a Stored."""
    d = meta.dim
    b = dict(zip(INDEX_DB_COLUMN_NAMES, cols, strict=True))
    unused = [name for name in null_columns(meta.dense, meta.colbert) if b[name] is not None]
    if unused:  # a column the stores do not use is NULL
        raise CorruptIndexError(f"{where}: a passage holds {unused[0]}, which a {meta.dense} dense / "
                                f"{meta.colbert} ColBERT index does not store; refusing a corrupt "
                                "index database")
    stores = {"dense": meta.dense, "colbert": meta.colbert}
    dtype = {name: column_dtype(name, stores) for name in INDEX_DB_COLUMN_NAMES}
    dense = _unblob(b["dense"], dtype["dense"], d, where)  # type: ignore[arg-type]
    dscale = _unblob(b["dense_scale"], dtype["dense_scale"], 1, where) if dtype["dense_scale"] else None
    tok = _unblob(b["lex_tokens"], dtype["lex_tokens"], None, where)  # type: ignore[arg-type]
    w = _unblob(b["lex_weights"], dtype["lex_weights"], len(tok), where)  # type: ignore[arg-type]
    # every scale finite and > 0, every float32 and float16 value finite (format 1's rule)
    finite = (np.isfinite(dscale) & (dscale > 0)).all() if dscale is not None else np.isfinite(dense).all()
    if (np.diff(tok.astype(np.int64)) <= 0).any() or not (np.isfinite(w) & (w > 0)).all() or not finite:
        raise CorruptIndexError(f"{where}: a passage's vectors are malformed; refusing a corrupt index "
                                "database")
    col, cscale = (None, None) if dtype["colbert"] is None else _colbert_of(b, dtype, d, where)
    return Stored(dense, dscale, tok, w, col, cscale)


def _colbert_of(b: Mapping[str, Any], dtype: Mapping[str, str | None], d: int,
                where: str) -> tuple[np.ndarray, np.ndarray | None]:
    col = _unblob(b["colbert"], dtype["colbert"], None, where)  # type: ignore[arg-type]
    if len(col) % d:
        raise CorruptIndexError(f"{where}: a passage's ColBERT column is not [m, {d}]; refusing a "
                                "corrupt index database")
    col = col.reshape(-1, d)
    c8 = dtype["colbert_scale"] is not None
    cscale = _unblob(b["colbert_scale"], dtype["colbert_scale"], len(col), where) if c8 else None  # type: ignore[arg-type]
    if not ((np.isfinite(cscale) & (cscale > 0)).all() if c8 else np.isfinite(col).all()):
        what = "scale is not finite and > 0" if c8 else "value is not finite"
        raise CorruptIndexError(f"{where}: a passage's ColBERT {what}; refusing a corrupt index "
                                "database")
    return col, cscale


# ---------------------------------------------------------------------- writing


def _blob(x: np.ndarray | None) -> bytes | None:
    return None if x is None else np.ascontiguousarray(x).tobytes()


def write_rows(db: sqlite3.Connection, tomb: Sequence[int], deleted: Sequence[PassageId],
               adds: Sequence[tuple[PassageId, list[Stored]]]) -> None:
    """Inside a write transaction: tombstones for base rows, deletions of delta passages, inserts
    (a passage's chunks 0, 1, ... in consecutive seqs)."""
    db.executemany("INSERT INTO removed (row) VALUES (?)", [(r,) for r in tomb])
    db.executemany("DELETE FROM passages WHERE id = ?", [(p,) for p in deleted])
    db.executemany(_INSERT_PASSAGE,
                   [(pid, c, _blob(s.dense), _blob(s.dense_scale), _blob(s.lex_tokens), _blob(s.lex_weights),
                     _blob(s.colbert), _blob(s.colbert_scale)) for pid, chunks in adds
                    for c, s in enumerate(chunks)])


def swap_base(db: sqlite3.Connection, name: str, sha: str, generation: int) -> None:
    """Inside compaction's transaction: the delta and tombstones folded away, the new base named."""
    db.execute("DELETE FROM passages")
    db.execute("DELETE FROM removed")
    db.executemany("UPDATE meta SET value = ? WHERE key = ?",
                   [(name, "base"), (sha, "base_sha256"), (str(generation), "generation")])

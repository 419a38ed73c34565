"""A writable index: add, update, remove passages on top of a memory-mapped base, on SQLite.

Apps index what their users write, the moment they write it, and must survive being killed
mid-write: every write is one SQLite transaction (WAL), the base (a format-1 folder) is never
written in place, and `compact()` swaps in a new base in one transaction. Search returns exactly
what a fresh format-1 index of the surviving passages would (docs/index-format.md, "The writable
index"), and the kits' EdgeM3WritableIndex the same bits.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.common.files import sha256_file
from edge_m3.errors import EdgeM3Error, OptionError, one_line
from edge_m3.retrieval.index import (
    BundleIdentity,
    CorruptIndexError,
    Hit,
    Index,
    PassageId,
    _as_query,
    _hybrid_top,
    _top_of,
    best_per_passage,
    postings,
    search_args,
)
from edge_m3.spec import (
    COLBERT_STORES,
    COLBERT_VECS,
    DENSE_STORES,
    DENSE_VECS,
    HYBRID_CANDIDATES,
    INDEX_BASE_PREFIX,
    INDEX_DB,
    INDEX_DB_APPLICATION_ID,
    INDEX_DB_BUSY_MS,
    INDEX_DB_FORMAT,
    INDEX_DB_INT_MAX,
    INDEX_DB_META_KEYS,
    INDEX_DB_RELOADS,
    INDEX_DB_SCHEMA,
    INDEX_DB_VERSION,
    INDEX_MANIFEST,
    INDEX_MAX_DIM,
    INDEX_POSTING_WEIGHTS,
    LEXICAL_WEIGHTS,
    is_file_name,
    mode_signals,
)

_PW = INDEX_POSTING_WEIGHTS
_INT64 = (-(1 << 63), (1 << 63) - 1)
# texts -> each text's pipeline outputs: one mapping (one chunk) or a list of its chunks' outputs
Embedder = Callable[[list[str]], list[Any]]


def chunk_embedder(pipe: Any, overlap: int | None = None) -> Embedder:
    """An embedder that splits each text into its chunks (DevicePipeline.embed_chunks), so a
    long passage is stored whole (docs/index-format.md, "Passages and chunks")."""
    return lambda texts: [pipe.embed_chunks(t, overlap) for t in texts]


class WriteRefused(EdgeM3Error):
    """A write that changed nothing, with the kits' error kind (spec.KIT_ERROR_KINDS):
    duplicate_id, unknown_id, index_busy or write_failed."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Stored:
    """One passage as the index stores it: the bytes a format-1 base would hold for its row."""

    dense: np.ndarray  # float32 [D] or int8 [D]
    dense_scale: np.ndarray | None  # float32 [1] (int8 store)
    lex_tokens: np.ndarray  # int32 [n] ascending
    lex_weights: np.ndarray  # float32 [n] > 0
    colbert: np.ndarray | None  # float16 or int8 [m, D]; None without ColBERT
    colbert_scale: np.ndarray | None  # float32 [m] (int8 store)


def stored_form(outputs: Mapping[str, Any], dim: int, dense: str, colbert: str) -> Stored:
    """A passage's pipeline outputs in stored form, quantized once, as Index.add would store them."""
    x = Index(dim, dense, colbert)
    x.add([outputs])  # the same checks and conversions as a bulk build
    x._freeze()
    return _rows_of(x.arrays, dense, colbert, 1)[0]


def _rows_of(a: Mapping[str, np.ndarray], dense: str, colbert: str, n: int) -> list[Stored]:
    """Every row of folder-layout arrays in stored form (for a small index: postings inverted)."""
    toks: list[list[int]] = [[] for _ in range(n)]
    ws: list[list[float]] = [[] for _ in range(n)]
    off = np.asarray(a["sparse_offsets"])
    tokens, rows, weights = np.asarray(a["sparse_tokens"]), np.asarray(a["sparse_rows"]), np.asarray(a[_PW])
    for t in range(len(tokens)):
        for p in range(int(off[t]), int(off[t + 1])):
            toks[int(rows[p])].append(int(tokens[t]))
            ws[int(rows[p])].append(float(weights[p]))
    out = []
    for r in range(n):
        col = scale = None
        if colbert != "none":
            lo, hi = int(a["colbert_offsets"][r]), int(a["colbert_offsets"][r + 1])
            col = np.array(a["colbert"][lo:hi])
            scale = np.array(a["colbert_scale"][lo:hi]) if colbert == "int8" else None
        out.append(Stored(np.array(a["dense"][r]),
                          np.array(a["dense_scale"][r:r + 1]) if dense == "int8" else None,
                          np.array(toks[r], np.int32), np.array(ws[r], np.float32), col, scale))
    return out


def arrays_of(rows: Sequence[Stored], dim: int, dense: str, colbert: str) -> dict[str, np.ndarray]:
    """Folder-layout arrays of stored passages in this order (no value is quantized again)."""
    a: dict[str, np.ndarray] = {}
    a["dense"] = (np.stack([r.dense for r in rows]) if rows
                  else np.zeros((0, dim), np.int8 if dense == "int8" else np.float32))
    if dense == "int8":
        a["dense_scale"] = (np.concatenate([r.dense_scale for r in rows]) if rows  # type: ignore[misc]
                            else np.zeros(0, np.float32))
    tok = np.concatenate([r.lex_tokens for r in rows]).astype(np.int64) if rows else np.zeros(0, np.int64)
    row = np.repeat(np.arange(len(rows), dtype=np.int64), [len(r.lex_tokens) for r in rows])
    w = np.concatenate([r.lex_weights for r in rows]) if rows else np.zeros(0, np.float32)
    postings(a, tok, row, w)
    if colbert != "none":
        counts = np.array([len(r.colbert) for r in rows], np.int64)  # type: ignore[arg-type]
        a["colbert_offsets"] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        dtype = np.int8 if colbert == "int8" else np.float16
        a["colbert"] = (np.concatenate([r.colbert for r in rows]) if rows  # type: ignore[misc]
                        else np.zeros((0, dim), dtype)).astype(dtype).reshape(-1, dim)
        if colbert == "int8":
            a["colbert_scale"] = (np.concatenate([r.colbert_scale for r in rows]) if rows  # type: ignore[misc]
                                  else np.zeros(0, np.float32))
    return a


def _survivors(base: Index, alive: np.ndarray, delta: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The base's surviving rows (renumbered, in order) followed by the delta's rows, as arrays."""
    a, d = base.arrays, delta
    keep = np.nonzero(alive)[0]
    n_keep = len(keep)
    out: dict[str, np.ndarray] = {"dense": np.concatenate([np.asarray(a["dense"])[keep], d["dense"]])}
    if "dense_scale" in a:
        out["dense_scale"] = np.concatenate([np.asarray(a["dense_scale"])[keep], d["dense_scale"]])
    new_row = np.cumsum(alive) - 1  # logical row of each surviving base row
    lengths = np.diff(np.asarray(a["sparse_offsets"]))
    tok = np.repeat(np.asarray(a["sparse_tokens"], np.int64), lengths)
    rows = np.asarray(a["sparse_rows"], np.int64)
    live = alive[rows] if len(rows) else np.zeros(0, bool)
    d_len = np.diff(d["sparse_offsets"])
    postings(out, np.concatenate([tok[live], np.repeat(d["sparse_tokens"].astype(np.int64), d_len)]),
              np.concatenate([new_row[rows[live]], d["sparse_rows"].astype(np.int64) + n_keep]),
              np.concatenate([np.asarray(a[_PW])[live], d[_PW]]))
    if "colbert_offsets" in a:
        co = np.asarray(a["colbert_offsets"])
        lo, hi = co[keep], co[keep + 1]
        counts = hi - lo
        first = np.cumsum(counts) - counts
        idx = np.arange(int(counts.sum())) - np.repeat(first - lo, counts)
        base_count = int(counts.sum())
        out["colbert_offsets"] = np.concatenate(
            [[0], np.cumsum(counts), base_count + d["colbert_offsets"][1:]]).astype(np.int64)
        out["colbert"] = np.concatenate([np.asarray(a["colbert"])[idx], d["colbert"]])
        if "colbert_scale" in a:
            out["colbert_scale"] = np.concatenate([np.asarray(a["colbert_scale"])[idx], d["colbert_scale"]])
    return out


def _id_value(pid: Any, what: str = "id") -> PassageId:
    """An id checked: a string, or an integer SQLite holds (64 bits)."""
    if isinstance(pid, bool) or not isinstance(pid, int | str | np.integer):
        raise OptionError(what, repr(pid), "must be an integer or a string")
    if isinstance(pid, int | np.integer):
        pid = int(pid)
        if not _INT64[0] <= pid <= _INT64[1]:
            raise OptionError(what, pid, "must fit in 64 bits")
    return pid


def _blob(x: np.ndarray | None) -> bytes | None:
    return None if x is None else np.ascontiguousarray(x).tobytes()


def _meta_int(text: str) -> int | None:
    """A meta integer (spec.INDEX_DB_INT_MAX): ASCII digits only, at most 2^63 - 1; else None."""
    # (the length first: int() of over 4,300 digits raises ValueError rather than read them)
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        return None
    value = int(text)
    return value if value <= INDEX_DB_INT_MAX else None


def _base_generation(name: str) -> int | None:
    """The n of a base folder's name, INDEX_BASE_PREFIX + n (n a meta integer); else None."""
    return _meta_int(name[len(INDEX_BASE_PREFIX):]) if name.startswith(INDEX_BASE_PREFIX) else None


def _unblob(b: Any, dtype: str, count: int | None, where: str) -> np.ndarray:
    """A column's bytes as a little-endian array; refuse a length that is not `count` items."""
    item = np.dtype(dtype).itemsize
    if not isinstance(b, bytes) or len(b) % item or (count is not None and len(b) != count * item):
        raise CorruptIndexError(f"{where}: a passage's {dtype} column has "
                                f"{len(b) if isinstance(b, bytes) else 'no'} bytes; refusing a corrupt index "
                                "database")
    return np.frombuffer(b, dtype).copy()


class WritableIndex:
    """An index folder that takes writes (docs/index-format.md, "The writable index").

    `open` a folder (a format-1 base and/or its INDEX_DB) or `create` an empty one; `add`,
    `add_many`, `update`, `remove`, `contains`, `len()`, `search`, `compact`. A text passage is
    embedded by `embed` (e.g. DevicePipeline.embed), given at open.
    """

    def __init__(self) -> None:  # use open() or create()
        self.path = Path()
        self.db: sqlite3.Connection | None = None
        self.embed: Embedder | None = None
        self._closed = False
        self.verify, self.durable = True, False
        self.dim, self.dense_store, self.colbert_store = 0, "float32", "none"
        self.bundle: BundleIdentity | None = None
        self.base: Index | None = None
        self.base_name, self.base_sha, self.generation = "", "", 0
        self._base_rows: dict[PassageId, list[int]] = {}  # a passage's base rows: its chunks
        self._removed: list[int] = []  # sorted base rows
        self._delta: dict[PassageId, list[Stored]] = {}  # insertion (seq) order, chunks in order
        self._delta_index: Index | None = None
        self._segs = None
        self._version: int | None = None

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, path: Path, bundle: Any = None, embed: Embedder | None = None,
             verify: bool = True, durable: bool = False) -> WritableIndex:
        """An index folder: a format-1 base (no database yet: the first write makes one) or a
        writable index. With `bundle` (a loaded Bundle), one built by another model is refused."""
        self = cls()
        self.path, self.embed, self.verify, self.durable = Path(path), embed, verify, durable
        if not self.path.is_dir():
            raise EdgeM3Error(f"{self.path}: not a folder (an index folder holds {INDEX_MANIFEST} "
                              f"and/or {INDEX_DB})")
        try:
            if (self.path / INDEX_DB).exists():
                self._connect()
                self._load()
            elif (self.path / INDEX_MANIFEST).is_file():
                self._open_base(".", None)
                self.base_name = "."
            else:
                raise CorruptIndexError(f"{self.path}: neither {INDEX_MANIFEST} nor {INDEX_DB} "
                                        "(is it an edge-m3 index?)")
            if bundle is not None and self.bundle is None:
                raise EdgeM3Error(f"{self.path}: records no bundle, so queries cannot be checked against it")
            if bundle is not None and self.bundle is not None:
                self.bundle.check(bundle, str(self.path))
        except BaseException:  # a refused index holds no connection (and no file) until the GC finds it
            self.close()
            raise
        return self

    @classmethod
    def create(cls, path: Path, dim: int, dense: str = "float32", colbert: str = "fp16",
               bundle: BundleIdentity | None = None,
               embed: Embedder | None = None,
               durable: bool = False) -> WritableIndex:
        """A new, empty writable index in folder `path` (created; it must hold no index)."""
        if dense not in DENSE_STORES:
            raise OptionError("dense", dense, f"unknown (choose from {', '.join(DENSE_STORES)})")
        if colbert not in COLBERT_STORES:
            raise OptionError("colbert", colbert, f"unknown (choose from {', '.join(COLBERT_STORES)})")
        if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= INDEX_MAX_DIM:
            raise OptionError("dim", dim, f"must be an integer from 1 to {INDEX_MAX_DIM}")
        path = Path(path)
        if (path / INDEX_DB).exists() or (path / INDEX_MANIFEST).exists():
            raise EdgeM3Error(f"{path}: already holds an index")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WriteRefused("write_failed", f"{path}: cannot create the folder ({one_line(exc)})") from None
        self = cls()
        self.path, self.embed, self.durable = path, embed, durable
        self.dim, self.dense_store, self.colbert_store, self.bundle = dim, dense, colbert, bundle
        self._make_db()
        self._connect()
        self._load()
        return self

    def close(self) -> None:
        """Release the database (searches and writes after this are refused)."""
        if self.db is not None:
            self.db.close()
            self.db = None
        self.base = None
        self._closed = True

    def __enter__(self) -> WritableIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _meta_values(self) -> dict[str, str]:
        return {"format": INDEX_DB_FORMAT, "format_version": str(INDEX_DB_VERSION), "dim": str(self.dim),
                "dense": self.dense_store, "colbert": self.colbert_store,
                "bundle": json.dumps(self.bundle.to_json() if self.bundle else None, sort_keys=True),
                "base": self.base_name, "base_sha256": self.base_sha, "generation": str(self.generation)}

    def _make_db(self) -> None:
        """INDEX_DB written whole under a temporary name, then linked in: never half a database,
        and of two processes creating it at once one wins and the other opens it."""
        tmp = self.path / f".{INDEX_DB}.{os.getpid()}.tmp"
        final = self.path / INDEX_DB
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
                con.executemany("INSERT INTO meta VALUES (?, ?)", self._meta_values().items())
                con.execute("COMMIT")
            finally:
                con.close()
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, final)
            except FileExistsError:
                pass  # another process made it first: open theirs
            tmp.unlink()
            _fsync_dir(self.path)
        except (OSError, sqlite3.Error) as exc:
            tmp.unlink(missing_ok=True)
            raise WriteRefused("write_failed", f"{final}: cannot create the database "
                               f"({one_line(exc)})") from None

    def _connect(self) -> None:
        where = self.path / INDEX_DB
        try:
            self.db = sqlite3.connect(where, timeout=INDEX_DB_BUSY_MS / 1000, isolation_level=None,
                                      check_same_thread=False)
            try:
                app = self.db.execute("PRAGMA application_id").fetchone()[0]
            except sqlite3.OperationalError:
                # A WAL database on a read-only filesystem cannot make its -shm file: with no -wal
                # file (nothing uncheckpointed) it is read as immutable, and searched as it is.
                if os.access(self.path, os.W_OK) and not _read_only_fs(self.path):
                    raise
                if Path(f"{where}-wal").exists():
                    raise EdgeM3Error(f"{where}: on a read-only filesystem with a {where.name}-wal file "
                                      "not yet folded in; open it once where it can be written") from None
                self.db.close()
                self.db = sqlite3.connect(f"{where.resolve().as_uri()}?immutable=1", uri=True,
                                          isolation_level=None, check_same_thread=False)
                app = self.db.execute("PRAGMA application_id").fetchone()[0]
            if app != INDEX_DB_APPLICATION_ID:
                raise CorruptIndexError(f"{where}: not an edge-m3 index database (application_id {app})")
            version = self.db.execute("PRAGMA user_version").fetchone()[0]  # the header's, as the kits read it
            if version != INDEX_DB_VERSION:
                who = "an older" if version < INDEX_DB_VERSION else "a newer"
                raise CorruptIndexError(f"{where}: user_version {version}: written by {who} edge-m3 (this one "
                                        f"reads {INDEX_DB_VERSION})")
            if self.db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                try:
                    self.db.execute("PRAGMA journal_mode = WAL")
                except sqlite3.OperationalError:
                    pass  # a read-only file: searched as it is
            self.db.execute(f"PRAGMA synchronous = {'FULL' if self.durable else 'NORMAL'}")
            if self.verify:
                bad = self.db.execute("PRAGMA quick_check").fetchone()[0]
                if bad != "ok":
                    raise CorruptIndexError(f"{where}: damaged ({one_line(bad)}); refusing a corrupt index "
                                            "database")
        except DB_ERRORS as exc:
            if self.db is not None:
                self.db.close()
                self.db = None
            raise _corrupt(where, exc) from None
        except EdgeM3Error:
            if self.db is not None:
                self.db.close()
                self.db = None
            raise

    def _load(self) -> None:
        """Read meta, tombstones and passages; open the base they name (all checked, one line).
        One committed state (spec.INDEX_DB_RELOADS): when another connection commits while
        this reads, it reads again, so a compaction that deleted the base being opened, or a
        commit between two of the SELECTs, is never reported as a corrupt index; a writer that
        keeps committing is waited for, and the state read under its lock."""
        assert self.db is not None
        for _ in range(INDEX_DB_RELOADS):
            try:
                if self._load_once():
                    return
            except CorruptIndexError:
                if self._data_version() == self._version:
                    raise  # nothing was committed meanwhile: the index is corrupt
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except DB_ERRORS as exc:
            raise WriteRefused("index_busy", f"{self.path / INDEX_DB}: another writer kept committing while it "
                               f"was read ({one_line(exc)})") from None
        try:
            self._load_once()  # under the lock nothing commits: one state
        finally:
            self.db.execute("ROLLBACK")

    def _data_version(self) -> int:
        assert self.db is not None
        try:
            return self.db.execute("PRAGMA data_version").fetchone()[0]
        except DB_ERRORS as exc:
            raise CorruptIndexError(f"{self.path / INDEX_DB}: unreadable ({one_line(exc)})") from None

    def _load_once(self) -> bool:
        """One try of _load: False when another connection committed between its SELECTs."""
        assert self.db is not None
        where = str(self.path / INDEX_DB)
        try:
            self._version = self.db.execute("PRAGMA data_version").fetchone()[0]
            meta_rows = self.db.execute("SELECT key, value FROM meta").fetchall()
            removed = [r for (r,) in self.db.execute("SELECT row FROM removed ORDER BY row")]
            rows = self.db.execute("SELECT id, chunk, dense, dense_scale, lex_tokens, lex_weights, colbert, "
                                   "colbert_scale FROM passages ORDER BY seq").fetchall()
        except DB_ERRORS as exc:
            raise _corrupt(where, exc) from None
        if self._data_version() != self._version:
            return False
        if any(not isinstance(k, str) or not isinstance(v, str) for k, v in meta_rows):
            raise CorruptIndexError(f"{where}: meta holds a key or value that is not text; not an edge-m3 "
                                    "index database")
        meta = dict(meta_rows)
        missing = [k for k in INDEX_DB_META_KEYS if k not in meta]
        if missing:
            raise CorruptIndexError(f"{where}: meta lacks {', '.join(missing)}; not an edge-m3 index database")
        if meta["format"] != INDEX_DB_FORMAT:
            raise CorruptIndexError(f"{where}: format {meta['format']!r} is not {INDEX_DB_FORMAT}")
        version = _meta_int(meta["format_version"])
        if version != INDEX_DB_VERSION:
            older = version is not None and version < INDEX_DB_VERSION
            raise CorruptIndexError(f"{where}: format_version {meta['format_version']!r}: written by "
                                    f"{'an older' if older else 'a newer'} edge-m3 (this one reads "
                                    f"{INDEX_DB_VERSION})")
        dim, gen = _meta_int(meta["dim"]), _meta_int(meta["generation"])
        try:
            bundle_json = json.loads(meta["bundle"])
        except (ValueError, RecursionError):  # RecursionError: a bundle of deeply nested lists
            raise CorruptIndexError(f"{where}: meta bundle malformed") from None
        if dim is None or gen is None:
            raise CorruptIndexError(f"{where}: meta dim or generation malformed")
        stores = meta["dense"] in DENSE_STORES and meta["colbert"] in COLBERT_STORES
        if not 1 <= dim <= INDEX_MAX_DIM or not stores:
            raise CorruptIndexError(f"{where}: meta dim, dense or colbert malformed")
        base = meta["base"]
        if base not in ("", ".") and _base_generation(base) is None:
            raise CorruptIndexError(f"{where}: meta base {base!r} is not a base folder name")
        if (base == "") != (meta["base_sha256"] == ""):  # a base's sha256 is set with it, and only then
            raise CorruptIndexError(f"{where}: meta base_sha256 {meta['base_sha256']!r} for base {base!r}")
        self.dim, self.generation = dim, gen
        self.dense_store, self.colbert_store = meta["dense"], meta["colbert"]
        self.bundle = None if bundle_json is None else BundleIdentity.from_json(bundle_json, where)
        if base and (self.base is None or base != self.base_name or meta["base_sha256"] != self.base_sha):
            self._open_base(base, meta["base_sha256"])
        elif not base:
            self.base, self._base_rows = None, {}
        self.base_name, self.base_sha = base, meta["base_sha256"]
        n_base = len(self.base) if self.base is not None else 0
        if any(not isinstance(r, int) or not 0 <= r < n_base for r in removed):
            raise CorruptIndexError(f"{where}: a removed row is outside the base; refusing a corrupt index "
                                    "database")
        if removed and self.base is not None:  # a passage is removed whole: every chunk's row or none
            gone = set(removed)
            if any(x not in gone for r in removed for x in self._base_rows[self.base.ids[r]]):
                raise CorruptIndexError(f"{where}: a base passage is removed in part (some of its chunks' "
                                        "rows); refusing a corrupt index database")
        self._removed = removed
        self._delta = {}
        last: PassageId | None = None
        for pid, chunk, *cols in rows:
            if not isinstance(pid, int | str):
                raise CorruptIndexError(f"{where}: a passage id is neither an integer nor text")
            # a passage's chunks are 0, 1, ... in consecutive seqs (one transaction wrote them)
            if chunk == 0 and type(chunk) is int and pid not in self._delta:
                self._delta[pid] = []
            elif not (type(chunk) is int and pid == last and type(pid) is type(last)
                      and chunk == len(self._delta[pid])):
                raise CorruptIndexError(f"{where}: id {pid!r} has chunk {chunk!r} out of order; refusing a "
                                        "corrupt index database")
            self._delta[pid].append(self._stored_of(cols, where))
            last = pid
        clash = [p for p in self._delta if p in self._base_rows and self._alive_base(self._base_rows[p][0])]
        if clash:
            raise CorruptIndexError(f"{where}: id {clash[0]!r} is both in the base and added; refusing a "
                                    "corrupt index database")
        self._delta_index = None
        self._segs: list[tuple[Index, np.ndarray]] | None = None
        return True

    def _stored_of(self, cols: Sequence[Any], where: str) -> Stored:
        d = self.dim
        dense_b, dscale_b, tok_b, w_b, col_b, cscale_b = cols
        int8 = self.dense_store == "int8"
        c8 = self.colbert_store == "int8"
        uses = (("dense_scale", dscale_b, int8), ("colbert", col_b, self.has_colbert),
                ("colbert_scale", cscale_b, c8))
        unused = [name for name, b, used in uses if b is not None and not used]
        if unused:  # a column the stores do not use is NULL
            raise CorruptIndexError(f"{where}: a passage holds {unused[0]}, which a {self.dense_store} dense / "
                                    f"{self.colbert_store} ColBERT index does not store; refusing a corrupt "
                                    "index database")
        dense = _unblob(dense_b, "i1" if int8 else "<f4", d, where)
        dscale = _unblob(dscale_b, "<f4", 1, where) if int8 else None
        tok = _unblob(tok_b, "<i4", None, where)
        w = _unblob(w_b, "<f4", len(tok), where)
        # every scale finite and > 0, every float32 and float16 value finite (format 1's rule)
        finite = (np.isfinite(dscale) & (dscale > 0)).all() if int8 else np.isfinite(dense).all()
        if (np.diff(tok.astype(np.int64)) <= 0).any() or not (np.isfinite(w) & (w > 0)).all() or not finite:
            raise CorruptIndexError(f"{where}: a passage's vectors are malformed; refusing a corrupt index "
                                    "database")
        col = cscale = None
        if self.colbert_store != "none":
            col = _unblob(col_b, "i1" if c8 else "<f2", None, where)
            if len(col) % d:
                raise CorruptIndexError(f"{where}: a passage's ColBERT column is not [m, {d}]; refusing a "
                                        "corrupt index database")
            col = col.reshape(-1, d)
            cscale = _unblob(cscale_b, "<f4", len(col), where) if c8 else None
            if not ((np.isfinite(cscale) & (cscale > 0)).all() if c8 else np.isfinite(col).all()):
                what = "scale is not finite and > 0" if c8 else "value is not finite"
                raise CorruptIndexError(f"{where}: a passage's ColBERT {what}; refusing a corrupt index "
                                        "database")
        return Stored(dense, dscale, tok, w, col, cscale)

    def _open_base(self, name: str, sha: str | None) -> None:
        folder = self.path if name == "." else self.path / name
        manifest = folder / INDEX_MANIFEST
        if not manifest.is_file():
            raise CorruptIndexError(f"{manifest}: the index's base is missing")
        try:
            got = sha256_file(manifest)
        except OSError as exc:  # deleted since is_file: another process's compaction
            raise CorruptIndexError(f"{manifest}: unreadable ({one_line(exc)})") from None
        if sha is not None and got != sha:
            raise CorruptIndexError(f"{self.path / INDEX_DB}: written on top of another base than {manifest} "
                                    "(its sha256 differs); refusing to apply it")
        base = Index.load(folder, verify=self.verify)
        if self.db is not None and (base.dim, base.dense_store, base.colbert_store) != (
                self.dim, self.dense_store, self.colbert_store):
            raise CorruptIndexError(f"{self.path / INDEX_DB}: dim/dense/colbert differ from its base "
                                    f"{manifest}")
        if self.db is not None and (base.bundle.to_json() if base.bundle else None) != (
                self.bundle.to_json() if self.bundle else None):
            if not (base.bundle and self.bundle and _same_model(base.bundle, self.bundle)):
                raise CorruptIndexError(f"{self.path / INDEX_DB}: written for another bundle than its base "
                                        f"{manifest}")
        if self.db is None:
            self.dim, self.dense_store, self.colbert_store, self.bundle = (
                base.dim, base.dense_store, base.colbert_store, base.bundle)
        self.base = base
        self.base_sha = got if sha is None else sha
        self._base_rows = {}
        for r, pid in enumerate(base.ids):
            self._base_rows.setdefault(pid, []).append(r)

    # ------------------------------------------------------------------ state

    def _alive_base(self, row: int) -> bool:
        i = bisect_left(self._removed, row)
        return not (i < len(self._removed) and self._removed[i] == row)

    def _sync(self) -> None:
        """Reload when another connection committed since (PRAGMA data_version)."""
        if self._closed:
            raise EdgeM3Error(f"{self.path}: the index was closed")
        if self.db is None:
            return
        if self._data_version() != self._version:
            self._load()

    def __len__(self) -> int:
        """The number of passages (a chunked passage is one)."""
        self._sync()
        if self.base is None:
            return len(self._delta)
        first = self.base.chunk_counts()[0] == 0  # a passage's first row
        return int(first.sum()) - int(first[self._removed].sum()) + len(self._delta)

    @property
    def rows(self) -> int:
        """The number of rows (a passage has one per chunk)."""
        self._sync()
        n_base = len(self.base) - len(self._removed) if self.base is not None else 0
        return n_base + sum(len(c) for c in self._delta.values())

    @property
    def has_colbert(self) -> bool:
        return self.colbert_store != "none"

    def contains(self, pid: PassageId) -> bool:
        """Whether a passage with this id is in the index."""
        self._sync()
        pid = _id_value(pid)
        return pid in self._delta or (pid in self._base_rows and self._alive_base(self._base_rows[pid][0]))

    def ids(self) -> list[PassageId]:
        """Every passage's id once, in logical row order."""
        self._sync()
        self._segments()
        base = [] if self.base is None else [self.base.ids[int(r)] for r in self._alive_rows
                                             if self._base_chunk[int(r)] == 0]
        return base + list(self._delta)

    def _hit(self, logical: int, score: float) -> Hit:
        """A logical row's hit: its passage's id and its chunk number (after _segments)."""
        n_base = len(self._alive_rows)
        if logical < n_base:
            r = int(self._alive_rows[logical])
            return Hit(logical, self.base.ids[r], score, int(self._base_chunk[r]))  # type: ignore[union-attr]
        pid, chunk = self._delta_rows[logical - n_base]
        return Hit(logical, pid, score, chunk)

    # ------------------------------------------------------------------ writes

    def _outputs(self, items: Sequence[tuple[PassageId, Any]]) -> list[tuple[PassageId, list[Stored]]]:
        """Each (id, text, outputs or chunks' outputs) checked and in stored form (a list of
        chunks), before anything is written."""
        ids = [_id_value(pid) for pid, _ in items]
        if len(set(ids)) != len(ids):
            dup = next(p for p in ids if ids.count(p) > 1)
            raise WriteRefused("duplicate_id", f"id {dup!r} is given twice in one batch")
        texts = [i for i, (_, x) in enumerate(items) if isinstance(x, str)]
        outs: list[Any] = [x for _, x in items]
        if texts:
            if self.embed is None:
                raise EdgeM3Error("a text passage needs an embedder: open the index with embed= (a bundle's "
                                  "DevicePipeline.embed)")
            for i, o in zip(texts, self.embed([items[i][1] for i in texts]), strict=True):
                outs[i] = o
        out = []
        for pid, o in zip(ids, outs, strict=True):
            chunks = [o] if isinstance(o, Mapping) else list(o) if isinstance(o, list | tuple) else None
            if not chunks or not all(isinstance(c, Mapping) for c in chunks):
                raise OptionError("passage", repr(pid), "must be a text, pipeline outputs or a non-empty "
                                  "list of its chunks' outputs")
            out.append((pid, [stored_form(c, self.dim, self.dense_store, self.colbert_store) for c in chunks]))
        return out

    def add(self, pid: PassageId, passage: str | Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        """Append one passage: a text (chunked and embedded by `embed`), pipeline outputs (one
        chunk) or a list of its chunks' outputs; an id already there is refused."""
        self.add_many([(pid, passage)])

    def add_many(self, items: Iterable[tuple[PassageId, Any]], replace: bool = False) -> None:
        """Append passages in one transaction (all or none). `replace`: an id already there is
        updated (removed and appended) instead of refused."""
        self._sync()
        rows = self._outputs(list(items))
        self._write(rows, [], replace=replace)

    def update(self, pid: PassageId, passage: str | Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        """Replace a passage (every chunk): it is removed and appended (the last rows) in one transaction."""
        self._sync()
        rows = self._outputs([(pid, passage)])
        if not self.contains(rows[0][0]):
            raise WriteRefused("unknown_id", f"id {rows[0][0]!r} is not in the index")
        self._write(rows, [], replace=True)

    def remove(self, pid: PassageId) -> None:
        """Delete a passage (a tombstone over the base); an id not there is refused."""
        self.remove_many([pid])

    def remove_many(self, pids: Iterable[PassageId]) -> None:
        """Delete passages in one transaction (all or none)."""
        self._sync()
        ids = [_id_value(p) for p in pids]
        for p in ids:
            if not self.contains(p):
                raise WriteRefused("unknown_id", f"id {p!r} is not in the index")
        if len(set(ids)) != len(ids):
            raise WriteRefused("unknown_id", "an id is removed twice in one batch")
        self._write([], ids, replace=False)

    def _write(self, adds: list[tuple[PassageId, list[Stored]]], removes: list[PassageId],
               replace: bool) -> None:
        """One transaction: tombstones and deletions for `removes` (and replaced ids), then inserts.
        Memory is changed only after the commit, so a refused write changes nothing."""
        if not replace:
            for pid, _ in adds:
                if self.contains(pid):
                    raise WriteRefused("duplicate_id", f"id {pid!r} is already in the index (update it, or "
                                       "remove it first)")
        gone = list(removes) + [pid for pid, _ in adds if replace and self.contains(pid)]
        if self.db is None:
            self._make_db()
            self._connect()
            self._version = self.db.execute("PRAGMA data_version").fetchone()[0]  # type: ignore[union-attr]
        db = self.db
        assert db is not None
        tomb = sorted(r for p in gone if p not in self._delta for r in self._base_rows[p])
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                if self._stale_inside():  # another writer committed between our check and our lock
                    raise _Retry
                db.executemany("INSERT INTO removed (row) VALUES (?)", [(r,) for r in tomb])
                db.executemany("DELETE FROM passages WHERE id = ?", [(p,) for p in gone if p in self._delta])
                db.executemany(
                    "INSERT INTO passages (id, chunk, dense, dense_scale, lex_tokens, lex_weights, colbert, "
                    "colbert_scale) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [(pid, c, _blob(s.dense), _blob(s.dense_scale), _blob(s.lex_tokens), _blob(s.lex_weights),
                      _blob(s.colbert), _blob(s.colbert_scale)) for pid, chunks in adds
                     for c, s in enumerate(chunks)])
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except _Retry:
            self._load()
            return self._write(adds, removes, replace)
        except DB_ERRORS as exc:
            raise _refusal(exc, self.path / INDEX_DB) from None
        for r in tomb:
            self._removed.insert(bisect_left(self._removed, r), r)
        for p in gone:
            self._delta.pop(p, None)
        for pid, s in adds:
            self._delta[pid] = s
        self._delta_index = None
        self._segs: list[tuple[Index, np.ndarray]] | None = None
        self._version = db.execute("PRAGMA data_version").fetchone()[0]

    def _stale_inside(self) -> bool:
        assert self.db is not None
        return self.db.execute("PRAGMA data_version").fetchone()[0] != self._version

    # ------------------------------------------------------------------ compaction

    def compact(self) -> None:
        """Fold the writes into a new memory-mapped base (base-<generation+1>/), swapped in by one
        transaction; the old base is deleted after. A kill leaves the old state or the new one."""
        self._sync()
        if self.db is None:
            return  # nothing written yet: the base is already compact
        db = self.db
        gen = self.generation + 1
        name = f"{INDEX_BASE_PREFIX}{gen}"
        folder = self.path / name
        try:
            db.execute("BEGIN IMMEDIATE")  # no other writer until the swap
        except DB_ERRORS as exc:
            raise _refusal(exc, self.path / INDEX_DB) from None
        try:
            if self._stale_inside():
                db.execute("ROLLBACK")
                self._load()
                return self.compact()
            index = self.merged()
            if folder.exists():
                shutil.rmtree(folder)  # a kill's leftover: never referenced
            index.save(folder)
            sha = sha256_file(folder / INDEX_MANIFEST)
            db.execute("DELETE FROM passages")
            db.execute("DELETE FROM removed")
            db.executemany("UPDATE meta SET value = ? WHERE key = ?",
                           [(name, "base"), (sha, "base_sha256"), (str(gen), "generation")])
            db.execute("COMMIT")
        except BaseException as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error | OSError):
                raise _refusal(exc, self.path / INDEX_DB) from None
            raise
        old = self.base_name
        self.base, self.base_name, self.base_sha, self.generation = None, "", "", gen
        self._load()
        self._collect(old)

    def merged(self) -> Index:
        """The surviving passages as one in-memory format-1 index, in logical row order."""
        delta = self._delta_arrays()
        if self.base is None:
            arrays, ids = delta, self._delta_ids()
        else:
            alive = np.ones(len(self.base), bool)
            alive[self._removed] = False
            arrays = _survivors(self.base, alive, delta)
            ids = [p for r, p in enumerate(self.base.ids) if alive[r]] + self._delta_ids()
        return Index.from_arrays(self.dim, self.dense_store, self.colbert_store, arrays, ids, self.bundle)

    def _collect(self, old: str = "") -> None:
        """Delete bases no database names: the one just replaced, and a kill's leftovers (a base
        written but never swapped in, a half-written one). Only generations up to this one: a
        later one may be another process's compaction in progress."""
        keep = self.base_name
        for p in self.path.iterdir():
            name = p.name[1:].split(".", 1)[0] if p.name.startswith(".") and (
                ".building-" in p.name or ".old-" in p.name) else p.name
            gen = _base_generation(name)
            if p.is_dir() and gen is not None and gen <= self.generation and p.name != keep:
                shutil.rmtree(p, ignore_errors=True)
        if keep != "." and (old == "." or (self.path / INDEX_MANIFEST).exists()):
            _remove_root_base(self.path)

    # ------------------------------------------------------------------ search

    def _delta_ids(self) -> list[PassageId]:
        """The database's rows' ids, a passage's once per chunk, in seq order."""
        return [pid for pid, chunks in self._delta.items() for _ in chunks]

    def _delta_arrays(self) -> dict[str, np.ndarray]:
        rows = [s for chunks in self._delta.values() for s in chunks]
        return arrays_of(rows, self.dim, self.dense_store, self.colbert_store)

    def _delta_idx(self) -> Index:
        if self._delta_index is None:
            self._delta_index = Index.from_arrays(self.dim, self.dense_store, self.colbert_store,
                                                  self._delta_arrays(), self._delta_ids(), self.bundle)
        return self._delta_index

    def search(self, query: Mapping[str, Any], k: int = 10, mode: str = "dense",
               weights: Sequence[float] | None = None, chunks: bool = False) -> list[Hit]:
        """The best `k` passages, each by its best chunk (`chunks`: the best `k` rows): exactly
        what a fresh index of the surviving passages returns."""
        self._sync()
        signals, w = search_args(k, mode, weights, self.has_colbert)
        segs = self._segments()
        grouped = not chunks and self._most > 1
        kr = k * self._most if grouped else k
        if len(signals) == 1:
            rows, scores = self._top(segs, query, mode, kr)
        else:
            c = max(kr, HYBRID_CANDIDATES)
            _as_query(query, signals)
            # each segment's sparse scores once: its best c, then the candidates' scores
            sparse = [idx.sparse_exact(query[LEXICAL_WEIGHTS], logical < 0) for idx, logical in segs]
            cand = np.union1d(self._top(segs, query, "dense", c)[0], self._sparse_top(segs, sparse, c))
            rows, scores = self._hybrid(segs, query, mode, cand.astype(np.int64), kr, w, [a for a, _ in sparse])
        hits = [self._hit(int(r), float(s)) for r, s in zip(rows, scores, strict=True)]
        return best_per_passage(hits, k) if grouped else hits

    def _segments(self) -> list[tuple[Index, np.ndarray]]:
        """(index, its physical rows' logical rows or -1 when removed), kept until a write."""
        if self._segs is not None:
            return self._segs
        segs = []
        start = 0
        self._alive_rows = np.zeros(0, np.int64)
        self._base_chunk = np.zeros(0, np.int64)
        self._most = 0
        if self.base is not None and len(self.base):
            logical = np.full(len(self.base), -1, np.int64)
            alive = np.ones(len(self.base), bool)
            alive[self._removed] = False
            self._alive_rows = np.nonzero(alive)[0]
            logical[alive] = np.arange(len(self._alive_rows))
            segs.append((self.base, logical))
            start = len(self._alive_rows)
            # a passage is removed whole, so its surviving rows are chunks 0..n-1: the largest
            # surviving chunk number + 1 is the most chunks of a surviving passage
            self._base_chunk = self.base.chunk_counts()[0]
            live_chunks = self._base_chunk[self._alive_rows]
            self._most = int(live_chunks.max()) + 1 if len(live_chunks) else 0
        self._delta_rows = [(pid, c) for pid, chunks in self._delta.items() for c in range(len(chunks))]
        if self._delta:
            segs.append((self._delta_idx(), start + np.arange(len(self._delta_rows))))
            self._most = max(self._most, max(len(c) for c in self._delta.values()))
        self._segs = segs
        return segs

    def _top(self, segs: Sequence[tuple[Index, np.ndarray]], query: Mapping[str, Any], mode: str,
             k: int) -> tuple[np.ndarray, np.ndarray]:
        """A single mode's best k over logical rows: each segment's best k of its live rows,
        merged by score then logical row (logical order keeps each segment's row order)."""
        rows, scores = [], []
        for idx, logical in segs:
            for h in idx.search(query, k, mode, exclude=logical < 0, chunks=True):
                rows.append(int(logical[h.row]))
                scores.append(h.score)
        r, s = np.array(rows, np.int64), np.array(scores, np.float64)
        order = np.lexsort((r, -s))[:k]
        return r[order], s[order]

    @staticmethod
    def _sparse_top(segs: Sequence[tuple[Index, np.ndarray]],
                    sparse: Sequence[tuple[np.ndarray, np.ndarray]], k: int) -> np.ndarray:
        """The sparse mode's best k logical rows from each segment's scores (as `_top` merges)."""
        rows, scores = [], []
        for (_, logical), (acc, touched) in zip(segs, sparse, strict=True):
            r, s = _top_of(touched, acc[touched], k)
            rows.append(logical[r])
            scores.append(s)
        r, s = np.concatenate(rows or [np.zeros(0, np.int64)]), np.concatenate(scores or [np.zeros(0)])
        return r[np.lexsort((r, -s))[:k]]

    def _hybrid(self, segs: Sequence[tuple[Index, np.ndarray]], query: Mapping[str, Any], mode: str,
                cand: np.ndarray, k: int, w: tuple[float, float, float],
                sparse: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The hybrid mode's best k among logical candidates (sorted), each scored by its segment
        (`sparse`: each segment's sparse scores of every row)."""
        parts = []  # (segment, positions in cand, physical rows, its sparse scores)
        for (idx, logical), acc in zip(segs, sparse, strict=True):
            alive = np.nonzero(logical >= 0)[0]
            at = np.searchsorted(logical[alive], cand) if len(alive) else np.zeros(len(cand), np.int64)
            hit = (at < len(alive)) & (logical[alive][np.minimum(at, max(len(alive) - 1, 0))] == cand) \
                if len(alive) else np.zeros(len(cand), bool)
            pos = np.nonzero(hit)[0]
            parts.append((idx, pos, alive[at[pos]], acc))
        qd = np.asarray(query[DENSE_VECS], np.float32).astype(np.float64)
        d, s = np.zeros(len(cand)), np.zeros(len(cand))
        for idx, pos, phys, acc in parts:
            d[pos] = idx.dense_exact(qd, phys)
            s[pos] = acc[phys]
        qc = (np.asarray(query[COLBERT_VECS], np.float32).reshape(-1, self.dim).astype(np.float64)
              if "colbert" in mode_signals(mode) else None)

        def fast(sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            f, m = np.zeros(len(sel)), np.zeros(len(sel))
            for idx, pos, phys, _ in parts:
                on = np.isin(sel, pos)
                rows = phys[np.searchsorted(pos, sel[on])]
                f[on], m[on] = idx._colbert_fast(qc, rows)
            return f, m

        def exact(sel: np.ndarray) -> np.ndarray:
            out = np.zeros(len(sel))
            for idx, pos, phys, _ in parts:
                on = np.isin(sel, pos)
                out[on] = idx.colbert_exact(qc, phys[np.searchsorted(pos, sel[on])])
            return out

        sel, scores = _hybrid_top(mode, d, s, qc is not None, fast, exact, k, w)
        return cand[sel], scores


class _Retry(Exception):
    """Another connection committed between our check and our lock: reload and check again."""


# What reading or writing the database raises: SQLite's errors, and a UnicodeDecodeError where
# CPython decodes SQLite's message or a text value as UTF-8 and a malformed file holds other bytes
# (a damaged schema's "near ..." message; issue 38, regression writable/schema-message-not-utf8).
DB_ERRORS = (sqlite3.Error, UnicodeDecodeError)


def _corrupt(where: str, exc: BaseException) -> CorruptIndexError:
    return CorruptIndexError(f"{where}: unreadable ({one_line(exc)}); refusing a corrupt index database")


def _same_model(a: BundleIdentity, b: BundleIdentity) -> bool:
    return (a.model_file, a.model_sha256, a.tokenizer_file, a.tokenizer_sha256) == (
        b.model_file, b.model_sha256, b.tokenizer_file, b.tokenizer_sha256)


def _refusal(exc: BaseException, where: Path) -> EdgeM3Error:
    """SQLite's and the OS's failures as the kits' kinds, one line (a malformed database: corrupt_index)."""
    text = one_line(exc)
    low = text.lower()
    if "locked" in low or "busy" in low:
        return WriteRefused("index_busy", f"{where}: another writer holds the index ({text})")
    if isinstance(exc, OSError) or any(w in low for w in ("readonly", "read-only", "full", "disk i/o",
                                                          "unable to open")):
        return WriteRefused("write_failed", f"{where}: cannot write ({text}); nothing was changed")
    return CorruptIndexError(f"{where}: {text}; refusing a corrupt index database")


def _read_only_fs(path: Path) -> bool:
    """Whether `path` is on a filesystem mounted read-only (root can write anything else)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_root_base(path: Path) -> None:
    """Delete a replaced root base: its manifest first (so no reader takes half of it), then the
    files it listed."""
    manifest = path / INDEX_MANIFEST
    try:
        listed = list(json.loads(manifest.read_text(encoding="utf-8")).get("files", {}))
    except (OSError, ValueError, AttributeError, RecursionError):
        listed = []
    manifest.unlink(missing_ok=True)
    for name in listed:
        if is_file_name(name) and name not in (INDEX_DB,) and not name.startswith(INDEX_BASE_PREFIX):
            (path / name).unlink(missing_ok=True)


def open_index(path: Path, bundle: Any = None, verify: bool = True) -> Index | WritableIndex:
    """What `edge-m3 search` opens: a writable index when the folder has INDEX_DB, else format 1."""
    if (Path(path) / INDEX_DB).exists():
        return WritableIndex.open(path, bundle=bundle, verify=verify)
    return Index.load(path, bundle=bundle, verify=verify)

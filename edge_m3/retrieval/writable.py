"""A writable index: add, update, remove passages on top of a memory-mapped base, on SQLite.

Apps index what their users write, the moment they write it, and must survive being killed
mid-write: every write is one SQLite transaction (WAL), the base (a format-1 folder) is never
written in place, and `compact()` swaps in a new base in one transaction. Search returns exactly
what a fresh format-1 index of the surviving passages would (docs/index-format.md, "The writable
index"), and the kits' EdgeM3WritableIndex the same bits.

Three parts: store.py (the database: SQL, and every check of what it holds), segments.py (the
base plus the delta, searched through Index's public API) and compaction.py; this class holds
one state of them and is the API the kits share (docs/retrieval.md, "The writable index").
"""

from __future__ import annotations

import sqlite3
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from edge_m3.common.files import sha256_file
from edge_m3.errors import EdgeM3Error, OptionError, one_line
from edge_m3.retrieval import compaction
from edge_m3.retrieval.index import Index
from edge_m3.retrieval.index_folder import BundleIdentity, CorruptIndexError, PassageId
from edge_m3.retrieval.ranking import Hit
from edge_m3.retrieval.segments import Segments, stored_form
from edge_m3.retrieval.store import (
    DB_ERRORS,
    Meta,
    Retry,
    Stored,
    WriteRefused,
    check_meta,
    check_removed,
    connect,
    data_version,
    id_value,
    make_db,
    meta_values,
    read_passages,
    read_snapshot,
    read_version,
    refusal,
    write_rows,
)
from edge_m3.spec import (
    COLBERT_STORES,
    DENSE_STORES,
    INDEX_DB,
    INDEX_DB_RELOADS,
    INDEX_MANIFEST,
    INDEX_MAX_DIM,
)

__all__ = ["Embedder", "PassageId", "WritableIndex", "WriteRefused", "chunk_embedder", "open_index"]

# texts -> each text's pipeline outputs: one mapping (one chunk) or a list of its chunks' outputs
Embedder = Callable[[list[str]], list[Any]]


def chunk_embedder(pipe: Any, overlap: int | None = None) -> Embedder:
    """An embedder that splits each text into its chunks (DevicePipeline.embed_chunks), so a
    long passage is stored whole (docs/index-format.md, "Passages and chunks")."""
    return lambda texts: [pipe.embed_chunks(t, overlap) for t in texts]


def _same_model(a: BundleIdentity, b: BundleIdentity) -> bool:
    return (a.model_file, a.model_sha256, a.tokenizer_file, a.tokenizer_sha256) == (
        b.model_file, b.model_sha256, b.tokenizer_file, b.tokenizer_sha256)


class WritableIndex:
    """An index folder that takes writes (docs/index-format.md, "The writable index").

    `open` a folder (a format-1 base and/or its INDEX_DB) or `create` an empty one; `add`,
    `add_many`, `update`, `remove`, `remove_many`, `contains`, `ids`, `len()`, `rows`, `search`,
    `compact`, `close`. A text passage (or query) is embedded by `embed` (e.g.
    DevicePipeline.embed), given at open.
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
        self._segs: Segments | None = None
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
                self.reload()
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
        self.reload()
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

    def _make_db(self) -> None:
        make_db(self.path, meta_values(self.dim, self.dense_store, self.colbert_store, self.bundle,
                                       self.base_name, self.base_sha, self.generation))

    def _connect(self) -> None:
        self.db = connect(self.path, self.durable, self.verify)

    # ------------------------------------------------------------------ reading the state

    def reload(self) -> None:
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
                if data_version(self.db, self.path / INDEX_DB) == self._version:
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

    def _load_once(self) -> bool:
        """One try of reload: False when another connection committed between its SELECTs."""
        assert self.db is not None
        where = str(self.path / INDEX_DB)
        self._version = read_version(self.db, self.path)
        snap = read_snapshot(self.db, self.path, self._version)
        if snap is None:
            return False
        meta = check_meta(snap.meta_rows, where)
        self._apply_meta(meta)
        self._removed = check_removed(snap.removed, self.base.ids if self.base is not None else None,
                                      self._base_rows, where)
        self._delta = read_passages(snap.rows, meta, where)
        clash = [p for p in self._delta if p in self._base_rows and self._alive_base(self._base_rows[p][0])]
        if clash:
            raise CorruptIndexError(f"{where}: id {clash[0]!r} is both in the base and added; refusing a "
                                    "corrupt index database")
        self._segs = None
        return True

    def _apply_meta(self, meta: Meta) -> None:
        """The index's shape and bundle from meta, and the base it names opened (once per base)."""
        self.dim, self.generation = meta.dim, meta.generation
        self.dense_store, self.colbert_store, self.bundle = meta.dense, meta.colbert, meta.bundle
        base = meta.base
        if base and (self.base is None or base != self.base_name or meta.base_sha256 != self.base_sha):
            self._open_base(base, meta.base_sha256)
        elif not base:
            self.base, self._base_rows = None, {}
        self.base_name, self.base_sha = base, meta.base_sha256

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
        if self.db is not None:
            self._check_base(base, manifest)
        else:
            self.dim, self.dense_store, self.colbert_store, self.bundle = (
                base.dim, base.dense_store, base.colbert_store, base.bundle)
        self.base = base
        self.base_sha = got if sha is None else sha
        self._base_rows = {}
        for r, pid in enumerate(base.ids):
            self._base_rows.setdefault(pid, []).append(r)

    def _check_base(self, base: Index, manifest: Path) -> None:
        """The base the database names has the database's shape and model."""
        if (base.dim, base.dense_store, base.colbert_store) != (self.dim, self.dense_store, self.colbert_store):
            raise CorruptIndexError(f"{self.path / INDEX_DB}: dim/dense/colbert differ from its base "
                                    f"{manifest}")
        if (base.bundle.to_json() if base.bundle else None) != (self.bundle.to_json() if self.bundle else None):
            if not (base.bundle and self.bundle and _same_model(base.bundle, self.bundle)):
                raise CorruptIndexError(f"{self.path / INDEX_DB}: written for another bundle than its base "
                                        f"{manifest}")

    def sync(self) -> None:
        """Reload when another connection committed since (PRAGMA data_version)."""
        if self._closed:
            raise EdgeM3Error(f"{self.path}: the index was closed")
        if self.db is None:
            return
        if data_version(self.db, self.path / INDEX_DB) != self._version:
            self.reload()

    def stale_inside(self) -> bool:
        """Inside a transaction: whether another connection committed since this state was read."""
        assert self.db is not None
        return self.db.execute("PRAGMA data_version").fetchone()[0] != self._version

    def segments(self) -> Segments:
        """This state as searchable segments (kept until a write or a reload)."""
        if self._segs is None:
            self._segs = Segments(self.base, self._removed, self._delta, self.dim, self.dense_store,
                                  self.colbert_store, self.bundle)
        return self._segs

    # ------------------------------------------------------------------ what it holds

    def _alive_base(self, row: int) -> bool:
        i = bisect_left(self._removed, row)
        return not (i < len(self._removed) and self._removed[i] == row)

    def __len__(self) -> int:
        """The number of passages (a chunked passage is one)."""
        self.sync()
        if self.base is None:
            return len(self._delta)
        first = self.base.chunk_counts()[0] == 0  # a passage's first row
        return int(first.sum()) - int(first[self._removed].sum()) + len(self._delta)

    @property
    def rows(self) -> int:
        """The number of rows (a passage has one per chunk)."""
        self.sync()
        n_base = len(self.base) - len(self._removed) if self.base is not None else 0
        return n_base + sum(len(c) for c in self._delta.values())

    @property
    def has_colbert(self) -> bool:
        return self.colbert_store != "none"

    def contains(self, pid: PassageId) -> bool:
        """Whether a passage with this id is in the index."""
        self.sync()
        pid = id_value(pid)
        return pid in self._delta or (pid in self._base_rows and self._alive_base(self._base_rows[pid][0]))

    def ids(self) -> list[PassageId]:
        """Every passage's id once, in logical row order."""
        self.sync()
        return self.segments().ids()

    # ------------------------------------------------------------------ writes

    def _embedded(self, texts: list[str]) -> list[Any]:
        if self.embed is None:
            raise EdgeM3Error("a text passage needs an embedder: open the index with embed= (a bundle's "
                              "DevicePipeline.embed)")
        return self.embed(texts)

    def _outputs(self, items: Sequence[tuple[PassageId, Any]]) -> list[tuple[PassageId, list[Stored]]]:
        """Each (id, text, outputs or chunks' outputs) checked and in stored form (a list of
        chunks), before anything is written."""
        ids = [id_value(pid) for pid, _ in items]
        if len(set(ids)) != len(ids):
            dup = next(p for p in ids if ids.count(p) > 1)
            raise WriteRefused("duplicate_id", f"id {dup!r} is given twice in one batch")
        texts = [i for i, (_, x) in enumerate(items) if isinstance(x, str)]
        outs: list[Any] = [x for _, x in items]
        if texts:
            for i, o in zip(texts, self._embedded([items[i][1] for i in texts]), strict=True):
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
        self.sync()
        rows = self._outputs(list(items))
        self._write(rows, [], replace=replace)

    def update(self, pid: PassageId, passage: str | Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        """Replace a passage (every chunk): it is removed and appended (the last rows) in one transaction."""
        self.sync()
        rows = self._outputs([(pid, passage)])
        if not self.contains(rows[0][0]):
            raise WriteRefused("unknown_id", f"id {rows[0][0]!r} is not in the index")
        self._write(rows, [], replace=True)

    def remove(self, pid: PassageId) -> None:
        """Delete a passage (a tombstone over the base); an id not there is refused."""
        self.remove_many([pid])

    def remove_many(self, pids: Iterable[PassageId]) -> None:
        """Delete passages in one transaction (all or none)."""
        self.sync()
        ids = [id_value(p) for p in pids]
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
        while True:
            if not replace:
                for pid, _ in adds:
                    if self.contains(pid):
                        raise WriteRefused("duplicate_id", f"id {pid!r} is already in the index (update it, or "
                                           "remove it first)")
            gone = list(removes) + [pid for pid, _ in adds if replace and self.contains(pid)]
            db = self._writable_db()
            tomb = sorted(r for p in gone if p not in self._delta for r in self._base_rows[p])
            try:
                self._commit(db, tomb, [p for p in gone if p in self._delta], adds)
                break
            except Retry:
                self.reload()
            except DB_ERRORS as exc:
                raise refusal(exc, self.path / INDEX_DB) from None
        for r in tomb:
            self._removed.insert(bisect_left(self._removed, r), r)
        for p in gone:
            self._delta.pop(p, None)
        for pid, s in adds:
            self._delta[pid] = s
        self._segs = None
        self._version = db.execute("PRAGMA data_version").fetchone()[0]

    def _writable_db(self) -> sqlite3.Connection:
        """The database, made by the first write on a format-1 folder."""
        if self.db is None:
            self._make_db()
            self._connect()
            self._version = self.db.execute("PRAGMA data_version").fetchone()[0]  # type: ignore[union-attr]
        assert self.db is not None
        return self.db

    def _commit(self, db: sqlite3.Connection, tomb: list[int], deleted: list[PassageId],
                adds: list[tuple[PassageId, list[Stored]]]) -> None:
        """The write's transaction; Retry (rolled back) when another writer committed first."""
        db.execute("BEGIN IMMEDIATE")
        try:
            if self.stale_inside():  # another writer committed between our check and our lock
                raise Retry
            write_rows(db, tomb, deleted, adds)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    # ------------------------------------------------------------------ compaction

    def compact(self) -> None:
        """Fold the writes into a new memory-mapped base (base-<generation+1>/), swapped in by one
        transaction; the old base is deleted after. A kill leaves the old state or the new one."""
        compaction.compact(self)

    # ------------------------------------------------------------------ search

    def search(self, query: Mapping[str, Any] | str, k: int = 10, mode: str = "dense",
               weights: Sequence[float] | None = None, chunks: bool = False) -> list[Hit]:
        """The best `k` passages, each by its best chunk (`chunks`: the best `k` rows): exactly
        what a fresh index of the surviving passages returns. `query`: pipeline outputs, or a
        text embedded by `embed` (its first chunk: the text cut as DevicePipeline.embed cuts it)."""
        self.sync()
        if isinstance(query, str):
            query = self._query_of(query)
        return self.segments().search(query, k, mode, weights, chunks)

    def _query_of(self, text: str) -> Mapping[str, Any]:
        if self.embed is None:
            raise EdgeM3Error("a text query needs an embedder: open the index with embed= (a bundle's "
                              "DevicePipeline.embed)")
        out = self.embed([text])[0]
        out = out[0] if isinstance(out, list | tuple) and out else out
        if not isinstance(out, Mapping):
            raise EdgeM3Error("the embedder gave no pipeline outputs for the query text")
        return out


def open_index(path: Path, bundle: Any = None, verify: bool = True) -> Index | WritableIndex:
    """What `edge-m3 search` opens: a writable index when the folder has INDEX_DB, else format 1."""
    if (Path(path) / INDEX_DB).exists():
        return WritableIndex.open(path, bundle=bundle, verify=verify)
    return Index.load(path, bundle=bundle, verify=verify)

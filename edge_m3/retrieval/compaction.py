"""The writable index's compaction: the surviving passages folded into a new format-1 base
(INDEX_BASE_PREFIX + generation), swapped in by one transaction, the replaced base deleted after
(docs/index-format.md, "The writable index"). A kill leaves the old state or the new one.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.common.files import sha256_file
from edge_m3.retrieval.index import Index, postings
from edge_m3.retrieval.segments import Segments
from edge_m3.retrieval.store import DB_ERRORS, base_generation, refusal, swap_base
from edge_m3.spec import INDEX_BASE_PREFIX, INDEX_DB, INDEX_MANIFEST, INDEX_POSTING_WEIGHTS, is_file_name

# `w` below is a WritableIndex (not imported: writable.py imports this module, and the package
# has no import cycles, TYPE_CHECKING ones included): its state, sync/reload and its segments.

_PW = INDEX_POSTING_WEIGHTS


def survivors(base: Index, alive: np.ndarray, delta: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
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


def merged(index: Any) -> Index:
    """The surviving passages of a writable index (or one state of it) as one in-memory format-1
    index, in logical row order: what a fresh build of them holds, and what compaction saves.
    `index`: a WritableIndex or its Segments."""
    seg = index if isinstance(index, Segments) else index.segments()
    delta = seg.delta_arrays()
    if seg.base is None:
        arrays, ids = delta, seg.delta_ids()
    else:
        arrays = survivors(seg.base, seg.alive, delta)
        ids = [p for r, p in enumerate(seg.base.ids) if seg.alive[r]] + seg.delta_ids()
    return Index.from_arrays(seg.dim, seg.dense_store, seg.colbert_store, arrays, ids, seg.bundle)


def compact(w: Any) -> None:
    """Fold the writes into a new memory-mapped base (base-<generation+1>/), swapped in by one
    transaction; the old base is deleted after. A kill leaves the old state or the new one."""
    while True:
        w.sync()
        if w.db is None:
            return  # nothing written yet: the base is already compact
        db = w.db
        gen = w.generation + 1
        name = f"{INDEX_BASE_PREFIX}{gen}"
        folder = w.path / name
        try:
            db.execute("BEGIN IMMEDIATE")  # no other writer until the swap
        except DB_ERRORS as exc:
            raise refusal(exc, w.path / INDEX_DB) from None
        if _swap(w, db, folder, name, gen):
            break
        w.reload()  # another writer committed between our check and our lock
    old = w.base_name
    w.base, w.base_name, w.base_sha, w.generation = None, "", "", gen
    w.reload()
    collect(w.path, w.base_name, w.generation, old)


def _swap(w: Any, db: sqlite3.Connection, folder: Path, name: str, gen: int) -> bool:
    """Inside BEGIN IMMEDIATE: the new base written and named, committed; False (rolled back)
    when the state read is stale."""
    try:
        if w.stale_inside():
            db.execute("ROLLBACK")
            return False
        index = merged(w.segments())
        if folder.exists():
            shutil.rmtree(folder)  # a kill's leftover: never referenced
        index.save(folder)
        swap_base(db, name, sha256_file(folder / INDEX_MANIFEST), gen)
        db.execute("COMMIT")
        return True
    except BaseException as exc:
        if db.in_transaction:
            db.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error | OSError):
            raise refusal(exc, w.path / INDEX_DB) from None
        raise


def collect(path: Path, keep: str, generation: int, old: str = "") -> None:
    """Delete bases no database names: the one just replaced, and a kill's leftovers (a base
    written but never swapped in, a half-written one). Only generations up to this one: a
    later one may be another process's compaction in progress."""
    for p in path.iterdir():
        name = p.name[1:].split(".", 1)[0] if p.name.startswith(".") and (
            ".building-" in p.name or ".old-" in p.name) else p.name
        gen = base_generation(name)
        if p.is_dir() and gen is not None and gen <= generation and p.name != keep:
            shutil.rmtree(p, ignore_errors=True)
    if keep != "." and (old == "." or (path / INDEX_MANIFEST).exists()):
        remove_root_base(path)


def remove_root_base(path: Path) -> None:
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

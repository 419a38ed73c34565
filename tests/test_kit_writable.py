"""The kits' writable index (EdgeM3WritableIndex, issue 35) against Python's, bit for bit.

Each kit runs an op log (tools/kit/retrieval_wire.py, "op log") on a folder of its own and
answers one line per operation; the answers must equal the reference's line for line: hits,
logical rows, ids and float64 score bits, counts, and the typed error kinds.

Kotlin (android_assets/jvm/RetrievalCheck.kt `ops` over EdgeM3WritableIndex and jvm/JdbcIndexDb.kt,
the xerial SQLite JDBC driver, Debian's libxerial-sqlite-jdbc-java; the functions named `_kt*`,
`kt_*` and `test_kotlin_*`): its own drawn logs (rounding ties of the int8 and float16 stores, many
scales) run by the kit, by Python's WritableIndex and by fresh builds; the compacted base's bytes
against Python's `Index.save`; one database shared with Python; more rows than HYBRID_CANDIDATES;
the refused writes. A spoiled database or index folder is a case of the conformance suite
(tests/conformance/index/, tests/test_conformance.py), which every language runs.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_m3.errors import EdgeM3Error
from edge_m3.retrieval.index import Index
from edge_m3.retrieval.index_folder import BundleIdentity
from edge_m3.spec import (
    COLBERT_STORES,
    COLBERT_VECS,
    DENSE_STORES,
    DENSE_VECS,
    INDEX_BASE_PREFIX,
    INDEX_DB,
    INDEX_MANIFEST,
    LEXICAL_WEIGHTS,
    SCORE_MODES,
)
from tools.kit import retrieval_wire as wire

Op = tuple[Any, ...]


# ------------------------------------------------------------------ the reference: fresh builds
def fresh_answers(
    log: Sequence[Op], start: Sequence[tuple[Any, dict]] = (), stores: tuple[int, str, str] | None = None
) -> list[str]:
    """The answers the op log must give, from the spec alone: the surviving passages in logical
    order, and every search answered by a format-1 Index built fresh from them, a passage's
    chunks its consecutive rows (`start`: the passages of a format-1 base the log opens, `stores`
    its dim, dense and colbert)."""
    live: list[tuple[Any, dict]] = list(start)
    out = []

    def find(pid: Any) -> int | None:
        return next((i for i, (q, _) in enumerate(live) if type(q) is type(pid) and q == pid), None)

    for op in log:
        name = op[0]
        if name == "create":
            stores = op[1:4]
            live = []
            out.append("ok")
        elif name in ("open", "reopen", "compact"):
            out.append("ok")
        elif name in ("add", "update") and not wire.chunk_list(op[2]):
            out.append("error invalid_input")  # a passage of no chunks
        elif name == "add":
            if find(op[1]) is not None:
                out.append("error duplicate_id")
            else:
                live.append((op[1], op[2]))
                out.append("ok")
        elif name in ("update", "remove"):
            at = find(op[1])
            if at is None:
                out.append("error unknown_id")
            else:
                del live[at]
                if name == "update":
                    live.append((op[1], op[2]))
                out.append("ok")
        elif name == "count":
            out.append(f"count {len(live)}")
        elif name == "contains":
            out.append(f"contains {'true' if find(op[1]) is not None else 'false'}")
        elif name == "search":
            assert stores is not None
            idx = Index(*stores)
            rows = [(q, c) for q, p in live for c in wire.chunk_list(p)]
            idx.add([c for _, c in rows], [q for q, _ in rows])
            try:
                hits = idx.search(op[4], op[1], op[2], op[3], chunks=len(op) > 5 and bool(op[5]))
            except EdgeM3Error:
                out.append("error invalid_input")
                continue
            out.append(wire.hits_line(hits))
        else:
            raise AssertionError(name)
    return out


def _save_base(
    folder: Path,
    stores: tuple[int, str, str],
    base: Sequence[tuple[Any, dict]],
    bundle: BundleIdentity | None = None,
) -> None:
    idx = Index(*stores, bundle=bundle)
    idx.add([p for _, p in base], [q for q, _ in base])
    idx.save(folder)


# ------------------------------------------------------------------ Swift (edge-m3-retrieval ops)
@pytest.fixture(scope="session")
def swift_ops(swift_build: Path):
    """run(folder, log) -> the Swift kit's answer lines."""
    tool = swift_build / "release" / wire.SWIFT_PRODUCT

    def run(folder: Path, log: Sequence[Op], prefix: Sequence[str] = ()) -> list[str]:
        ops = folder.parent / f"{folder.name}.ops"
        ops.write_text(wire.ops(log), encoding="ascii")
        proc = subprocess.run(
            [*prefix, str(tool), "ops", str(folder), str(ops)],
            capture_output=True,
            text=True,
            timeout=120,
            env=os.environ | {"EDGE_M3_OPS_VERBOSE": "1"},
        )
        assert proc.returncode == 0, proc.stderr
        return wire.answers(proc.stdout)

    return run


def _vec(dim: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    d = rng.standard_normal(dim).astype(np.float32)
    c = rng.standard_normal((2, dim)).astype(np.float32)
    return {
        DENSE_VECS: d / np.linalg.norm(d),
        LEXICAL_WEIGHTS: {str(seed % 5): 0.5, "9": 0.25},
        COLBERT_VECS: c / np.linalg.norm(c, axis=1, keepdims=True),
    }


BUNDLE = BundleIdentity("model.tflite", "a" * 64, "sentencepiece.bpe.model", "b" * 64, "int8")


def test_swift_refuses_bad_writes(swift_ops, tmp_path: Path) -> None:
    """Duplicate add, missing update and remove: typed errors, nothing changed."""
    v = _vec(4, 1)
    log: list[Op] = [
        ("create", 4, "int8", "none"),
        ("add", 1, v),
        ("add", 1, v),
        ("add", "1", v),
        ("update", 2, v),
        ("remove", "x"),
        ("remove", 1),
        ("remove", 1),
        ("count",),
        ("contains", "1"),
        ("search", 3, "colbert", (1.0, 1.0, 1.0), v),
        ("search", 3, "sparse", (1.0, 1.0, 1.0), v),
    ]
    got = swift_ops(tmp_path / "index", log)
    assert got == fresh_answers(log)
    assert got[:10] == [
        "ok",
        "ok",
        "error duplicate_id",
        "ok",
        "error unknown_id",
        "error unknown_id",
        "ok",
        "error unknown_id",
        "count 1",
        "contains true",
    ]
    assert got[10] == "error invalid_input"


def _read_only(folder: Path) -> list[str] | None:
    """A command prefix that shows `folder` read-only to the tool (chmod for a normal user; a
    read-only bind mount in a user namespace for root, who ignores modes); None: impossible here."""
    if os.geteuid() != 0:
        for p in [folder, *folder.rglob("*")]:
            p.chmod(0o555 if p.is_dir() else 0o444)
        return []
    if shutil.which("unshare") is None:
        return None
    script = f'mount --bind "{folder}" "{folder}" && mount -o remount,bind,ro "{folder}" && exec "$@"'
    prefix = ["unshare", "-rm", "sh", "-c", script, "sh"]
    if subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        return None
    return prefix


def test_swift_read_only_index(swift_ops, tmp_path: Path) -> None:
    """A read-only index folder (database and base) is searched; every write fails with
    write_failed and nothing changes; also a read-only format-1 folder's first write."""
    v = _vec(4, 5)
    folder = tmp_path / "index"
    log: list[Op] = [("open",), ("add", 10, v), ("remove", 1), ("count",)]
    _save_base(folder, (4, "float32", "fp16"), [(i, _vec(4, i)) for i in range(3)], BUNDLE)
    plain = tmp_path / "plain"
    shutil.copytree(folder, plain)
    assert swift_ops(folder, log) == ["ok", "ok", "ok", "count 3"]
    search = ("search", 5, "colbert+sparse+dense", (1.0, 1.0, 1.0), v)
    want = swift_ops(folder, [("open",), search])
    writes: list[Op] = [
        ("open",),
        ("count",),
        search,
        ("add", 11, v),
        ("update", 0, v),
        ("remove", 0),
        ("compact",),
        ("count",),
        search,
    ]
    for f in (folder, plain):
        prefix = _read_only(f)
        if prefix is None:
            pytest.skip("cannot make a folder read-only here (root without user namespaces)")
        got = swift_ops(f, writes, prefix)
        n = "count 3"
        start = [(i, _vec(4, i)) for i in range(3)]
        w = want[1] if f == folder else fresh_answers([search], start, (4, "float32", "fp16"))[0]
        compact = "error write_failed" if f == folder else "ok"  # no database yet: nothing to compact
        assert got == ["ok", n, w] + ["error write_failed"] * 3 + [compact, n, w], got


def test_swift_and_python_write_one_index(swift_ops, tmp_path: Path) -> None:
    """Python and the Swift kit take turns on one folder (a format-1 base, then its database,
    compactions by either): each reads what the other wrote, and every answer is a fresh build's."""
    stores = (4, "int8", "int8")
    start = [(i, _vec(4, i)) for i in range(4)]
    folder = tmp_path / "index"
    _save_base(folder, stores, start)
    q = _vec(4, 20)
    search = [("search", 6, mode, (0.4, 0.2, 0.4), q) for mode in SCORE_MODES]
    turns: list[tuple[str, list[Op]]] = [
        ("python", [("open",), ("add", 10, _vec(4, 10)), ("remove", 1)]),
        (
            "swift",
            [
                ("open",),
                ("add", "s", _vec(4, 11)),
                ("remove", 0),
                *search,
                ("compact",),
                ("add", 12, _vec(4, 12)),
                ("remove", 10),
                ("update", 2, _vec(4, 13)),
                *search,
            ],
        ),
        ("python", [("open",), ("count",), *search, ("add", 13, _vec(4, 14)), ("remove", "s"), ("compact",)]),
        ("swift", [("open",), ("count",), *search, ("remove", 13), ("add", 14, _vec(4, 15))]),
        ("python", [("open",), ("count",), *search]),
    ]
    whole = [op for _, log in turns for op in log]
    want = fresh_answers(whole, start, stores)
    at = 0
    for who, log in turns:
        got = wire.python_answers(folder, log) if who == "python" else swift_ops(folder, log)
        assert got == want[at : at + len(log)], who
        at += len(log)


def test_swift_ids_and_remove_many_are_pythons(swift_ops, tmp_path: Path) -> None:
    """`ids` (every passage's id once, in logical row order) and `remove_many` (one transaction:
    all or none; an id missing, or given twice, refused as unknown_id) in the Swift kit (issue 59
    item 3, one API in three languages): every answer Python's WritableIndex's, over a base, added
    chunks, an update, a compaction and a reopen."""
    stores = (4, "int8", "fp16")
    start = [(i, _vec(4, i)) for i in range(4)]
    folder, py = tmp_path / "swift", tmp_path / "python"
    _save_base(folder, stores, start)
    shutil.copytree(folder, py)
    q = _vec(4, 20)
    log: list[Op] = [
        ("open",), ("ids",), ("add", "s", _chunks(5, 2)), ("add", 10, _vec(4, 10)), ("update", 1, _vec(4, 11)),
        ("ids",), ("remove_many", [0, 99]), ("remove_many", [2, "s", 2]), ("count",),
        ("remove_many", [2, "s"]), ("ids",), ("count",), ("search", 5, "dense", (0.4, 0.2, 0.4), q, True),
        ("remove_many", []), ("compact",), ("ids",), ("reopen",), ("ids",), ("remove_many", [10, 0]), ("ids",),
    ]
    got = swift_ops(folder, log)
    assert got == wire.python_answers(py, log)
    assert got[1] == "ids 4 i0 i1 i2 i3"
    assert got[5] == "ids 6 i0 i2 i3 s73 i10 i1"  # an update appends the passage: its rows are the last
    assert got[6:9] == ["error unknown_id", "error unknown_id", "count 6"]  # refused: nothing removed
    assert got[10] == "ids 4 i0 i3 i10 i1"
    assert got[-1] == "ids 2 i3 i1"


def _chunks(seed: int, n: int) -> list[dict[str, Any]]:
    """A passage of n chunks (n outputs)."""
    return [_vec(4, seed * 10 + c) for c in range(n)]


def _compacted_as_saved(folder: Path, stores: tuple[int, str, str], alive: Sequence[tuple[Any, Any]]) -> None:
    """The folder's current base holds the bytes Index.save writes for the surviving passages
    (each passage's chunks its consecutive rows, ids repeated in ids.json)."""
    fresh = folder.parent / f"{folder.name}-fresh"
    rows = [(q, c) for q, p in alive for c in wire.chunk_list(p)]
    idx = Index(*stores)
    idx.add([c for _, c in rows], [q for q, _ in rows])
    idx.save(fresh)
    assert _saved_files(_current_base(folder)) == _saved_files(fresh)


def test_swift_chunked_passages(swift_ops, tmp_path: Path) -> None:
    """Passages of several chunks (docs/index-format.md, "Passages and chunks") in the Swift
    kit: multi-chunk adds and updates (an empty list refused), removal of every chunk, count of
    passages, passage search (the best chunk of each) and chunk search in every mode, compaction
    keeping the chunks: every answer Python's WritableIndex's and a fresh build's."""
    stores = (4, "int8", "fp16")
    q, q2 = _vec(4, 900), _vec(4, 901)

    def searches(k: int) -> list[Op]:
        return [("search", k, mode, w, query, scope) for mode in SCORE_MODES
                for w, query in (((1.0, 1.0, 1.0), q), ((0.4, 0.2, 0.4), q2)) for scope in (False, True)]

    log: list[Op] = [
        ("create", *stores),
        ("add", 1, _chunks(1, 3)),
        ("add", "1", _vec(4, 2)),
        ("add", 2, _chunks(3, 2)),
        ("add", 3, []),
        ("add", 1, _chunks(4, 1)),
        ("count",),
        *searches(2),
        ("update", 1, _chunks(5, 2)),
        ("update", 2, []),
        ("update", 9, _chunks(6, 2)),
        ("contains", 1),
        *searches(3),
        ("remove", 2),
        ("count",),
        *searches(1),
        ("compact",),
        ("count",),
        *searches(10),
        ("add", 2, _chunks(7, 4)),
        ("reopen",),
        ("remove", "1"),
        *searches(2),
        ("compact",),
        ("reopen",),
        ("count",),
        *searches(4),
    ]
    folder = tmp_path / "swift"
    got = swift_ops(folder, log)
    want = fresh_answers(log)
    assert got == want
    (tmp_path / "python").mkdir()
    assert wire.python_answers(tmp_path / "python", log) == want
    assert want[4:7] == ["error invalid_input", "error duplicate_id", "count 3"]
    # the log shows what it means to: passage hits with chunk numbers > 0, chunk hits repeating ids
    hits = [a.split() for a in want if a.startswith("hits ")]
    assert any(int(h[2 + 4 * i + 2]) > 0 for h in hits for i in range(int(h[1])))
    assert any(len({h[2 + 4 * i + 1] for i in range(int(h[1]))}) < int(h[1]) for h in hits)
    _compacted_as_saved(folder, stores, [(1, _chunks(5, 2)), (2, _chunks(7, 4))])


def test_swift_writes_a_base_with_repeated_ids(swift_ops, tmp_path: Path) -> None:
    """A format-1 base whose rows share ids (a passage's chunks, even scattered over the rows) is
    writable: its chunk numbers are the ids' occurrences, a removal tombstones every row of the
    passage, count is passages; Swift and Python take turns on the folder, each answering as a
    fresh build, and the compacted base is Index.save's."""
    stores = (4, "float32", "int8")
    ids: list[Any] = [5, 6, 5, "a", 5, 7, 6]
    outs = [_vec(4, 200 + r) for r in range(len(ids))]
    folder = tmp_path / "index"
    idx = Index(*stores)
    idx.add(outs, ids)
    idx.save(folder)
    q = _vec(4, 300)
    search: list[Op] = [("search", k, mode, (1.0, 1.0, 1.0), q, scope) for k in (1, 2, 5)
                        for mode in SCORE_MODES for scope in (False, True)]
    turns: list[tuple[str, list[Op]]] = [
        ("swift", [("open",), ("count",), ("contains", 5), *search, ("remove", 5), ("count",), *search,
                   ("add", 5, _chunks(8, 2)), ("update", 6, _chunks(9, 3)), *search]),
        ("python", [("open",), ("count",), *search, ("remove", "a"), ("add", "b", _chunks(10, 2))]),
        ("swift", [("open",), ("count",), *search, ("compact",), ("reopen",), ("count",), *search,
                   ("remove", 6), ("add", 6, _vec(4, 11))]),
        ("python", [("open",), ("count",), *search]),
    ]
    whole = [op for _, log in turns for op in log]
    # a fresh build keeps the base's row order (5, 6, 5, "a", 5, 7, 6) while its passages live
    want = _fresh_rows_answers(whole, list(zip(ids, outs, strict=True)), stores)
    at = 0
    for who, log in turns:
        got = wire.python_answers(folder, log) if who == "python" else swift_ops(folder, log)
        assert got == want[at:at + len(log)], who
        at += len(log)
    assert want[1] == "count 4"


def _fresh_rows_answers(log: Sequence[Op], rows: list[tuple[Any, dict]],
                        stores: tuple[int, str, str]) -> list[str]:
    """fresh_answers over a start of rows (id, outputs) in base order, chunks possibly scattered:
    a removed passage loses every row; an added one appends its chunks."""
    out = []

    def has(pid: Any) -> bool:
        return any(type(p) is type(pid) and p == pid for p, _ in rows)

    for op in log:
        name = op[0]
        if name in ("add", "update") and not wire.chunk_list(op[2]):
            out.append("error invalid_input")
        elif name == "add" and has(op[1]) or name in ("update", "remove") and not has(op[1]):
            out.append("error duplicate_id" if name == "add" else "error unknown_id")
        elif name in ("add", "update", "remove"):
            rows = [(p, o) for p, o in rows if not (type(p) is type(op[1]) and p == op[1])]
            if name != "remove":
                rows += [(op[1], c) for c in wire.chunk_list(op[2])]
            out.append("ok")
        elif name == "count":
            out.append(f"count {len({(type(p), p) for p, _ in rows})}")
        elif name == "contains":
            out.append(f"contains {'true' if has(op[1]) else 'false'}")
        elif name == "search":
            idx = Index(*stores)
            idx.add([o for _, o in rows], [p for p, _ in rows])
            out.append(wire.hits_line(idx.search(op[4], op[1], op[2], op[3], chunks=bool(op[5]))))
        else:
            out.append("ok")
    return out


# ------------------------------------------------------------------ Kotlin (RetrievalCheck ops)

SQLITE_JDBC_JAR = wire.SQLITE_JDBC_JAR
WEIGHT_SETS = ((1.0, 1.0, 1.0), (0.4, 0.2, 0.4), (1.0, 0.0, 0.3))
DIM = 6

Op = tuple[Any, ...]


# ------------------------------------------------------------------ the reference: a fresh build

def _fresh_index(dim: int, dense: str, colbert: str, passages: Sequence[tuple[Any, Any]]) -> Index:
    """A format-1 index of the passages in order, one row per chunk (a passage is its outputs,
    one chunk, or a list of its chunks' outputs: rows sharing its id)."""
    idx = Index(dim, dense, colbert)
    rows = [(i, c) for i, p in passages for c in wire.chunk_list(p)]
    if rows:
        idx.add([c for _, c in rows], [i for i, _ in rows])
    return idx


def _scope(op: Op) -> bool:
    """A search op's scope: True for chunks (row hits), False for passages (the default)."""
    return bool(op[5]) if len(op) > 5 else False


def expected_answers(log: Sequence[Op], base: tuple[str, str, list] | None = None, dim: int = DIM) -> list[str]:
    """The answer lines the spec defines for `log`: every search answered by a fresh format-1
    index of the surviving passages in logical-row order (passages or chunks, as the op says).
    `base`: (dense, colbert, passages) of the format-1 folder of width `dim` the log opens first."""
    store: tuple[int, str, str] | None = None
    alive: list[tuple[Any, dict]] = []
    out = []
    for op in log:
        name = op[0]
        if name == "create":
            store, alive = (op[1], op[2], op[3]), []
            out.append("ok")
        elif name in ("open", "reopen", "compact"):
            if name == "open" and base is not None and store is None:
                store, alive = (dim, base[0], base[1]), list(base[2])
            out.append("ok")
        elif name in ("add", "update") and not wire.chunk_list(op[2]):
            out.append("error invalid_input")  # a passage of no chunks, checked first
        elif name == "add":
            if any(_same(i, op[1]) for i, _ in alive):
                out.append("error duplicate_id")
            else:
                alive.append((op[1], op[2]))
                out.append("ok")
        elif name in ("update", "remove"):
            at = [n for n, (i, _) in enumerate(alive) if _same(i, op[1])]
            if not at:
                out.append("error unknown_id")
                continue
            del alive[at[0]]
            if name == "update":
                alive.append((op[1], op[2]))
            out.append("ok")
        elif name == "count":
            out.append(f"count {len(alive)}")
        elif name == "contains":
            out.append(f"contains {'true' if any(_same(i, op[1]) for i, _ in alive) else 'false'}")
        elif name == "search":
            assert store is not None
            try:
                hits = _fresh_index(*store, alive).search(op[4], op[1], op[2], op[3], chunks=_scope(op))
            except EdgeM3Error:
                out.append("error invalid_input")
                continue
            out.append(wire.hits_line(hits))
        else:
            raise AssertionError(name)
    return out


def _same(a: Any, b: Any) -> bool:
    """Ids are equal when their type and value are (1 and "1" are two ids)."""
    return type(a) is type(b) and a == b


def survivors(log: Sequence[Op], base: tuple[str, str, list] | None = None) -> list[tuple[Any, Any]]:
    alive: list[tuple[Any, Any]] = list(base[2]) if base else []
    for op in log:
        if op[0] in ("add", "update") and not wire.chunk_list(op[2]):
            continue  # refused
        if op[0] == "create":
            alive = []
        elif op[0] in ("update", "remove") and any(_same(i, op[1]) for i, _ in alive):
            alive = [(i, p) for i, p in alive if not _same(i, op[1])]
            if op[0] == "update":
                alive.append((op[1], op[2]))
        elif op[0] == "add" and not any(_same(i, op[1]) for i, _ in alive):
            alive.append((op[1], op[2]))
    return alive


# ------------------------------------------------------------------ drawn logs

def _kt_outputs(rng: np.random.Generator, dim: int, scale: float) -> dict[str, Any]:
    """One passage's or query's outputs; `scale` reaches fp16's subnormals and int8's small scales."""
    dense = (rng.standard_normal(dim) * scale).astype(np.float32)
    if rng.random() < 0.1:
        dense[:] = 0  # int8: scale 1.0
    n_tok = int(rng.integers(0, 5))
    lex = {int(t): float(np.float32(rng.random() + 1e-3)) for t in rng.choice(24, n_tok, replace=False)}
    col = (rng.standard_normal((int(rng.integers(0, 4)), dim)) * scale).astype(np.float32)
    if rng.random() < 0.15:  # rounding ties: int8 codes (scale 1.0) and float16, normal and subnormal
        dense = np.resize(np.array([127, 0.5, 1.5, 2.5, -0.5, -2.5], np.float32), dim)
        col = np.resize(np.array([1 + 2**-11, 1 + 3 * 2**-11, 2**-25, 3 * 2**-25, -(2**-15 + 2**-25), 65519],
                                 np.float32), (2, dim))
    return {DENSE_VECS: dense, LEXICAL_WEIGHTS: lex, COLBERT_VECS: col}


_IDS = st.one_of(st.integers(-3, 6), st.sampled_from([2**62, -(2**63)]),
                 st.sampled_from(["1", "", "a", "é\"\\\n", "😀", "x" * 20]))


@st.composite
def kt_op_logs(draw: st.DrawFn) -> tuple[list[Op], tuple[str, str, list] | None]:
    """(log, base): a log that creates its index or opens a format-1 base with a few passages.
    A passage is 1-3 chunks (a list of outputs; one chunk sometimes as its bare outputs), so
    passages of several chunks (P > 1) are common, in the base too; searches are by passage or
    by chunk; now and then an add or update of no chunks (refused)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dense, colbert = draw(st.sampled_from(DENSE_STORES)), draw(st.sampled_from(COLBERT_STORES))
    pool: list[dict] = []

    def outputs() -> dict:
        if pool and draw(st.integers(0, 4)) == 0:  # the same vectors again: ties, ordered by row
            return pool[draw(st.integers(0, len(pool) - 1))]
        o = _kt_outputs(rng, DIM, float(10.0 ** draw(st.sampled_from([-7, -5, -2, 0, 1]))))
        pool.append(o)
        return o

    def passage() -> Any:
        n = draw(st.sampled_from([1, 1, 2, 2, 3, 3, 0] if draw(st.integers(0, 9)) == 0 else [1, 2, 2, 3, 3]))
        if n == 1 and draw(st.booleans()):
            return outputs()  # one chunk, as a mapping
        return [outputs() for _ in range(n)]

    def search(k: int, mode: str, weights: tuple[float, float, float]) -> Op:
        return ("search", k, mode, weights, outputs(), draw(st.booleans()))

    base = None
    if draw(st.booleans()):
        ids = draw(st.lists(_IDS, max_size=5, unique_by=lambda i: (type(i), i)))
        base = (dense, colbert, [(i, [outputs() for _ in range(draw(st.integers(1, 3)))]) for i in ids])
        log: list[Op] = [("open",)]
    else:
        log = [("create", DIM, dense, colbert)]
    for _ in range(draw(st.integers(1, 24))):
        kind = draw(st.sampled_from(["add", "add", "add", "update", "remove", "search", "search",
                                     "compact", "reopen", "count", "contains"]))
        if kind in ("add", "update"):
            log.append((kind, draw(_IDS), passage()))
        elif kind in ("remove", "contains"):
            log.append((kind, draw(_IDS)))
        elif kind == "search":
            mode = draw(st.sampled_from(SCORE_MODES))
            log.append(search(draw(st.integers(1, 8)), mode, draw(st.sampled_from(WEIGHT_SETS))))
        else:
            log.append((kind,))
    for mode in SCORE_MODES:  # every mode at the end, then a compaction and every mode again
        log.append(search(draw(st.sampled_from([2, 10])), mode, WEIGHT_SETS[0]))
    log += [("compact",), ("reopen",), ("count",)]
    for mode in SCORE_MODES:
        log.append(search(draw(st.sampled_from([2, 10])), mode, WEIGHT_SETS[1]))
    return log, base


def _write_base(folder: Path, base: tuple[str, str, list]) -> None:
    _fresh_index(DIM, *base).save(folder)


def _saved_files(folder: Path) -> dict[str, bytes]:
    """A format-1 folder's files but index.json (its `created` differs): ids.json and the arrays."""
    return {f.name: f.read_bytes() for f in folder.iterdir()
            if f.is_file() and f.name != INDEX_MANIFEST and not f.name.startswith(INDEX_DB)}


def _current_base(folder: Path) -> Path:
    """The folder's base: the one its database names, the folder itself when it has none."""
    if not (folder / INDEX_DB).exists():
        return folder
    con = sqlite3.connect(folder / INDEX_DB)
    try:
        name = dict(con.execute("SELECT key, value FROM meta"))["base"]
    finally:
        con.close()
    return folder / name


# ------------------------------------------------------------------ Kotlin

@pytest.fixture(scope="session")
def kotlin_ops(kit_jar: Path):
    """run(dir, log) -> (answer lines, stderr): RetrievalCheck's `ops` on the JVM with the JDBC driver."""
    if not Path(SQLITE_JDBC_JAR).is_file():  # a skip on a developer machine, a failure in CI
        reason = f"SQLite JDBC not found at {SQLITE_JDBC_JAR} (apt-get install -y libxerial-sqlite-jdbc-java)"
        if os.environ.get("EDGE_M3_REQUIRE_KOTLIN"):
            pytest.fail(reason)
        pytest.skip(reason)

    def run(folder: Path, log: Sequence[Op], user: str | None = None) -> list[str]:
        ops = folder.parent / f"{folder.name}.ops"
        ops.write_text(wire.ops(log), encoding="ascii")
        os.chmod(ops, 0o644)
        cmd = ["java", "-cp", f"{kit_jar}:{SQLITE_JDBC_JAR}", wire.KOTLIN_MAIN, "ops", str(folder), str(ops)]
        if user is not None:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return wire.answers(proc.stdout)

    return run


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(drawn=kt_op_logs())
def test_one_op_log_in_three_languages(drawn: tuple[list[Op], Any], kotlin_ops, swift_ops,
                                       tmp_path_factory) -> None:
    """One drawn op log (adds, updates, removes, compactions, reopens, searches in every mode,
    rounding ties for int8 and fp16) run by Python, the Kotlin kit and the Swift kit, each in its
    own copy of the folder: the three answer the same, line for line, score bits included, and
    equal a fresh format-1 build's; each compacted base is byte-identical to Index.save's."""
    log, base = drawn
    folder = tmp_path_factory.mktemp("kt") / "index"
    if base is not None:
        _write_base(folder, base)
    else:
        folder.mkdir()
    py_folder, sw_folder = folder.parent / "python", folder.parent / "swift"
    shutil.copytree(folder, py_folder)
    shutil.copytree(folder, sw_folder)
    got = kotlin_ops(folder, log)
    swift = swift_ops(sw_folder, log)
    want = expected_answers(log, base)
    python = wire.python_answers(py_folder, log)
    for n, (op, g, s, p, w) in enumerate(zip(log, got, swift, python, want, strict=True)):
        assert g == s == p == w, f"op {n} {op[0]}: kotlin {g!r}, swift {s!r}, python {p!r}, fresh build {w!r}"
    # The compacted base holds exactly the bytes Python's Index.save writes for the survivors.
    fresh = folder.parent / "fresh"
    stores = log[0][2:4] if log[0][0] == "create" else base[:2]
    _fresh_index(DIM, *stores, survivors(log, base)).save(fresh)
    for side in (folder, py_folder, sw_folder):
        compacted = _current_base(side)
        assert _saved_files(compacted) == _saved_files(fresh), side.name
        m, f = (json.loads((p / INDEX_MANIFEST).read_text()) for p in (compacted, fresh))
        for key in ("created", "edge_m3_version"):
            m.pop(key), f.pop(key)
        assert m == f
        # Garbage: only the current base (and the database with its WAL files) remain.
        left = sorted(p.name for p in side.iterdir() if not p.name.startswith(INDEX_DB))
        if compacted == side:  # never written: still the format-1 folder
            assert left == sorted([*_saved_files(fresh), INDEX_MANIFEST])
        else:
            assert left == [compacted.name] and compacted.name.startswith(INDEX_BASE_PREFIX)
        # Python's own reader opens the compacted base: a row per chunk, the passages once each.
        assert Index.load(compacted).passages == len(survivors(log, base))


def _one_passage(seed: int = 1) -> dict:
    return _kt_outputs(np.random.default_rng(seed), DIM, 1.0)


def _base_with_db(folder: Path, kotlin_ops, ids: Sequence[Any] = (1, 2)) -> None:
    """A format-1 base (Python) with a database on it (Kotlin's first write)."""
    _write_base(folder, ("float32", "fp16", [(i, _one_passage(n)) for n, i in enumerate(ids)]))
    assert kotlin_ops(folder, [("open",), ("add", "new", _one_passage(9))]) == ["ok", "ok"]


def test_kotlin_refusals_nothing_changed(kotlin_ops, tmp_path: Path) -> None:
    """Duplicate add, missing remove and update: their kinds, and nothing written."""
    folder = tmp_path / "i"
    _base_with_db(folder, kotlin_ops)
    q = _one_passage(5)
    log = [("open",), ("add", 1, q), ("add", "new", q), ("remove", 7), ("update", "1", q), ("count",),
           ("search", 5, "dense", WEIGHT_SETS[0], q), ("reopen",), ("count",),
           ("search", 5, "colbert", WEIGHT_SETS[0], q)]
    got = kotlin_ops(folder, log)
    assert got[:6] == ["ok", "error duplicate_id", "error duplicate_id", "error unknown_id", "error unknown_id",
                       "count 3"]
    assert got[8] == "count 3"
    alive = [(1, _one_passage(0)), (2, _one_passage(1)), ("new", _one_passage(9))]
    for line, op in ((got[6], log[6]), (got[9], log[9])):
        assert line == _hits(alive, "float32", "fp16", op)


def test_kotlin_read_only_file_searches_refuses_writes(kotlin_ops, tmp_path: Path) -> None:
    """A database file the process cannot write: searched as usual, every write refused
    (write_failed), nothing lost."""
    user = None
    if os.geteuid() == 0:  # root writes read-only files: run the kit as nobody, in a folder it can reach
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: a read-only file cannot be made")
        user = "65534"
        tmp_path = Path(tempfile.mkdtemp(prefix="edge-m3-ro-"))
        os.chmod(tmp_path, 0o777)  # the ops file is written here
    try:
        folder = tmp_path / "ro"
        _base_with_db(folder, kotlin_ops)
        db = folder / INDEX_DB
        before = db.read_bytes()
        if user is not None:
            for p in folder.rglob("*"):
                os.chmod(p, 0o755 if p.is_dir() else 0o644)
            os.chmod(folder, 0o777)  # the WAL's -shm may be created; the database file may not be written
        os.chmod(db, 0o444)
        q = _one_passage(4)
        log = [("open",), ("count",), ("search", 3, "sparse+dense", WEIGHT_SETS[0], q), ("add", 9, q),
               ("remove", 1), ("compact",), ("count",)]
        got = kotlin_ops(folder, log, user=user)
        alive = [(1, _one_passage(0)), (2, _one_passage(1)), ("new", _one_passage(9))]
        hits = _fresh_index(DIM, "float32", "fp16", alive).search(q, 3, "sparse+dense", WEIGHT_SETS[0])
        assert got == ["ok", "count 3", wire.hits_line(hits),
                       "error write_failed", "error write_failed", "error write_failed", "count 3"]
        os.chmod(db, 0o644)
        assert db.read_bytes() == before
    finally:
        if user is not None:
            shutil.rmtree(tmp_path, ignore_errors=True)


def _hits(alive: Sequence[tuple[Any, Any]], dense: str, colbert: str, op: Op) -> str:
    return wire.hits_line(_fresh_index(DIM, dense, colbert, alive).search(op[4], op[1], op[2], op[3],
                                                                          chunks=_scope(op)))


def test_kotlin_and_python_share_one_database(kotlin_ops, tmp_path: Path) -> None:
    """Python's database (over a format-1 base, with tombstones and added passages) is read and
    written by Kotlin, and Kotlin's writes read back by Python: one schema, one stored form."""
    from edge_m3.retrieval.writable import WritableIndex

    folder = tmp_path / "shared"
    base = [(i, _one_passage(10 + i)) for i in range(4)]
    _write_base(folder, ("int8", "int8", base))
    with WritableIndex.open(folder) as py:
        py.remove(1)
        py.add("p", _one_passage(20))
        py.update(3, _one_passage(21))
    alive = [(0, base[0][1]), (2, base[2][1]), ("p", _one_passage(20)), (3, _one_passage(21))]
    q = _one_passage(30)
    searches = [("search", 3, mode, WEIGHT_SETS[1], q) for mode in SCORE_MODES]
    got = kotlin_ops(folder, [("open",), ("count",), *searches, ("remove", 0), ("add", "k", _one_passage(22))])
    assert got == ["ok", "count 4", *(_hits(alive, "int8", "int8", op) for op in searches), "ok", "ok"]
    alive = alive[1:] + [("k", _one_passage(22))]
    with WritableIndex.open(folder) as py:
        assert py.ids() == [i for i, _ in alive]
        for op in searches:
            assert wire.hits_line(py.search(op[4], op[1], op[2], op[3])) == _hits(alive, "int8", "int8", op)


def test_kotlin_second_writer_waits_then_is_refused(kotlin_ops, tmp_path: Path) -> None:
    """While another connection holds the write lock, Kotlin still searches, and its write waits
    INDEX_DB_BUSY_MS, then is refused (index_busy) with nothing changed."""
    folder = tmp_path / "busy"
    _base_with_db(folder, kotlin_ops)
    hold = sqlite3.connect(folder / INDEX_DB, isolation_level=None)
    hold.execute("BEGIN IMMEDIATE")
    try:
        got = kotlin_ops(folder, [("open",), ("count",), ("add", 5, _one_passage(5)), ("count",)])
    finally:
        hold.execute("ROLLBACK")
        hold.close()
    assert got == ["ok", "count 3", "error index_busy", "count 3"]


def test_kotlin_hybrid_candidates_over_many_rows(kotlin_ops, tmp_path: Path) -> None:
    """More logical rows than HYBRID_CANDIDATES, tombstones among the base's best: the hybrid
    modes' candidates (best C by dense, union best C by sparse) are a fresh build's, in Kotlin and
    in Python, before and after compaction."""
    rng = np.random.default_rng(7)
    base = [(i, _kt_outputs(rng, DIM, 1.0)) for i in range(140)]
    folder = tmp_path / "many"
    _write_base(folder, ("int8", "int8", base))
    queries = [_kt_outputs(rng, DIM, 1.0) for _ in range(3)]
    searches = [("search", k, mode, WEIGHT_SETS[n % 3], q) for n, q in enumerate(queries)
                for mode in ("sparse+dense", "colbert+sparse+dense", "dense", "sparse") for k in (3, 120)]
    log: list[Op] = [("open",)]
    log += [("remove", i) for i in range(0, 140, 4)]
    log += [("add", f"n{i}", _kt_outputs(rng, DIM, 1.0)) for i in range(40)]
    log += [("update", i, _kt_outputs(rng, DIM, 1.0)) for i in range(1, 30, 7)]
    log += [*searches, ("compact",), ("count",), *searches]
    py_folder = tmp_path / "many-python"
    shutil.copytree(folder, py_folder)
    got = kotlin_ops(folder, log)
    want = expected_answers(log, ("int8", "int8", base))
    python = wire.python_answers(py_folder, log)
    for n, (op, g, p, w) in enumerate(zip(log, got, python, want, strict=True)):
        assert g == p == w, f"op {n} {op[0]}: kotlin {g!r}, python {p!r}, fresh build {w!r}"


@pytest.mark.parametrize("language", ["python", "kotlin", "swift"])
def test_a_compaction_collects_only_its_own_garbage(language: str, kotlin_ops, swift_ops,
                                                    tmp_path: Path) -> None:
    """A compaction deletes the replaced root base, a killed compaction's leftovers of its own
    generation and their temporaries, never a later generation (another process's compaction in
    progress, or its base just committed), in each language alike. Before, Swift deleted every
    `base-*` folder but its own and every `.base-*` temporary: a base another process had just
    committed was lost."""
    from edge_m3.retrieval.writable import WritableIndex

    folder = tmp_path / "gc"
    _base_with_db(folder, kotlin_ops)
    for leftover in ("base-1", ".base-1.building-x1", ".base-1.old-x2", "base-5", ".base-6.building-x3"):
        (folder / leftover).mkdir()
        (folder / leftover / "dense.bin").write_bytes(b"junk")
    if language == "python":
        with WritableIndex.open(folder) as ix:
            ix.compact()
            assert len(ix) == 3
    else:
        run = kotlin_ops if language == "kotlin" else swift_ops
        assert run(folder, [("open",), ("compact",), ("count",)]) == ["ok", "ok", "count 3"]
    left = sorted(p.name for p in folder.iterdir() if not p.name.startswith(INDEX_DB))
    assert left == [".base-6.building-x3", "base-1", "base-5"]
    assert (folder / "base-1" / INDEX_MANIFEST).is_file()


def test_kotlin_and_python_take_turns(kotlin_ops, tmp_path: Path) -> None:
    """Python and Kotlin take turns on one folder (a format-1 base, then its database, compactions
    by either): each reads what the other wrote, every answer a fresh build's."""
    stores = (4, "int8", "fp16")
    start = [(i, _vec(4, i)) for i in range(4)]
    folder = tmp_path / "index"
    _save_base(folder, stores, start)
    search = [("search", 6, mode, (0.4, 0.2, 0.4), _vec(4, 20)) for mode in SCORE_MODES]
    turns: list[tuple[str, list[Op]]] = [
        ("python", [("open",), ("add", 10, _vec(4, 10)), ("remove", 1)]),
        ("kotlin", [("open",), ("add", "k", _vec(4, 11)), ("remove", 0), *search, ("compact",),
                    ("add", 12, _vec(4, 12)), ("remove", 10), ("update", 2, _vec(4, 13)), *search]),
        ("python", [("open",), ("count",), *search, ("add", 13, _vec(4, 14)), ("remove", "k"), ("compact",)]),
        ("kotlin", [("open",), ("count",), *search, ("remove", 13), ("add", 14, _vec(4, 15)), ("compact",)]),
        ("python", [("open",), ("count",), *search]),
    ]
    want = expected_answers([op for _, log in turns for op in log], (*stores[1:], start), dim=stores[0])
    at = 0
    for who, log in turns:
        got = wire.python_answers(folder, log) if who == "python" else kotlin_ops(folder, log)
        assert got == want[at:at + len(log)], who
        at += len(log)


def test_extreme_ids_and_empty_colbert_survive_compactions(kotlin_ops, swift_ops, tmp_path: Path) -> None:
    """Found by the drawn logs: Swift trapped compacting a base passage with no ColBERT vectors
    (an empty colbert.bin maps no pointer), and refused its own ids.json holding -2^63
    (swift-corelibs-foundation reads it as an NSDecimalNumber). Every side answers as Python."""
    empty = {**_one_passage(2), "colbert_vecs": np.zeros((0, DIM), np.float32)}
    log: list[Op] = [("create", DIM, "float32", "fp16"), ("add", -(2**63), empty), ("compact",),
                     ("add", 2**63 - 1, _one_passage(3)), ("compact",), ("reopen",), ("count",),
                     ("search", 5, "colbert+sparse+dense", (1.0, 1.0, 1.0), _one_passage(4))]
    folders = {name: tmp_path / name for name in ("python", "kotlin", "swift")}
    for f in folders.values():
        f.mkdir()
    want = wire.python_answers(folders["python"], log)
    assert want[:7] == ["ok"] * 6 + ["count 2"] and want[7].startswith("hits 2 ")
    assert kotlin_ops(folders["kotlin"], log) == want
    assert swift_ops(folders["swift"], log) == want


def _kt_chunks(seed: int, n: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [_kt_outputs(rng, DIM, 1.0) for _ in range(n)]


def test_kotlin_chunked_passages(kotlin_ops, tmp_path: Path) -> None:
    """Passages of several chunks (docs/index-format.md, "Passages and chunks"): a format-1 base
    that repeats ids (its chunks) is written to; adds and updates of 1-4 chunks, an empty one
    refused, removes of every chunk; searches by passage (P > 1: k * P rows, the best chunk of
    each) and by chunk in every mode and k, before and after a compaction, whose ids.json repeats
    the ids. Kotlin, Python and a fresh build answer the same."""
    base = [(0, _kt_chunks(1, 3)), ("a", _kt_chunks(2, 1)), (1, _kt_chunks(3, 2))]
    folder = tmp_path / "chunks"
    _write_base(folder, ("int8", "fp16", base))
    py_folder = tmp_path / "chunks-python"
    shutil.copytree(folder, py_folder)
    q = _kt_chunks(9, 3)
    searches = [("search", k, mode, WEIGHT_SETS[n % 3], q[n % 3], scope)
                for n, mode in enumerate(SCORE_MODES) for k in (1, 2, 5) for scope in (False, True)]
    log: list[Op] = [("open",), ("count",), *searches,
                     ("add", 2, _kt_chunks(4, 4)), ("add", 3, []), ("add", 3, _kt_chunks(5, 1)),
                     ("update", 0, _kt_chunks(6, 2)), ("update", "a", []), ("remove", 1), ("count",),
                     ("contains", 1), ("contains", 2), *searches, ("compact",), ("reopen",), ("count",),
                     *searches, ("remove", 2), ("update", 3, _kt_chunks(7, 3)), *searches]
    got = kotlin_ops(folder, log)
    want = expected_answers(log, ("int8", "fp16", base))
    python = wire.python_answers(py_folder, log)
    for n, (op, g, p, w) in enumerate(zip(log, got, python, want, strict=True)):
        assert g == p == w, f"op {n} {op[0]}: kotlin {g!r}, python {p!r}, fresh build {w!r}"
    assert got[1] == "count 3" and "count 4" in got and "error invalid_input" in got
    ids = json.loads((_current_base(folder) / "ids.json").read_text(encoding="utf-8"))
    assert ids == ["a", 2, 2, 2, 2, 3, 0, 0]  # logical order, chunks consecutive


@pytest.mark.parametrize("stores", [("float32", "fp16"), ("int8", "int8"), ("int8", "none")], ids="-".join)
def test_kotlin_read_only_index_chunks(kit_jar: Path, stores: tuple[str, str], tmp_path: Path) -> None:
    """EdgeM3Index (read-only, memory-mapped) over a format-1 folder whose ids.json repeats ids
    (passages of 1-5 chunks, more rows than HYBRID_CANDIDATES, copies for ties): by passage and by
    chunk, in every mode and k, its hits (rows, chunk numbers, score bits) are Python Index's."""
    rng = np.random.default_rng(35)
    pool = [_kt_outputs(rng, DIM, 1.0) for _ in range(60)]
    rows: list[tuple[Any, dict]] = []
    for n in range(70):
        pid: Any = n if n % 3 else f"p{n}"
        rows += [(pid, pool[int(rng.integers(0, len(pool)))]) for _ in range(int(rng.integers(1, 6)))]
    folder = tmp_path / "index"
    idx = _fresh_index(DIM, *stores, [(i, [p]) for i, p in rows])
    idx.save(folder)
    index = Index.load(folder)
    assert len(index) > 150 and index.chunk_counts()[1] == 5
    queries = [_kt_outputs(rng, DIM, 1.0) for _ in range(4)] + [pool[3]]
    plan = [(k, mode, WEIGHT_SETS[n % 3]) for n, mode in enumerate(SCORE_MODES) for k in (1, 3, 40, 200)]
    (tmp_path / "q.txt").write_text(wire.queries(queries), encoding="ascii")
    (tmp_path / "plan.txt").write_text(wire.plan(plan), encoding="ascii")
    for scope in ("passages", "chunks"):
        proc = subprocess.run(["java", "-cp", str(kit_jar), wire.KOTLIN_MAIN, "search", str(folder),
                               str(tmp_path / "q.txt"), str(tmp_path / "plan.txt"), "--scope", scope],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        want = wire.scoped_answers(index, queries, plan, chunks=scope == "chunks")
        assert proc.stdout.splitlines() == want, scope
        # passages: one hit per id, some of them a later chunk; chunks: ids repeat
        hit_ids = [[h.id for h in index.search(q, 40, "dense", chunks=scope == "chunks")] for q in queries]
        assert all(len(set(h)) == len(h) for h in hit_ids) == (scope == "passages")

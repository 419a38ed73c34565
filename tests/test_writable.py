"""The writable index (issue 35): any sequence of adds, updates, removes, compactions and reopens
searches exactly as a fresh format-1 index of the surviving passages (rows and score bits); its
files survive kills, and bad input is refused with nothing lost."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_m3.errors import EdgeM3Error
from edge_m3.retrieval.index import Index
from edge_m3.retrieval.index_folder import BundleIdentity, CorruptIndexError
from edge_m3.retrieval.writable import WritableIndex, WriteRefused, open_index
from edge_m3.spec import INDEX_BASE_PREFIX, INDEX_DB, INDEX_DB_VERSION, INDEX_MANIFEST, SCORE_MODES
from tools.bench.writable_kills import DIM, check_prefix, fresh, kill_loop, passage
from tools.kit.retrieval_wire import hits_line, python_answers

STORES = [("float32", "fp16"), ("int8", "int8"), ("float32", "none"), ("int8", "fp16")]


def expected(log: list[tuple[Any, ...]], dense: str, colbert: str) -> list[str]:
    """The answers a fresh format-1 build of the survivors gives (and the refusals the spec names)."""
    live: dict[Any, dict[str, Any]] = {}
    out = []
    for op in log:
        name = op[0]
        if name == "add":
            if op[1] in live:
                out.append("error duplicate_id")
                continue
            live[op[1]] = op[2]
        elif name == "update":
            if op[1] not in live:
                out.append("error unknown_id")
                continue
            del live[op[1]]
            live[op[1]] = op[2]
        elif name == "remove":
            if op[1] not in live:
                out.append("error unknown_id")
                continue
            del live[op[1]]
        elif name == "count":
            out.append(f"count {len(live)}")
            continue
        elif name == "contains":
            out.append(f"contains {'true' if op[1] in live else 'false'}")
            continue
        elif name == "search":
            if "colbert" in op[2] and colbert == "none":
                out.append("error invalid_input")
                continue
            out.append(hits_line(by_definition(fresh(live, dense, colbert), op)))
            continue
        out.append("ok")
    return out


def by_definition(idx: Index, op: tuple[Any, ...]) -> list[Any]:
    """A search's hits by docs/index-format.md's words, on a fresh build: the row search with
    k * P (P the most chunks of a passage), then each id's first hit, the first k of them."""
    rows = idx.search(op[4], op[1], op[2], op[3], chunks=True)
    if len(op) > 5 and op[5]:
        return rows
    most = max(Counter(idx.ids).values(), default=1)
    seen: set[Any] = set()
    out = []
    for h in idx.search(op[4], op[1] * most, op[2], op[3], chunks=True):
        if h.id not in seen:
            seen.add(h.id)
            out.append(h)
    return out[:op[1]]


ids = st.one_of(st.integers(-3, 12), st.sampled_from(["a", "b", "1", "", "é", "文"]))
seeds = st.one_of(st.integers(0, 10**6), st.lists(st.integers(0, 10**6), min_size=1, max_size=3))
weights = st.sampled_from([(1.0, 1.0, 1.0), (0.4, 0.2, 0.4), (1.0, 0.0, 0.5)])
op = st.one_of(
    st.tuples(st.just("add"), ids, seeds),
    st.tuples(st.just("update"), ids, seeds),
    st.tuples(st.just("remove"), ids),
    st.tuples(st.just("search"), st.integers(1, 12), st.sampled_from(SCORE_MODES), weights,
              st.integers(0, 10**6), st.booleans()),
    st.just(("compact",)), st.just(("reopen",)), st.just(("count",)), st.tuples(st.just("contains"), ids),
)


def materialize(raw: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Seeds made into outputs (Hypothesis shrinks the seeds, not the arrays); a list of seeds is
    a passage of that many chunks."""
    out = []
    for o in raw:
        if o[0] in ("add", "update"):
            out.append((o[0], o[1], passage(o[2]) if isinstance(o[2], int) else [passage(x) for x in o[2]]))
        elif o[0] == "search":
            out.append(("search", o[1], o[2], o[3], passage(o[4] + 7), o[5]))
        else:
            out.append(o)
    return out


def base_folder(tmp: Path, n: int, dense: str, colbert: str, bundle: BundleIdentity | None = None) -> Path:
    """A bulk-built format-1 index of n passages with ids "p0".."p{n-1}"."""
    idx = Index(DIM, dense, colbert, bundle)
    idx.add([passage(10_000 + i) for i in range(n)], [f"p{i}" for i in range(n)])
    return idx.save(tmp)


@pytest.mark.parametrize(("dense", "colbert"), STORES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.lists(op, min_size=1, max_size=30), on_base=st.booleans())
def test_any_op_log_searches_as_a_fresh_build(dense: str, colbert: str, raw: list, on_base: bool,
                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    """Python's answers to a generated op log equal a fresh build's after every operation; the
    same op log drives the kits (tests/test_kit_writable.py)."""
    folder = tmp_path_factory.mktemp("w")
    log = materialize(raw)
    if on_base:
        base_folder(folder, 5, dense, colbert)
        pre = [("remove", "p1"), ("add", "p1", passage(10_001))]  # p1 moves to the end
        start: list[tuple[Any, ...]] = [("open",)]
        seed = {f"p{i}": passage(10_000 + i) for i in range(5)}
    else:
        pre, start, seed = [], [("create", DIM, dense, colbert)], {}
    got = python_answers(folder, start + pre + log)
    want_log = [("add", k, v) for k, v in seed.items()] + pre + log
    want = expected(want_log, dense, colbert)[len(seed):]
    assert got[1:] == want
    assert got[0] == "ok"


@pytest.mark.parametrize(("dense", "colbert"), STORES[:2])
def test_compaction_writes_a_fresh_builds_arrays(dense: str, colbert: str, tmp_path: Path) -> None:
    """After removes, updates and adds over a base, compact() writes arrays byte-identical to a
    fresh build of the survivors, and deletes the old base."""
    folder = base_folder(tmp_path / "ix", 40, dense, colbert)
    w = WritableIndex.open(folder)
    live = {f"p{i}": passage(10_000 + i) for i in range(40)}
    for i in range(0, 40, 3):
        w.remove(f"p{i}")
        del live[f"p{i}"]
    for i in (1, 5):
        w.update(f"p{i}", passage(i))
        del live[f"p{i}"]
        live[f"p{i}"] = passage(i)
    for i in range(7):
        w.add(i, passage(500 + i))
        live[i] = passage(500 + i)
    w.compact()
    assert w.base_name == f"{INDEX_BASE_PREFIX}1" and not (folder / INDEX_MANIFEST).exists()
    assert not (folder / "dense.bin").exists()
    f = fresh(live, dense, colbert)
    for name, arr in f.arrays.items():
        assert np.asarray(w.base.arrays[name]).tobytes() == np.ascontiguousarray(arr).tobytes(), name
    assert w.base.ids == list(live)
    w.close()
    again = WritableIndex.open(folder)
    assert again.ids() == list(live) and len(again) == len(live)
    q = passage(99)
    for mode in SCORE_MODES:
        assert again.search(q, 10, mode) == f.search(q, 10, mode)


def test_refusals_change_nothing(tmp_path: Path) -> None:
    """Duplicate adds, unknown ids, bad ids and bad outputs are refused with the kits' kinds and
    leave the index as it was (in memory and on disk)."""
    w = WritableIndex.create(tmp_path / "ix", DIM, "float32", "fp16")
    w.add_many([(1, passage(1)), ("1", passage(2))])
    for call, kind in [(lambda: w.add(1, passage(3)), "duplicate_id"),
                       (lambda: w.add_many([(5, passage(3)), (5, passage(4))]), "duplicate_id"),
                       (lambda: w.add_many([(6, passage(3)), (1, passage(4))]), "duplicate_id"),
                       (lambda: w.remove(2), "unknown_id"),
                       (lambda: w.update("x", passage(3)), "unknown_id")]:
        with pytest.raises(WriteRefused) as err:
            call()
        assert err.value.kind == kind
    for bad in [lambda: w.add(True, passage(3)), lambda: w.add(1 << 64, passage(3)),
                lambda: w.add(7, {"dense_vecs": np.zeros(3)}), lambda: w.add(8, "a text, with no embedder"),
                lambda: w.add(9, {**passage(3), "dense_vecs": np.full(DIM, np.nan, np.float32)})]:
        with pytest.raises(EdgeM3Error):
            bad()
    assert w.ids() == [1, "1"]
    w.close()
    assert WritableIndex.open(tmp_path / "ix").ids() == [1, "1"]


def test_text_passages_go_through_the_embedder(tmp_path: Path) -> None:
    """add(id, text) embeds with the index's embedder, once per batch."""
    calls = []

    def embed(texts: list[str]) -> list[dict[str, Any]]:
        calls.append(list(texts))
        return [passage(len(t)) for t in texts]

    w = WritableIndex.create(tmp_path / "ix", DIM, "int8", "int8", embed=embed)
    w.add_many([("a", "one"), ("b", passage(5)), ("c", "three")])
    assert calls == [["one", "three"]]
    assert w.search(passage(3), 1)[0].id == "a"


def _db(folder: Path) -> sqlite3.Connection:
    return sqlite3.connect(folder / INDEX_DB, isolation_level=None)


@pytest.mark.parametrize("case", ["newer", "older", "foreign", "other_base", "garbage", "blob", "meta",
                                  "removed_row", "chunk_order", "chunk_twice"])
def test_bad_databases_are_refused(case: str, tmp_path: Path) -> None:
    """A database from a newer or older edge-m3, another program, another base, a corrupt file,
    a malformed row or chunks out of order: one line, never a crash."""
    folder = base_folder(tmp_path / "ix", 6, "float32", "fp16")
    w = WritableIndex.open(folder)
    w.add("x", passage(1))
    w.close()
    db = _db(folder)
    if case == "newer":
        db.execute("UPDATE meta SET value = ? WHERE key = 'format_version'", (str(INDEX_DB_VERSION + 1),))
    elif case == "older":
        db.execute("UPDATE meta SET value = '1' WHERE key = 'format_version'")
    elif case == "chunk_order":
        db.execute("UPDATE passages SET chunk = 1")
    elif case == "chunk_twice":  # a second passage row "x" 0 after another id's row
        cols = "dense, dense_scale, lex_tokens, lex_weights, colbert, colbert_scale"
        db.execute(f"INSERT INTO passages (id, chunk, {cols}) SELECT 'y', 0, {cols} FROM passages")
        db.execute(f"INSERT INTO passages (id, chunk, {cols}) SELECT 'x', 1, {cols} FROM passages "
                   "WHERE id = 'x'")
    elif case == "foreign":
        db.execute("PRAGMA application_id = 7")
    elif case == "other_base":
        db.execute("UPDATE meta SET value = ? WHERE key = 'base_sha256'", ("0" * 64,))
    elif case == "blob":
        db.execute("UPDATE passages SET dense = x'00'")
    elif case == "meta":
        db.execute("DELETE FROM meta WHERE key = 'dim'")
    elif case == "removed_row":
        db.execute("INSERT INTO removed VALUES (999)")
    db.close()
    if case == "garbage":
        (folder / INDEX_DB).write_bytes(b"SQLite format 3\x00" + os.urandom(3000))
        for extra in ("-wal", "-shm"):
            Path(f"{folder / INDEX_DB}{extra}").unlink(missing_ok=True)
    with pytest.raises(CorruptIndexError) as err:
        WritableIndex.open(folder)
    assert "\n" not in str(err.value) and str(folder) in str(err.value) and err.value.kind == "corrupt_index"
    if case in ("newer", "older"):
        assert case in str(err.value)


def test_another_bundles_database_is_refused(tmp_path: Path) -> None:
    """A database whose bundle differs from its base's (copied from another index) is refused."""
    one = BundleIdentity("m.tflite", "a" * 64, "t.model", "b" * 64)
    two = BundleIdentity("m.tflite", "c" * 64, "t.model", "b" * 64)
    a = base_folder(tmp_path / "a", 3, "float32", "fp16", one)
    w = WritableIndex.open(a)
    w.add("x", passage(1))
    w.close()
    db = _db(a)
    db.execute("UPDATE meta SET value = ? WHERE key = 'bundle'", (json.dumps(two.to_json()),))
    db.close()
    with pytest.raises(EdgeM3Error, match="another bundle"):
        WritableIndex.open(a)


def test_read_only_index_searches_and_refuses_writes(tmp_path: Path) -> None:
    """On a read-only filesystem (root: a tmpfs remounted read-only; else read-only modes) the
    index opens and searches, and a write is refused with write_failed."""
    root = os.geteuid() == 0
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if root and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)],
                               capture_output=True).returncode != 0:
        pytest.fail("root but cannot mount a tmpfs")
    folder = base_folder(mnt / "ix", 4, "float32", "fp16")
    try:
        w = WritableIndex.open(folder)
        w.add("x", passage(1))
        w.close()
        if root:
            subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        else:
            for p in folder.iterdir():
                p.chmod(0o444)
            folder.chmod(0o555)
        r = WritableIndex.open(folder)
        assert len(r) == 5 and r.search(passage(1), 1)[0].id == "x"
        for write in (lambda: r.add("y", passage(2)), lambda: r.remove("x"), r.compact):
            with pytest.raises(WriteRefused) as err:
                write()
            assert err.value.kind == "write_failed"
        assert r.ids() == ["p0", "p1", "p2", "p3", "x"]
        r.close()
    finally:
        if root:
            subprocess.run(["umount", "-l", str(mnt)], check=False)
        else:
            folder.chmod(0o755)


def test_second_writer_waits_then_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While one connection holds the write lock, another's write waits INDEX_DB_BUSY_MS and is
    refused (index_busy) with nothing changed; once released, it sees the first one's commit."""
    import edge_m3.retrieval.store as wmod

    folder = tmp_path / "ix"
    a = WritableIndex.create(folder, DIM, "float32", "fp16")
    monkeypatch.setattr(wmod, "INDEX_DB_BUSY_MS", 200)
    b = WritableIndex.open(folder)
    b.db.execute("PRAGMA busy_timeout = 200")
    a.add(1, passage(1))
    hold = _db(folder)
    hold.execute("BEGIN IMMEDIATE")
    with pytest.raises(WriteRefused) as err:
        b.add(2, passage(2))
    assert err.value.kind == "index_busy"
    hold.execute("ROLLBACK")
    hold.close()
    assert b.ids() == [1]  # a's commit, seen through data_version
    b.add(2, passage(2))
    assert a.ids() == [1, 2]


def test_search_command_reads_a_writable_index(tmp_path: Path) -> None:
    """open_index picks the writable index when the folder has a database."""
    folder = base_folder(tmp_path / "ix", 3, "float32", "fp16")
    assert isinstance(open_index(folder), Index)
    w = WritableIndex.open(folder)
    w.remove("p0")
    assert isinstance(open_index(folder), WritableIndex)
    assert open_index(folder).ids() == ["p1", "p2"]


# --------------------------------------------------------------------------- kills

def test_sigkill_at_random_points_keeps_exactly_the_commits(tmp_path: Path) -> None:
    """A child adding passages in transactions (with removes and compactions) is SIGKILLed at
    random moments; each time the index opens, holds a committed prefix, searches as a fresh
    build of it. (tools/bench/writable_kills.py runs the issue's 10,000 passages x 50 kills.)"""
    folder = tmp_path / "ix"
    landed, _ = kill_loop(folder, 3000, 10, 8, seed=1)
    assert landed == 8
    check_prefix(folder, 3000, 10)


def test_full_disk_loses_nothing(tmp_path: Path) -> None:
    """On a full filesystem (a small tmpfs) a write or a compaction fails with write_failed, and
    the index still holds every earlier commit."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        w = WritableIndex.create(mnt / "ix", DIM, "float32", "fp16")
        committed = []
        with pytest.raises(WriteRefused) as err:
            for i in range(0, 10_000, 20):
                w.add_many([(j, passage(j)) for j in range(i, i + 20)])
                committed += list(range(i, i + 20))
        assert err.value.kind == "write_failed"
        assert w.ids() == committed
        w.close()
        again = WritableIndex.open(mnt / "ix")
        assert again.ids() == committed
        with pytest.raises(WriteRefused):
            again.compact()
        assert again.ids() == committed
        again.close()
        assert WritableIndex.open(mnt / "ix").ids() == committed
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


# --------------------------------------------------------------------------- the commands


@pytest.mark.models
def test_add_remove_compact_commands(tiny_bundles: dict[str, Path], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str],
                                     request: pytest.FixtureRequest) -> None:
    """`edge-m3 add` (an existing id updated), `remove`, `compact` on a bulk-built folder, and
    `search` reads the result: the hits of a fresh `edge-m3 index` of the same passages. The
    collector is off: each command must release the database itself (SQLite removes -wal and
    -shm when the last connection closes), not leave it to whenever the GC runs."""
    import gc

    from edge_m3.cli import main

    gc.collect()
    gc.disable()
    request.addfinalizer(gc.enable)
    bundle = tiny_bundles["int8"]
    first = [{"id": "a", "text": "the cat sat on the mat"}, {"id": "b", "text": "dogs bark at night"},
             {"id": "c", "text": "rain in spain"}]
    more = [{"id": "b", "text": "a dog and a cat"}, {"id": "d", "text": "sun over the sea"},
            {"id": "e", "text": "seven"}]
    (tmp_path / "first.jsonl").write_text("".join(json.dumps(r) + "\n" for r in first), encoding="utf-8")
    (tmp_path / "more.jsonl").write_text("".join(json.dumps(r) + "\n" for r in more), encoding="utf-8")
    (tmp_path / "ids.txt").write_text('a\n"e"\n', encoding="utf-8")
    queries = tmp_path / "q.txt"
    queries.write_text("cat on a mat\nbarking dogs\n", encoding="utf-8")
    ix = tmp_path / "ix"
    assert main(["index", str(bundle), str(tmp_path / "first.jsonl"), "--out", str(ix), "-q"]) == 0
    assert main(["add", str(ix), str(tmp_path / "more.jsonl"), "-q"]) == 0
    assert "(2 new); 5 in" in capsys.readouterr().err
    with WritableIndex.open(ix) as opened:
        assert opened.ids() == ["a", "c", "b", "d", "e"]
    assert main(["remove", str(ix), str(tmp_path / "ids.txt")]) == 0
    (tmp_path / "missing.txt").write_text('"zz"\nc\n', encoding="utf-8")
    assert main(["remove", str(ix), str(tmp_path / "missing.txt")]) == 2
    err = capsys.readouterr().err
    assert "'zz' is not in the index; nothing was removed" in err and "Traceback" not in err
    survivors = [{"id": "c", "text": "rain in spain"}, {"id": "b", "text": "a dog and a cat"},
                 {"id": "d", "text": "sun over the sea"}]
    (tmp_path / "fresh.jsonl").write_text("".join(json.dumps(r) + "\n" for r in survivors), encoding="utf-8")
    assert main(["index", str(bundle), str(tmp_path / "fresh.jsonl"), "--out", str(tmp_path / "fresh"),
                 "-q"]) == 0
    for step in ("before", "after"):
        for mode in ("sparse", "colbert+sparse+dense"):
            capsys.readouterr()
            assert main(["search", str(ix), "--queries", str(queries), "--mode", mode]) == 0
            got = capsys.readouterr().out
            assert main(["search", str(tmp_path / "fresh"), "--queries", str(queries), "--mode", mode]) == 0
            assert got == capsys.readouterr().out, (step, mode)
        if step == "before":
            assert main(["compact", str(ix)]) == 0
    assert sorted(p.name for p in ix.iterdir()) == [f"{INDEX_BASE_PREFIX}1", INDEX_DB]
    assert main(["compact", str(tmp_path / "nothing")]) == 2
    assert main(["add", str(ix), str(tmp_path / "nope.jsonl")]) == 2


def test_create_refuses_a_width_outside_the_contract(tmp_path: Path) -> None:
    """dim 1 to INDEX_MAX_DIM, as every reader holds index.json and the database to (the kits'
    create refuses the same; RefusalCheck.kt, EdgeM3RefusalTests.swift)."""
    from edge_m3.errors import OptionError
    from edge_m3.spec import INDEX_MAX_DIM

    for dim in (0, INDEX_MAX_DIM + 1):
        with pytest.raises(OptionError, match=f"must be an integer from 1 to {INDEX_MAX_DIM}"):
            WritableIndex.create(tmp_path / str(dim), dim)
    WritableIndex.create(tmp_path / "max", INDEX_MAX_DIM).close()

"""The kits' writable index (EdgeM3WritableIndex, issue 35) against Python's, bit for bit.

Each kit runs an op log (tools/kit/retrieval_wire.py, "op log") on a folder of its own and
answers one line per operation; the answers must equal the reference's line for line: hits,
logical rows, ids and float64 score bits, counts, and the typed error kinds.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_m3.contract import COLBERT_VECS, DENSE_VECS, INDEX_DB, LEXICAL_WEIGHTS, SCORE_MODES
from edge_m3.errors import EdgeM3Error
from edge_m3.retrieval.index import BundleIdentity, Index
from tools.kit import retrieval_wire as wire

Op = tuple[Any, ...]


# ------------------------------------------------------------------ the reference: fresh builds
def fresh_answers(
    log: Sequence[Op], start: Sequence[tuple[Any, dict]] = (), stores: tuple[int, str, str] | None = None
) -> list[str]:
    """The answers the op log must give, from the spec alone: the surviving passages in logical
    order, and every search answered by a format-1 Index built fresh from them (`start`: the
    passages of a format-1 base the log opens, `stores` its dim, dense and colbert)."""
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
            idx.add([p for _, p in live], [q for q, _ in live])
            try:
                hits = idx.search(op[4], op[1], op[2], op[3])
            except EdgeM3Error:
                out.append("error invalid_input")
                continue
            out.append(
                f"hits {len(hits)}"
                + "".join(f" {h.row} {wire.id_token(h.id)} {wire.h64(h.score)}" for h in hits)
            )
        else:
            raise AssertionError(name)
    return out


# ------------------------------------------------------------------ drawn op logs
def _outputs(draw: st.DrawFn, dim: int, query: bool = False) -> dict[str, Any]:
    """Pipeline outputs: a unit dense vector, lexical weights over a small vocabulary (so rows
    share tokens), unit ColBERT vectors; values on a coarse grid, so ties happen."""

    def unit(n: int) -> np.ndarray:
        x = np.array(
            draw(st.lists(st.integers(-4, 4), min_size=n * dim, max_size=n * dim)), np.float32
        ).reshape(n, dim)
        x[np.all(x == 0, axis=1), 0] = 1
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    tokens = draw(st.lists(st.integers(0, 24), max_size=5, unique=True))
    lex = {str(t): float(np.float32(draw(st.integers(1, 40)) / 16)) for t in tokens}
    return {DENSE_VECS: unit(1)[0], LEXICAL_WEIGHTS: lex, COLBERT_VECS: unit(draw(st.integers(1, 3)))}


IDS = st.one_of(st.integers(-3, 12), st.sampled_from(["", "1", "a", "é", "日本", "x y", "7"]))


@st.composite
def op_logs(draw: st.DrawFn) -> tuple[list[Op], list[tuple[Any, dict]], tuple[int, str, str]]:
    """(log, base passages, stores): a log that starts with `create` or with `open` on a
    format-1 base of `base passages`, then adds, updates, removes, compactions, reopens and
    searches in every mode."""
    dim = draw(st.integers(2, 6))
    stores = (dim, draw(st.sampled_from(["float32", "int8"])), draw(st.sampled_from(["fp16", "int8", "none"])))
    base: list[tuple[Any, dict]] = []
    if draw(st.booleans()):
        for pid in draw(st.lists(IDS, max_size=6, unique_by=lambda x: (type(x), x))):
            base.append((pid, _outputs(draw, dim)))
        log: list[Op] = [("open",)]
    else:
        log = [("create", *stores)]
    known = [pid for pid, _ in base]
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(
            st.sampled_from(
                [
                    "add",
                    "add",
                    "add",
                    "update",
                    "remove",
                    "search",
                    "search",
                    "compact",
                    "reopen",
                    "count",
                    "contains",
                ]
            )
        )
        pid = draw(st.sampled_from(known)) if known and draw(st.booleans()) else draw(IDS)
        if kind in ("add", "update"):
            log.append((kind, pid, _outputs(draw, dim)))
            known.append(pid)
        elif kind in ("remove", "contains"):
            log.append((kind, pid))
        elif kind == "search":
            weights = draw(st.sampled_from([(1.0, 1.0, 1.0), (0.4, 0.2, 0.4), (1.0, 0.0, 0.3)]))
            log.append(
                (
                    "search",
                    draw(st.integers(1, 8)),
                    draw(st.sampled_from(SCORE_MODES)),
                    weights,
                    _outputs(draw, dim, query=True),
                )
            )
        else:
            log.append((kind,))
    return log, base, stores


def _save_base(
    folder: Path,
    stores: tuple[int, str, str],
    base: Sequence[tuple[Any, dict]],
    bundle: BundleIdentity | None = None,
) -> None:
    idx = Index(*stores, bundle=bundle)
    idx.add([p for _, p in base], [q for q, _ in base])
    idx.save(folder)


def _fresh(log: list[Op], base: list[tuple[Any, dict]], stores: tuple[int, str, str]) -> list[str]:
    """fresh_answers of a drawn log: an `open` starts from its base's passages and stores."""
    return fresh_answers(log, base, stores)


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


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(case=op_logs())
def test_swift_op_log_equals_fresh_builds(
    swift_ops, tmp_path_factory: pytest.TempPathFactory, case: tuple[list[Op], list, tuple]
) -> None:
    """Hypothesis-drawn op logs (int8/float32 dense, fp16/int8/none ColBERT, integer and string
    ids, a format-1 base or none): every answer of the Swift kit equals a fresh build's."""
    log, base, stores = case
    folder = tmp_path_factory.mktemp("swift-ops") / "index"
    if log[0][0] == "open":
        _save_base(folder, stores, base)
    py_folder = folder.parent / "python"
    if log[0][0] == "open":
        _save_base(py_folder, stores, base)
    python = wire.python_answers(py_folder, log)
    got = swift_ops(folder, log)
    want = _fresh(log, base, stores)
    assert python == want  # the reference itself, against the spec
    assert got == want, "\n".join(
        f"{op[0]}: {g} != {w}" for op, g, w in zip(log, got, want, strict=True) if g != w
    )


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


def _meta(db: Path, **values: str) -> None:
    con = sqlite3.connect(db)
    with con:
        for k, v in values.items():
            con.execute("UPDATE meta SET value = ? WHERE key = ?", (v, k))
    con.close()


def test_swift_refuses_foreign_databases(swift_ops, tmp_path: Path) -> None:
    """A database of another base or bundle, a newer format_version or user_version, another
    program's SQLite file, a corrupt or truncated file: `open` fails with invalid_input, one line."""
    v = _vec(4, 7)
    good = tmp_path / "good"
    _save_base(good, (4, "float32", "fp16"), [(i, _vec(4, i)) for i in range(3)], BUNDLE)
    assert swift_ops(good, [("open",), ("add", 10, v), ("remove", 1), ("count",)]) == [
        "ok",
        "ok",
        "ok",
        "count 3",
    ]
    assert (good / INDEX_DB).is_file()

    def case(name: str, spoil) -> list[str]:
        folder = tmp_path / name
        shutil.copytree(good, folder)
        spoil(folder)
        return swift_ops(folder, [("open",), ("count",), ("add", 11, v)])

    refused = ["error invalid_input"] * 3

    def other_base(f: Path) -> None:
        shutil.rmtree(f)
        _save_base(f, (4, "float32", "fp16"), [(i, _vec(4, i + 1)) for i in range(3)], BUNDLE)
        shutil.copy(good / INDEX_DB, f / INDEX_DB)

    assert case("other-base", other_base) == refused
    other = json.dumps({**BUNDLE.to_json(), "model_sha256": "c" * 64})
    assert case("other-bundle", lambda f: _meta(f / INDEX_DB, bundle=other)) == refused
    assert case("newer", lambda f: _meta(f / INDEX_DB, format_version="2")) == refused

    def user_version(f: Path) -> None:
        con = sqlite3.connect(f / INDEX_DB)
        con.execute("PRAGMA user_version = 2")
        con.close()

    assert case("newer-user-version", user_version) == refused

    def foreign(f: Path) -> None:
        (f / INDEX_DB).unlink()
        con = sqlite3.connect(f / INDEX_DB)
        con.execute("CREATE TABLE meta (key TEXT, value TEXT)")
        con.commit()
        con.close()

    assert case("foreign", foreign) == refused
    assert case("garbage", lambda f: (f / INDEX_DB).write_bytes(b"not a database at all " * 300)) == refused
    assert (
        case("truncated", lambda f: (f / INDEX_DB).write_bytes((good / INDEX_DB).read_bytes()[:1500]))
        == refused
    )

    def bad_blob(f: Path) -> None:
        con = sqlite3.connect(f / INDEX_DB)
        with con:
            con.execute("UPDATE passages SET dense = X'00'")
        con.close()

    assert case("bad-blob", bad_blob) == refused
    # the good one is untouched by all of that
    assert swift_ops(good, [("open",), ("count",), ("contains", 10), ("contains", 1)]) == [
        "ok",
        "count 3",
        "contains true",
        "contains false",
    ]


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

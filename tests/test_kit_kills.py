"""The kits' writable index under real kills (issue 35 item 4, in Kotlin and Swift).

Each kit's op-log runner (tools/kit/retrieval_wire.py, `ops`) adds passages 0, 1, 2, ... (one
to three chunks each, one transaction per passage) and compacts every COMPACT_EVERY adds, on
Android's code path over the desktop JDBC SQLite driver and on Apple's over libsqlite3; it is
SIGKILLed at a random moment after its database exists. Python then opens the folder: it must
hold exactly passages 0..m-1 for some m, every one with all its chunks, and search as a fresh
format-1 build of them; the kit then resumes from m and is killed again. The long version of the
same loop for Python itself is tools/bench/writable_kills.py.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from edge_m3.retrieval.writable import WritableIndex
from edge_m3.spec import INDEX_DB, SCORE_MODES
from tests.test_kit_writable import SQLITE_JDBC_JAR
from tools.bench.writable_kills import DIM, fresh, passage
from tools.kit import retrieval_wire as wire

PASSAGES = 600
COMPACT_EVERY = 100
KILLS = 5


def chunks_of(i: int) -> list[dict[str, Any]]:
    """Passage i: 1 to 3 chunks, each pipeline-like outputs from its own seed."""
    return [passage(1000 * i + c) for c in range(1 + i % 3)]


def writes(start: int) -> list[tuple[Any, ...]]:
    """Passages start.. as one op each, a compaction every COMPACT_EVERY."""
    log: list[tuple[Any, ...]] = [("open",) if start else ("create", DIM, "int8", "fp16")]
    for i in range(start, PASSAGES):
        log.append(("add", i, chunks_of(i)))
        if (i + 1) % COMPACT_EVERY == 0:
            log.append(("compact",))
    return log


def check_prefix(folder: Path) -> int:
    """The number of passages the killed kit committed, after checking they are exactly a prefix
    (all chunks each) and search as a fresh build of it."""
    w = WritableIndex.open(folder)
    got = w.ids()
    m = len(got)
    assert got == list(range(m)), f"not a committed prefix: {got[:5]}...{got[-5:]}"
    survivors = {i: chunks_of(i) for i in range(m)}
    assert w.rows == sum(len(c) for c in survivors.values())
    ref = fresh(survivors, "int8", "fp16")
    q = passage(424242)
    for mode in SCORE_MODES:
        for chunks in (False, True):
            a = [(h.id, h.chunk, h.score) for h in w.search(q, 7, mode, chunks=chunks)]
            b = [(h.id, h.chunk, h.score) for h in ref.search(q, 7, mode, chunks=chunks)]
            assert a == b, (mode, chunks)
    w.close()
    return m


class _Watch:
    """Rows ever inserted into the passages table (None before the database is readable), read
    through one read-only connection."""

    def __init__(self, folder: Path) -> None:
        self.db, self.con = folder / INDEX_DB, None

    def inserted(self) -> int | None:
        if self.con is None:
            if not self.db.exists():
                return None
            try:
                self.con = sqlite3.connect(f"{self.db.as_uri()}?mode=ro", uri=True, timeout=0.05)
            except sqlite3.Error:
                return None
        try:
            row = self.con.execute("SELECT seq FROM sqlite_sequence WHERE name = 'passages'").fetchone()
        except sqlite3.Error:
            return None
        return int(row[0]) if row else 0

    def close(self) -> None:
        if self.con is not None:
            self.con.close()


def kill_loop(cmd: list[str], folder: Path, tmp: Path, seed: int) -> tuple[int, int]:
    """KILLS kills of the kit writing `folder`, each at a random moment after its database
    exists; returns (kills that landed before the writer finished, passages at the end)."""
    rng = random.Random(seed)
    landed, m = 0, 0
    for k in range(KILLS + 1):
        ops = tmp / f"kill{k}.ops"
        ops.write_text(wire.ops(writes(m)), encoding="ascii")
        proc = subprocess.Popen([*cmd, "ops", str(folder), str(ops)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        if k < KILLS:
            # the kill point: a random number of rows inserted (the AUTOINCREMENT counter, which
            # compactions do not reset), watched through a read-only connection
            rows_left = sum(len(chunks_of(i)) for i in range(m, PASSAGES))
            target = rng.randint(1, rows_left)
            deadline = time.monotonic() + 120
            start = None
            watch = _Watch(folder)
            while proc.poll() is None and time.monotonic() < deadline:
                seq = watch.inserted()
                start = seq if start is None and seq is not None else start
                if start is not None and seq is not None and seq - start >= target:
                    break
                time.sleep(0.0005)
            watch.close()
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                landed += 1
        _, err = proc.communicate(timeout=300)
        if k == KILLS or proc.returncode != -signal.SIGKILL:
            assert proc.returncode == 0, err.decode()[-2000:]
        m = check_prefix(folder)
        if m == PASSAGES:
            break
    assert m == PASSAGES  # the last run was not killed: it finished the log
    return landed, m


def test_kotlin_kit_killed_mid_write(kit_jar: Path, tmp_path: Path) -> None:
    if not Path(SQLITE_JDBC_JAR).is_file():
        reason = f"SQLite JDBC not found at {SQLITE_JDBC_JAR} (apt-get install -y libxerial-sqlite-jdbc-java)"
        if os.environ.get("EDGE_M3_REQUIRE_KOTLIN"):
            pytest.fail(reason)
        pytest.skip(reason)
    cmd = ["java", "-cp", f"{kit_jar}:{SQLITE_JDBC_JAR}", wire.KOTLIN_MAIN]
    landed, _ = kill_loop(cmd, tmp_path / "ix", tmp_path, seed=1)
    assert landed >= 1  # at least one kill hit a running writer


def test_swift_kit_killed_mid_write(swift_build: Path, tmp_path: Path) -> None:
    cmd = [str(swift_build / "release" / wire.SWIFT_PRODUCT)]
    landed, _ = kill_loop(cmd, tmp_path / "ix", tmp_path, seed=2)
    assert landed >= 1

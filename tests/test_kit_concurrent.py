"""Three processes write one writable index at once: Python, the Kotlin kit and the Swift kit.

An app and its extension, or two workers on a rig, share one index folder; SQLite's writer lock
serialises their transactions, and each process must see the others' commits (passages added,
removed, replaced; a base another process compacted) before it writes or searches. Each writer
here adds its own passages, replaces and removes some, searches and compacts now and then, all
three at once; every operation must succeed, and at the end the folder must hold exactly the
passages the three logs leave and search as a fresh format-1 build of them, in each language.
And a reader in each language beside a writer that churns and compacts sees one committed state
at every call (tools/bench/writable_readers.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from edge_m3.retrieval.writable import WritableIndex
from edge_m3.spec import INDEX_BASE_PREFIX, SCORE_MODES
from tests.test_kit_kills import chunks_of
from tools.bench import writable_readers as readers
from tools.bench.writable_kills import DIM, fresh, passage
from tools.kit import retrieval_wire as wire

ROOT = Path(__file__).resolve().parents[1]
WRITERS = ("python", "kotlin", "swift")
PASSAGES = 150  # per writer
COMPACT_EVERY = 20
QUERY = passage(424242)


def writer_log(k: int) -> list[tuple[Any, ...]]:
    """Writer k's operations on its own ids (k * 10_000 + i): adds, a replace every 11th, a
    remove every 7th, a search every 9th and a compaction every COMPACT_EVERY."""
    log: list[tuple[Any, ...]] = [("open",)]
    for i in range(PASSAGES):
        pid = k * 10_000 + i
        log.append(("add", pid, chunks_of(pid)))
        if i % 11 == 10:
            log.append(("update", pid - 1, chunks_of(pid + 5_000)))
        if i % 7 == 6:
            log.append(("remove", pid - 3))
        if i % 9 == 8:
            log.append(("search", 5, SCORE_MODES[i % len(SCORE_MODES)], (1.0, 1.0, 1.0), QUERY))
        if i % COMPACT_EVERY == COMPACT_EVERY - 1:
            log.append(("compact",))
    return log


def survivors(k: int) -> dict[int, list[dict[str, Any]]]:
    """What writer k's log leaves: its passages by id."""
    left: dict[int, list[dict[str, Any]]] = {}
    for op in writer_log(k):
        if op[0] in ("add", "update"):
            left[op[1]] = op[2]
        elif op[0] == "remove":
            del left[op[1]]
    return left


def need_jdbc() -> None:
    """The Kotlin runner's SQLite driver: a skip on a developer machine, a failure in CI."""
    jar = wire.SQLITE_JDBC_JAR
    if not Path(jar).is_file():
        reason = f"SQLite JDBC not found at {jar} (apt-get install -y libxerial-sqlite-jdbc-java)"
        if os.environ.get("EDGE_M3_REQUIRE_KOTLIN"):
            pytest.fail(reason)
        pytest.skip(reason)


_PYTHON = """
import sys
from pathlib import Path
from tests.test_kit_concurrent import writer_log
from tools.kit.retrieval_wire import python_answers
print("\\n".join(python_answers(Path(sys.argv[1]), writer_log(int(sys.argv[2])))))
"""


def test_three_languages_write_one_index_at_once(kit_jar: Path, swift_build: Path, tmp_path: Path) -> None:
    need_jdbc()
    folder = tmp_path / "ix"
    WritableIndex.create(folder, DIM, "int8", "fp16").close()
    cmds = {"python": [sys.executable, "-c", _PYTHON],
            **readers.kit_commands(kit_jar, swift_build / "release" / wire.SWIFT_PRODUCT)}
    procs = {}
    for k, who in enumerate(WRITERS):  # the slowest to start first; each next once it has committed
        ops = tmp_path / f"{who}.ops"
        ops.write_text(wire.ops(writer_log(k)), encoding="ascii")
        args = [str(folder), str(k)] if who == "python" else [str(folder), str(ops)]
        procs[who] = subprocess.Popen([*cmds[who], *args], cwd=ROOT, text=True, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, env={**os.environ, wire.CONCURRENT_ENV: "1"})
        readers.wait_for_commit(folder, procs[who], range(k * 10_000, (k + 1) * 10_000))
    for k, who in enumerate(WRITERS):
        out, err = procs[who].communicate(timeout=600)
        assert procs[who].returncode == 0, f"{who}: {err[-2000:]}"
        got = wire.answers(out)
        log = writer_log(k)
        assert len(got) == len(log), f"{who}: {len(got)} answers to {len(log)} operations: {err[-2000:]}"
        for op, line in zip(log, got, strict=True):
            want = "hits 5" if op[0] == "search" else "ok"
            assert line.startswith(want), f"{who}: {op[0]} {op[1] if len(op) > 1 else ''}: {line[:200]}"

    everything = {pid: c for k in range(len(WRITERS)) for pid, c in survivors(k).items()}
    w = WritableIndex.open(folder)
    order = w.ids()
    assert sorted(set(order)) == sorted(everything)
    writer = [pid // 10_000 for pid in order]
    switches = sum(a != b for a, b in zip(writer, writer[1:], strict=False))
    assert switches > len(WRITERS) - 1, f"the writers' commits did not interleave: {writer}"
    ref = fresh({pid: everything[pid] for pid in dict.fromkeys(order)}, "int8", "fp16")
    scopes = [(mode, chunks) for mode in SCORE_MODES for chunks in (False, True)]
    log = [("open",), ("count",)] + [("search", 9, m, (1.0, 1.0, 1.0), QUERY, c) for m, c in scopes]
    want = ["ok", f"count {len(everything)}"] + [wire.hits_line(ref.search(QUERY, 9, mode, chunks=chunks))
                                                 for mode, chunks in scopes]
    w.close()
    assert wire.python_answers(folder, log) == want
    for who in ("kotlin", "swift"):
        ops = tmp_path / f"{who}-check.ops"
        ops.write_text(wire.ops(log), encoding="ascii")
        proc = subprocess.run([*cmds[who], str(folder), str(ops)], capture_output=True, text=True, timeout=300)
        assert wire.answers(proc.stdout) == want, f"{who}: {proc.stderr[-2000:]}"
    bases = [p.name for p in folder.iterdir() if p.name.startswith(INDEX_BASE_PREFIX)]
    assert len(bases) == 1, f"more than one base left: {sorted(bases)}"


@pytest.mark.parametrize("reader", WRITERS)
def test_a_reader_sees_one_committed_state(reader: str, kit_jar: Path, swift_build: Path,
                                           tmp_path: Path) -> None:
    """While another process adds a passage, removes one and compacts in a loop (always K or K+1
    passages, its old bases deleted as it goes), a reader that opens the folder again and again,
    counts and searches sees one committed state each call: never a count from half of one commit
    and half of another, never a base deleted under it reported as a corrupt index or escaping as
    an untyped error (tools/bench/writable_readers.py, whose long run is in docs/benchmarks.md,
    "Index size and search latency").
    Before, Kotlin's open failed on most tries (corrupt_index, and a raw FileNotFoundException),
    Python's about 1 in 200 (a raw FileNotFoundError, or corrupt_index), Swift's now and then."""
    if reader == "kotlin":
        need_jdbc()
    folder, stop = tmp_path / "ix", tmp_path / "stop"
    cmds = readers.kit_commands(kit_jar, swift_build / "release" / wire.SWIFT_PRODUCT)
    log = readers.reader_log(3_000)
    writer = readers.start(folder, stop)
    try:
        got = readers.read(reader, folder, log, cmds, tmp_path)
    finally:
        turns = readers.finish(writer, stop)
    bad = readers.wrong(log, got)
    assert not bad, f"{len(bad)} of {len(log)} calls: {bad[:5]}"
    assert turns >= 20, f"the writer made {turns} turns while the reader read: no concurrency to speak of"

"""A reader beside a churning writer: every call sees one committed state (the writable index).

    python -m tools.bench.writable_readers [--seconds 60] [--readers python,kotlin,swift]

A writer process adds a passage, removes one and compacts every second turn, in a loop: its index
always holds K or K+1 passages, and each compaction deletes the base it replaced right after its
commit. A reader in the language asked opens the folder again every third call and counts or
searches (dense, k = 3) in between, through each kit's op-log runner (tools/kit/retrieval_wire.py,
`ops`). Every answer must be "ok", K or K+1, or 3 hits: a count made of two commits, a corrupt
index or an untyped error is a failure (docs/index-format.md, "Transactions, kills, other
writers"). tests/test_kit_concurrent.py runs 3,000 reads per language; the figures of the long
run are in docs/benchmarks.md, "Index size and search latency".
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edge_m3.retrieval.writable import WritableIndex
from edge_m3.spec import INDEX_DB
from tools.bench.results import Load, add_option, write_result
from tools.bench.writable_kills import DIM, passage
from tools.kit import retrieval_wire as wire

ROOT = Path(__file__).resolve().parents[2]
K = 200  # the passages the churning writer keeps
QUERY = passage(424242)

WRITER = """
import sys
from pathlib import Path
from edge_m3.retrieval.writable import WritableIndex
from tools.bench.writable_readers import K, churn_passage
folder, stop = Path(sys.argv[1]), Path(sys.argv[2])
w = WritableIndex.open(folder)
i = K
while not stop.exists():
    w.add(i, churn_passage(i))
    w.remove(i - K)
    if i % 2:
        w.compact()
    i += 1
w.close()
print(i - K)
"""


def churn_passage(i: int) -> dict[str, Any]:
    """The churning writer's passage i: one chunk."""
    return passage(7_000 + i)


def start(folder: Path, stop: Path) -> subprocess.Popen[str]:
    """K passages compacted into a base, then the writer, once it has committed its first add."""
    shutil.rmtree(folder, ignore_errors=True)
    stop.unlink(missing_ok=True)
    w = WritableIndex.create(folder, DIM, "int8", "fp16")
    for i in range(K):
        w.add(i, churn_passage(i))
    w.compact()
    w.close()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(folder), str(stop)], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for_commit(folder, writer)
    return writer


def wait_for_commit(folder: Path, proc: subprocess.Popen[str], ids: range | None = None) -> None:
    """Until `proc` has committed a passage (one of `ids`), exited, or 120 s went by: watched
    through a read-only connection."""
    where, args = ("", ()) if ids is None else (" WHERE id >= ? AND id < ?", (ids.start, ids.stop))
    watch = sqlite3.connect(f"{(folder / INDEX_DB).as_uri()}?mode=ro", uri=True)
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if watch.execute(f"SELECT 1 FROM passages{where} LIMIT 1", args).fetchone():
                    return
            except sqlite3.Error:
                pass
            time.sleep(0.005)
    finally:
        watch.close()


def finish(writer: subprocess.Popen[str], stop: Path) -> int:
    """The writer stopped: its turns (each an add and a remove, every second one a compaction)."""
    stop.touch()
    out, err = writer.communicate(timeout=120)
    if writer.returncode != 0:
        raise RuntimeError(f"the writer failed: {err[-2000:]}")
    return int(out.strip())


def reader_log(reads: int) -> list[tuple[Any, ...]]:
    """Open, then `reads` calls: a reopen every third, a dense search every tenth, else a count."""
    return [("open",)] + [("reopen",) if n % 3 == 0 else ("search", 3, "dense", (1.0, 1.0, 1.0), QUERY)
                          if n % 10 == 5 else ("count",) for n in range(reads)]


def wrong(log: Sequence[tuple[Any, ...]], got: Sequence[str]) -> list[tuple[int, str]]:
    """The answers that are not one committed state's: (call, answer)."""
    ok = {"open": ("ok",), "reopen": ("ok",), "count": (f"count {K}", f"count {K + 1}"), "search": ("hits 3 ",)}
    bad = [(n, line) for n, (op, line) in enumerate(zip(log, got, strict=False))
           if not line.startswith(ok[op[0]])]
    if len(got) != len(log):
        bad.append((len(got), f"{len(got)} answers to {len(log)} calls"))
    return bad


def kit_commands(kit_jar: Path | None, swift_exe: Path | None) -> dict[str, list[str]]:
    """Each kit's `ops` command line (without the folder and the log)."""
    cmds = {}
    if kit_jar is not None:
        cmds["kotlin"] = ["java", "-cp", f"{kit_jar}:{wire.SQLITE_JDBC_JAR}", wire.KOTLIN_MAIN, "ops"]
    if swift_exe is not None:
        cmds["swift"] = [str(swift_exe), "ops"]
    return cmds


def read(reader: str, folder: Path, log: Sequence[tuple[Any, ...]], cmds: dict[str, list[str]],
         tmp: Path) -> list[str]:
    """The reader's answers to `log` (Python in this process, a kit in its runner)."""
    if reader == "python":
        try:
            return wire.python_answers(folder, log)
        except Exception as exc:  # noqa: BLE001 (an untyped error is the finding, not a crash of the tool)
            return [f"untyped {type(exc).__name__}: {exc}"]
    ops = tmp / f"{reader}-reader.ops"
    ops.write_text(wire.ops(log), encoding="ascii")
    proc = subprocess.run([*cmds[reader], str(folder), str(ops)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, wire.CONCURRENT_ENV: "1"})
    if proc.returncode != 0:
        return [*wire.answers(proc.stdout), f"exit {proc.returncode}: {proc.stderr[-500:]!r}"]
    return wire.answers(proc.stdout)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0, help="per reader")
    p.add_argument("--readers", default="python,kotlin,swift")
    p.add_argument("--reads", type=int, default=3_000, help="calls per round (a kit's runner per round)")
    p.add_argument("--dir", type=Path, default=Path("/tmp/edge_m3_readers"))
    add_option(p, "writable_readers.json")
    a = p.parse_args()
    load, rows = Load(), []
    readers = a.readers.split(",")
    a.dir.mkdir(parents=True, exist_ok=True)
    jar = swift = None
    if "kotlin" in readers:
        out = subprocess.run([str(ROOT / "tools/kit/kit_jar.sh")], capture_output=True, text=True, check=True)
        jar = Path(out.stdout.strip().splitlines()[-1])
    if "swift" in readers:
        scratch = ROOT / "build" / "swift-tests"  # the tests' build (tests/conftest.py's flags): reused
        subprocess.run(["swift", "build", "-c", "release", "-Xswiftc", "-enable-testing", "-Xswiftc",
                        "-warnings-as-errors", "--package-path", str(ROOT / "ios_assets"), "--scratch-path",
                        str(scratch)], check=True, capture_output=True)
        swift = scratch / "release" / wire.SWIFT_PRODUCT
    cmds = kit_commands(jar, swift)
    log = reader_log(a.reads)
    for reader in readers:
        folder, stop = a.dir / "ix", a.dir / "stop"
        writer = start(folder, stop)
        t0, rounds, bad = time.monotonic(), 0, []
        try:
            while time.monotonic() - t0 < a.seconds and not bad:
                bad = wrong(log, read(reader, folder, log, cmds, a.dir))
                rounds += 1
        finally:
            turns = finish(writer, stop)
        took = time.monotonic() - t0
        opens = rounds * (1 + sum(op[0] == "reopen" for op in log))
        print(f"{reader}: {rounds * a.reads:,} calls ({opens:,} opens) in {took:.0f} s beside {turns:,} writer "
              f"turns ({turns // 2:,} compactions): {'none wrong' if not bad else f'WRONG: {bad[:3]}'}")
        rows.append([reader, f"{rounds * a.reads:,}", f"{opens:,}", f"{took:.0f}",
                     f"{turns:,} ({turns // 2:,})", f"{len(bad)}"])
    if a.results:
        write_result(a.results, title="A reader beside a churning writer (every call one committed state)",
                     module="tools.bench.writable_readers", load=load, rows=rows,
                     columns=["reader", "calls", "opens", "seconds", "writer turns beside it (compactions)",
                              "wrong answers"])


if __name__ == "__main__":
    main()

"""Issue 38: the readers of untrusted files under the fuzz contract (tools/fuzz).

Every committed seed (real files, cut small) and every input a fuzz run found is replayed
through its target: accepted, or refused with one line of EdgeM3Error, within the time and
memory bounds. Then each target is fuzzed briefly with atheris (a bounded number of runs).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from edge_m3.errors import EdgeM3Error
from edge_m3.retrieval.index_folder import CorruptIndexError
from tools.fuzz import harness, writable_lies

ROOT = Path(__file__).resolve().parents[1]
CASES = [(name, path) for name in harness.TARGETS for path in harness.inputs(name)]
BRIEF_RUNS = 3000  # per target; the seconds below bound the slow ones (whole bundles: ~100/s)
BRIEF_SECONDS = 8


@pytest.mark.parametrize(("name", "path"), CASES,
                         ids=[f"{n}/{p.parent.parent.name}/{p.name}" for n, p in CASES])
def test_committed_input_meets_the_contract(name: str, path: Path) -> None:
    """Seeds are real valid files: accepted. Regression inputs: accepted or refused in one line."""
    verdict = harness.check(harness.target(name), path.read_bytes())
    if path.is_relative_to(harness.SEEDS):
        assert verdict == harness.ACCEPTED


def test_every_target_has_seeds() -> None:
    assert all((harness.SEEDS / name).is_dir() and any((harness.SEEDS / name).iterdir())
               for name in harness.TARGETS)


def _target(fn: object) -> harness.Target:
    return harness.Target("probe", fn)  # type: ignore[arg-type]


def test_the_contract_can_fail() -> None:
    """Anything but a one-line EdgeM3Error (an index target's: a CorruptIndexError), a hang or a
    large allocation is a violation."""
    def index_error(data: bytes) -> None:
        raise IndexError(data)

    class Unescaped(EdgeM3Error):
        def __str__(self) -> str:  # past EdgeM3Error's own escaping of line breaks
            return "file.json: line one\nline two"

    def two_lines(_: bytes) -> None:
        raise Unescaped()

    def blank(_: bytes) -> None:
        raise EdgeM3Error(" ")

    def recursion(_: bytes) -> None:
        json.loads("[" * 100_000)

    def allocation(_: bytes) -> None:
        import numpy as np

        np.ones(harness.MEMORY_BYTES // 8 + 1)

    def refused_after_allocation(_: bytes) -> None:
        allocation(b"")
        raise EdgeM3Error("x: refused")

    for fn in (index_error, two_lines, blank, recursion, allocation, refused_after_allocation):
        with pytest.raises(harness.ContractViolation):
            harness.check(_target(fn), b"x")
    assert harness.check(_target(lambda _: None), b"") == harness.ACCEPTED

    def refused(_: bytes) -> None:
        raise EdgeM3Error("x: refused")

    assert harness.check(_target(refused), b"") == harness.REFUSED

    def corrupt(_: bytes) -> None:
        raise CorruptIndexError("x: refused")

    with pytest.raises(harness.ContractViolation, match="not corrupt_index"):  # an index's refusal: its kind
        harness.check(harness.Target("index", refused), b"")
    assert harness.check(harness.Target("index", corrupt), b"") == harness.REFUSED


_LEAK_PROBE = """
import sys, weakref, atheris
from tools.fuzz.mend import mend_trace_cmp

class Made: pass
made = []
class Cmp:
    def __le__(self, other):
        m = Made()
        made.append(weakref.ref(m))
        return m

@atheris.instrument_func
def compare(x):
    return Cmp() <= x

def one(data):
    if sys.argv[1] == "mend":
        mend_trace_cmp()
    compare(len(data))
    if len(made) == 20:
        print("kept", sum(r() is not None for r in made), flush=True)

atheris.Setup([sys.argv[0], "-runs=30", "-seed=1"], one)
atheris.Fuzz()
"""


def test_atheris_comparisons_do_not_leak() -> None:
    """atheris 3.0.0 keeps every object an instrumented comparison returns (tools/fuzz/mend.py):
    the long `writable` runs died of it. Under the mend each one is freed once dropped; without
    it all are kept (should a new atheris fix the hook, the mend leaves it alone and this test
    says the mend is no longer needed)."""
    def kept(mode: str) -> str:
        out = subprocess.run([sys.executable, "-c", _LEAK_PROBE, mode], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip()

    assert kept("mend") == "kept 0"
    assert kept("plain") == "kept 20"


def test_refusal_hiding_a_memory_error_is_a_violation() -> None:
    """A fuzzing child's address-space limit turns a huge allocation into a MemoryError; a reader
    that wraps every exception as a refusal (safeload's `except Exception: ... from None`) must
    not hide it (the memo-index finding of `torch_pickle`)."""
    def wrapped(data: bytes) -> None:
        try:
            raise MemoryError
        except Exception:
            raise EdgeM3Error("x.bin: cannot read the archive's pickle (MemoryError)") from None

    with pytest.raises(harness.ContractViolation, match="running out of memory"):
        harness.check(_target(wrapped), b"", bounded=False)


def test_hang_is_a_violation(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setattr(harness, "HANG_SECONDS", 0.2)
    with pytest.raises(harness.ContractViolation, match="still running"):
        harness.check(_target(lambda _: time.sleep(5)), b"")


def test_folder_blobs_round_trip_and_stay_inside() -> None:
    files = {"a.json": b'{"x": 1}\n', "1_Pooling/config.json": b"{}", "empty": b""}
    assert harness.unpack(harness.pack(files)) == files
    hostile = harness.pack({"ok": b"1"}) + b"\n==> ../up <==\nx\n==> /abs <==\nx\n==> a/b/c <==\nx"
    assert harness.unpack(hostile) == {"ok": b"1"}
    with pytest.raises(ValueError):
        harness.pack({"x": b"\n==> y <==\n"})


def test_rehash_keeps_the_manifest_as_it_was_written() -> None:
    """The rehash fixes each changed entry's sha256 and size in the input's own text, so the
    manifest's own mutations reach the reader; it writes the whole manifest again only when an
    entry's old values are not found once (two entries of one digest)."""
    def right(files: dict[str, bytes]) -> bool:
        entries = json.loads(files["manifest.json"])["files"]
        return all(e["sha256"] == hashlib.sha256(files[n]).hexdigest() and e["size"] == len(files[n])
                   for n, e in entries.items() if n in files)

    files = harness.unpack((harness.SEEDS / "bundle" / "tiny").read_bytes())
    harness.rehash(files, "manifest.json")
    assert right(files)
    files["manifest.json"] = files["manifest.json"].replace(b'"schema_version": 1', b'"schema_version":\t1')
    again = {**files, "golden.json": b"{}"}
    harness.rehash(again, "manifest.json")
    assert right(again) and b'"schema_version":\t1' in again["manifest.json"]  # kept, fixed in place
    unchanged = dict(files)
    harness.rehash(unchanged, "manifest.json")
    assert unchanged["manifest.json"] is files["manifest.json"]  # nothing to fix: the same bytes
    twins = {**files, "golden.json": files["sentencepiece.bpe.model"]}  # one digest for two entries
    harness.rehash(twins, "manifest.json")
    assert right(twins) and b'"schema_version":\t1' in twins["manifest.json"]
    twins["golden.json"] = b"{}"
    harness.rehash(twins, "manifest.json")
    assert right(twins) and b'"schema_version":\t1' not in twins["manifest.json"]  # written again


def test_one_file_targets_read_the_input_not_their_base() -> None:
    """`golden` and `vocab_map` open their base bundle once and read each input in a scratch
    folder: a bad file is that reader's refusal, and no input reaches the other's base."""
    seeds = {name: next((harness.SEEDS / name).iterdir()).read_bytes() for name in ("golden", "vocab_map")}
    for first, second in (("vocab_map", "golden"), ("golden", "vocab_map")):
        for bad in (b"{}", b"[1, 2]", b'{"kept_ids": [0]}', b"\xff"):
            assert harness.check(harness.target(first), bad) == harness.REFUSED, (first, bad)
        assert harness.check(harness.target(second), seeds[second]) == harness.ACCEPTED
        assert harness.check(harness.target(first), seeds[first]) == harness.ACCEPTED


@pytest.mark.parametrize("name", harness.TARGETS)
def test_brief_fuzz_run(name: str, tmp_path: Path) -> None:
    """A bounded atheris run from the committed corpus finds no violation (a fixed seed, so a
    failure here replays with the same command)."""
    crashes = tmp_path / "crashes"
    cmd = [sys.executable, "-m", "tools.fuzz.run", name, "--runs", str(BRIEF_RUNS),
           "--seconds", str(BRIEF_SECONDS), "--corpus", str(tmp_path / "corpus"), "--crashes", str(crashes),
           "-seed=38"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    found = sorted(p.name for p in crashes.iterdir())
    assert proc.returncode == 0 and not found, f"{found}\n{proc.stderr[-4000:]}"
    assert "stat::number_of_executed_units" in proc.stderr


def _lying_index(mutate: object) -> bytes:
    files = harness.unpack((harness.SEEDS / "index" / "int8-int8").read_bytes())
    m = json.loads(files["index.json"])
    mutate(files, m)  # type: ignore[operator]
    files["index.json"] = json.dumps(m).encode()
    return harness.pack(files)  # the target rewrites the hashes and sizes to match (harness.rehash)


def _shape(name: str, shape: list[int], data: bytes | None = None) -> object:
    def mutate(files: dict[str, bytes], m: dict) -> None:
        m["arrays"][name]["shape"] = shape
        if data is not None:
            files[f"{name}.bin"] = data
    return mutate


def _cut(name: str, keep: int, shape: list[int]) -> object:
    def mutate(files: dict[str, bytes], m: dict) -> None:
        files[f"{name}.bin"] = files[f"{name}.bin"][:keep]
        m["arrays"][name]["shape"] = shape
    return mutate


LIES = {  # issue 38 point 5: each array cut short or its shape a lie, the manifest edited to match
    "shape product wraps int64": _shape("dense", [2**32, 2**32], b""),
    "0-D sparse_tokens": _shape("sparse_tokens", [], b"\0\0\0\0"),
    "sparse_rows cut": _cut("sparse_rows", 4 * 5, [5]),
    "sparse_weights cut": _cut("sparse_weights", 4 * 5, [5]),
    "colbert cut": _cut("colbert", 8 * 4, [4, 8]),
    "colbert_scale cut": _cut("colbert_scale", 4 * 3, [3]),
    "colbert rows as columns": _shape("colbert", [8, 9]),
    "dense_scale cut": _cut("dense_scale", 4 * 2, [2]),
    "ids not a list": lambda files, m: files.update({"ids.json": b"5"}),
    "ids fewer than count": lambda files, m: files.update({"ids.json": b'["a"]'}),
    "ids of lists": lambda files, m: files.update({"ids.json": b"[[1], [2], [3], [4], [5]]"}),
    "dtype a list": lambda files, m: m["arrays"]["dense"].update(dtype=["int8"]),
}


@pytest.mark.parametrize("mutate", LIES.values(), ids=LIES.keys())
def test_index_lying_about_its_arrays_is_refused(mutate: object) -> None:
    assert harness.check(harness.target("index"), _lying_index(mutate)) == harness.REFUSED


@pytest.mark.parametrize("name", sorted(writable_lies.LIES))
def test_a_lying_writable_database_is_refused_at_open(name: str, tmp_path: Path) -> None:
    """A database SQLite reads but whose content breaks docs/index-format.md's rules (a column
    the stores do not use, a text vector, a scale not > 0, text not UTF-8, meta integers past
    their rule): refused when opened, as corrupt_index in one line (before, Python took most of
    them, and one was a ValueError traceback)."""
    from edge_m3.retrieval.writable import WritableIndex
    from edge_m3.spec import INDEX_DB

    (tmp_path / INDEX_DB).write_bytes(writable_lies.build(name))
    with pytest.raises(CorruptIndexError) as err:
        WritableIndex.open(tmp_path).close()
    assert str(err.value).splitlines() == [str(err.value)]


def test_a_refused_database_is_closed_at_once(tmp_path: Path) -> None:
    """A refused open closes its SQLite connection before it raises (the kits' do: Kotlin's
    `catch { index.close() }`, Swift's ARC). Before, each refusal kept its connection, and the file
    under it, open until the cycle collector came round: with the collector off, 50 refusals held
    50 more descriptors."""
    import gc
    import os

    from edge_m3.retrieval.writable import WritableIndex
    from edge_m3.spec import INDEX_DB

    (tmp_path / INDEX_DB).write_bytes(writable_lies.build("float32-dense-scale"))
    before = len(os.listdir("/proc/self/fd"))
    gc.disable()
    try:
        for _ in range(50):
            with pytest.raises(CorruptIndexError):
                WritableIndex.open(tmp_path)
        assert len(os.listdir("/proc/self/fd")) <= before + 2
    finally:
        gc.enable()

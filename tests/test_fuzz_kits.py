"""Issue 38 for the kits: their readers of untrusted files fuzzed (tools/fuzz/kits).

Swift: the libFuzzer targets (tools/fuzz/kits/swift, -sanitize=fuzzer,address, never in the
package's products) replay every committed seed and regression input, then fuzz each target
briefly. Kotlin: the seeded structure-aware mutational loop (no coverage-guided JVM fuzzer installs
here) over the same readers, a fixed budget each. Differential: the SentencePiece, index and
writable-index readers of Python, Kotlin and Swift agree on the same mutated files (all refuse
with one kind, an index's corrupt_index, or all accept with the same pieces, scores and ids, or
the same search answers); a writable index's database is mutated through SQLite itself.
About 2.5 minutes with the builds.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tools.fuzz import harness, writable_lies
from tools.fuzz.kits import fuzz_swift, loop

SWIFT_SECONDS = 4  # per target; libFuzzer's -runs bounds the fast ones
SWIFT_RUNS = 20000
KOTLIN_BUDGET, KOTLIN_SECONDS = 300, 3.0
DIFF_BUDGET, DIFF_SECONDS = 150, 10.0


@pytest.fixture(scope="module")
def fuzz_exe(swift: Path) -> Path:
    os.environ["PATH"] = f"{swift.parent}{os.pathsep}{os.environ['PATH']}"
    return fuzz_swift.build()


def _committed(target: str) -> list[Path]:
    return [p for d in fuzz_swift.seed_dirs(target) for p in sorted(d.iterdir()) if p.is_file()]


@pytest.mark.parametrize("target", fuzz_swift.TARGETS)
def test_swift_target(fuzz_exe: Path, target: str, tmp_path: Path) -> None:
    """Every committed input meets the contract, then a brief run from them finds no violation."""
    flags = fuzz_swift.flags(target, tmp_path, 1 << 16)
    committed = _committed(target)  # the real seeds first, then the regression inputs
    seeds = [p for d in fuzz_swift.real_seed_dirs(target) for p in sorted(d.iterdir()) if p.is_file()]
    assert committed[:len(seeds)] == seeds
    replay = subprocess.run([str(fuzz_exe), *flags, *map(str, committed)],
                            env={**fuzz_swift.env(target), "EDGE_M3_FUZZ_VERDICTS": "1"},
                            capture_output=True, text=True, timeout=300)
    assert replay.returncode == 0, replay.stderr[-4000:]
    got = [line for line in replay.stderr.splitlines() if line.startswith("verdict: ")]
    assert len(got) == len(committed), got
    assert got[:len(seeds)] == ["verdict: accepted"] * len(seeds), (seeds, got)  # past the harness's rehash
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    run = subprocess.run([str(fuzz_exe), *flags, f"-runs={SWIFT_RUNS}", f"-max_total_time={SWIFT_SECONDS}",
                          "-seed=38", str(corpus), *map(str, fuzz_swift.seed_dirs(target))],
                         env=fuzz_swift.env(target, fuzzing=True), capture_output=True, text=True, timeout=300)
    found = [p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "timeout-", "oom-", "leak-"))]
    assert run.returncode == 0 and not found, f"{found}\n{run.stderr[-4000:]}"
    assert "stat::number_of_executed_units" in run.stderr


@pytest.mark.parametrize("target", loop.KOTLIN_TARGETS)
def test_kotlin_loop(kit_jar: Path, target: str, tmp_path: Path) -> None:
    """Seeds, regression inputs and a fixed budget of mutants: only EdgeM3Exceptions, one line each."""
    stats = loop.run_kotlin(target, KOTLIN_BUDGET, 38, tmp_path, KOTLIN_SECONDS)
    assert stats["violations"] == 0, sorted(p.read_text() for p in tmp_path.glob("*.txt"))


@pytest.mark.parametrize("target", loop.DIFF_TARGETS)
def test_three_readers_agree(kit_jar: Path, fuzz_exe: Path, target: str, tmp_path: Path) -> None:
    stats = loop.run_diff(target, DIFF_BUDGET, 38, tmp_path, DIFF_SECONDS)
    assert stats["disagreements"] == 0, sorted(p.read_text() for p in tmp_path.glob("*.txt"))
    seeds = [p for d in fuzz_swift.SEED_DIRS[target] for p in d.iterdir() if p.is_file()]
    assert stats["all_accepted"] >= len(seeds)  # the seeds at least: their content compared


def test_manifest_file_names_are_not_paths(kit_jar: Path, fuzz_exe: Path) -> None:
    """A manifest file name that is a path, or not a name ("../x", "/x", "a\\b", "..", "", a line feed)
    is refused by all three manifest readers (spec.is_file_name, each kit's checkedFileName):
    before, each opened the file it named, outside the bundle and under no sha256."""
    seed = json.loads((harness.SEEDS / "manifest" / "tiny-trimmed.json").read_bytes())
    assert seed["tokenizer"]["vocab_map"]["file"]  # the trimmed seed names all three
    edits = (lambda m, v: m["tokenizer"].update(file=v),
             lambda m, v: m["tokenizer"]["vocab_map"].update(file=v),
             lambda m, v: m["models"][0].update(file=v),
             lambda m, v: m["files"].update({v: {"sha256": "0" * 64, "size": 1}}))
    cases = []
    for edit in edits:
        for bad in ("../outside.model", "/etc/hosts", "a\\b", "..", "", "bpe.jso\n", "a\u2028b"):
            m = json.loads(json.dumps(seed))
            edit(m, bad)
            cases.append(json.dumps(m).encode())
    kits = [loop.kotlin(), loop.swift()]
    try:
        key = json.loads(json.dumps(seed))
        edits[-1](key, "../outside.model")  # a `files` key: named once (Kotlin named it twice)
        for kit in kits:
            answer = kit.ask("manifest", json.dumps(key).encode())
            assert answer.count("outside.model") == 1, (kit.name, answer)
        for data in [json.dumps(seed).encode(), *cases]:
            want = "accepted" if data == json.dumps(seed).encode() else "refused"
            assert harness.check(harness.target("manifest"), data) == {"accepted": harness.ACCEPTED,
                                                                      "refused": harness.REFUSED}[want]
            for kit in kits:
                answer = kit.ask("manifest", data)
                assert loop.verdict(answer) == want, (kit.name, data[:200], answer)
                assert want == "accepted" or "not a file name in the bundle" in answer, answer
    finally:
        for kit in kits:
            kit.close()


def test_a_model_the_manifest_does_not_list_is_refused(kit_jar: Path, fuzz_exe: Path) -> None:
    """A bundle whose manifest drops the model's `files` entry: no sha256 to check it against, so
    all three refuse it (Swift loaded it unchecked before; Kotlin and Python refused it)."""
    files = harness.unpack((harness.SEEDS / "bundle" / "tiny").read_bytes())
    m = json.loads(files["manifest.json"])
    del m["files"][m["models"][0]["file"]]
    files["manifest.json"] = json.dumps(m).encode()
    data = harness.pack(files)
    assert harness.check(harness.target("bundle"), data) == harness.REFUSED
    kits = [loop.kotlin(), loop.swift()]
    try:
        for kit in kits:
            answer = kit.ask("bundle", data)
            assert loop.verdict(answer) == "refused" and "no files entry" in answer, (kit.name, answer)
    finally:
        for kit in kits:
            kit.close()


def test_the_kotlin_loop_rehashes_every_seed_past_the_hash_check(kit_jar: Path) -> None:
    """Kotlin's loop rewrites a folder's manifest hashes as Python's and Swift's harnesses do (in
    the manifest's own text): a seed it failed to rehash would be refused at the hash check, and
    its mutants would fuzz nothing past it (the bundle seeds' manifests need it)."""
    kit = loop.kotlin()
    try:
        for target in ("bundle", "index"):
            for seed in sorted((harness.SEEDS / target).iterdir()):
                answer = kit.ask(target, seed.read_bytes())
                assert loop.verdict(answer) == "accepted", (target, seed.name, answer)
    finally:
        kit.close()


def test_a_lying_writable_database_is_refused_by_all_three(kit_jar: Path, fuzz_exe: Path) -> None:
    """Each database of tools/fuzz/writable_lies.py (a seed changed through SQLite: a column the
    stores do not use, a text vector, a scale not > 0, text that is not UTF-8, meta integers past
    their rule) is refused by all three readers as corrupt_index, and its seed accepted by all
    three: the differential's findings of 2026-11-27, one of them a crash of the Swift kit."""
    kits = [loop.kotlin(), loop.swift()]
    try:
        for seed in ("float32-fp16.sqlite", "float32-none.sqlite", "int8-int8.sqlite"):
            data = (harness.SEEDS / "writable" / seed).read_bytes()
            answers = [loop.python_answer("writable", data)]
            answers += [loop.diff_ask(k, "writable", data) for k in kits]
            assert {loop.verdict(a) for a in answers} == {"accepted"} and len(set(answers)) == 1, answers
        for name in writable_lies.LIES:
            data = writable_lies.build(name)
            answers = [loop.python_answer("writable", data)]
            answers += [loop.diff_ask(k, "writable", data) for k in kits]
            assert all(loop.refusal_kind(a) == "corrupt_index" for a in answers), (name, answers)
    finally:
        for kit in kits:
            kit.close()

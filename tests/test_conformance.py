"""The conformance suite (issue 59 item 4, docs/conformance.md): every case of tests/conformance/
in Python, Kotlin and Swift, each with its own test runner; a kit that diverges fails the case.

tests/conformance/generate.py builds each case's input from a freshly written valid index (no
committed binaries) into a temporary folder once per session. Python opens every case here
(pytest); the Kotlin kit through JUnit 4 (Debian's junit4: android_assets/jvm/conformance/
IndexConformanceTest.kt, compiled against the kit jar, run by org.junit.runner.JUnitCore); the
Swift kit through XCTest (ios_assets/Tests/EdgeM3Tests/EdgeM3ConformanceTests.swift, run by
`swift test --filter` with EDGE_M3_CONFORMANCE). Each language's test here names the case.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from edge_m3.errors import EdgeM3Error
from edge_m3.retrieval.index import Index
from edge_m3.retrieval.writable import WritableIndex
from edge_m3.spec import KIT_ERROR_KINDS
from tests.conformance import generate

ROOT = Path(__file__).resolve().parents[1]
CASES = [p.stem for p in generate.cases("index")]
JUNIT_JARS = ("/usr/share/java/junit4.jar", "/usr/share/java/hamcrest-core.jar")
JUNIT_SOURCE = ROOT / "android_assets/jvm/conformance/IndexConformanceTest.kt"
JUNIT_CLASS = "dev.edgem3.conformance.IndexConformanceTest"
SWIFT_CLASS = "EdgeM3ConformanceTests"
SWIFT_ENV = "EDGE_M3_CONFORMANCE"  # the folder of generated cases the XCTest reads


@pytest.fixture(scope="session")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every case's input and case.json, generated once per session."""
    out = tmp_path_factory.mktemp("conformance")
    assert generate.generate(out, "index") == CASES
    return out


def case_of(generated: Path, name: str) -> dict[str, Any]:
    return json.loads((generated / "index" / name / "case.json").read_text(encoding="utf-8"))


def render_id(pid: Any) -> str:
    """A passage id as every runner renders it (the one place to change with the id type)."""
    return json.dumps(pid)


def _bundle(files: dict[str, str] | None, where: Path) -> Any:
    """A loaded bundle as the readers see it: its manifest's files' SHA-256s."""
    if files is None:
        return None
    manifest = SimpleNamespace(files={k: {"sha256": v} for k, v in files.items()})
    return SimpleNamespace(manifest=manifest, path=where)


def python_outcome(case: dict[str, Any], folder: Path) -> dict[str, Any]:
    """What Python's reader makes of the case's input: {"count", "ids"} or {"error", "message"}."""
    opts = case.get("open", {})
    bundle, verify = _bundle(opts.get("bundle_files"), folder), opts.get("verify", True)
    try:
        if case["reader"] == "writable":
            with WritableIndex.open(folder, bundle=bundle, verify=verify) as ix:
                return {"count": len(ix), "ids": [render_id(i) for i in ix.ids()]}
        index = Index.load(folder, bundle=bundle, verify=verify)
        ids = [render_id(i) for i in dict.fromkeys(index.ids)]
        return {"count": len(ids), "ids": ids}
    except EdgeM3Error as exc:
        return {"error": exc.kind, "message": str(exc)}


def mismatch(case: dict[str, Any], got: dict[str, Any], language: str) -> str | None:
    """Why an outcome is not the case's expected one (None: it is)."""
    want = case["expect"]
    if "error" in want:
        if got.get("error") != want["error"]:
            return f"expected error {want['error']}, got {got}"
        message = str(got.get("message", ""))
        if "\n" in message:
            return f"a message of several lines: {message!r}"
        part = want.get("messages", {}).get(language)
        if part is not None and part not in message:
            return f"message {message!r} lacks {part!r}"
        return None
    ids = [render_id(i) for i in want["ids"]]
    if got.get("ids") != ids or got.get("count") != want["count"]:
        return f"expected count {want['count']} ids {ids}, got {got}"
    return None


def test_cases_are_well_formed() -> None:
    """Every case file reads, names a kit error kind or a result, and says where it came from."""
    for path in generate.cases("index"):
        case = generate.read_case(path)
        assert case.get("about") and case.get("from"), path
        assert case["expect"].get("error", "invalid_input") in KIT_ERROR_KINDS, path
    assert len(CASES) == len(set(CASES))


@pytest.mark.parametrize("name", CASES)
def test_python(generated: Path, name: str) -> None:
    case = case_of(generated, name)
    folder = generated / "index" / name / "input"
    got = python_outcome(case, folder)
    assert mismatch(case, got, "python") is None, f"{name}: {mismatch(case, got, 'python')}"
    if "error" in got:
        assert str(folder) in got["message"] or case["reader"] == "index", got


# ------------------------------------------------------------------ Kotlin: JUnit 4

def _failures(text: str, pattern: str) -> dict[str, str]:
    """case name -> its failure's first line, from a runner's output."""
    return {m.group(1): m.group(2) for m in re.finditer(pattern, text)}


@pytest.fixture(scope="session")
def junit_results(kit_jar: Path, generated: Path) -> tuple[str, dict[str, str]]:
    """JUnitCore over IndexConformanceTest (compiled against the kit jar, cached by content):
    its output and {case: failure}."""
    from tests.test_kit_writable import SQLITE_JDBC_JAR

    missing = [j for j in (*JUNIT_JARS, SQLITE_JDBC_JAR) if not Path(j).is_file()]
    if missing:
        reason = f"{', '.join(missing)} not found (apt-get install -y junit4 libxerial-sqlite-jdbc-java)"
        if os.environ.get("EDGE_M3_REQUIRE_KOTLIN"):
            pytest.fail(reason)
        pytest.skip(reason)
    key = hashlib.sha256(JUNIT_SOURCE.read_bytes() + str(kit_jar).encode() + b"junit-first").hexdigest()[:16]
    jar = kit_jar.parent / f"conformance-{key}.jar"
    # JUnit first: the kit jar holds compile-only stubs of org.junit (jvm/stubs/) for its androidTest
    classpath = ":".join([*JUNIT_JARS, str(kit_jar)])
    if not jar.is_file():
        proc = subprocess.run([sys.executable, "-m", "tools.kit.kotlin2", "compile", "--classpath", classpath,
                               "--out", str(jar), str(JUNIT_SOURCE)], capture_output=True, text=True,
                              timeout=900, cwd=ROOT)
        assert proc.returncode == 0, f"the JUnit class did not compile:\n{proc.stderr}"
    proc = subprocess.run(["java", f"-Dedgem3.conformance={generated}", "-cp",
                           ":".join([classpath, str(jar), SQLITE_JDBC_JAR]), "org.junit.runner.JUnitCore",
                           JUNIT_CLASS], capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    ran = re.search(r"OK \((\d+) tests?\)|Tests run: (\d+)", out)
    assert ran and int(ran.group(1) or ran.group(2)) == len(CASES), out[-3000:]
    return out, _failures(out, r"\d+\) conforms\[([^\]]+)\]\([^)]*\)\n(?:[\w.$]+: )?([^\n]*)")


@pytest.mark.parametrize("name", CASES)
def test_kotlin(junit_results: tuple[str, dict[str, str]], name: str) -> None:
    assert name not in junit_results[1], f"{name}: {junit_results[1].get(name)}"


# ------------------------------------------------------------------ Swift: XCTest

@pytest.fixture(scope="session")
def xctest_results(swift_test: Callable[..., subprocess.CompletedProcess[str]],
                   generated: Path) -> tuple[str, dict[str, str]]:
    """`swift test --filter EdgeM3ConformanceTests` over the generated cases (conftest's
    swift_test: the session's build): its output and {case: failure}."""
    proc = swift_test("--filter", SWIFT_CLASS, env=os.environ | {SWIFT_ENV: str(generated)})
    out = proc.stdout + proc.stderr
    checked = set(re.findall(r"conformance checked (\S+)", out))
    assert checked == set(CASES), f"the XCTest checked {len(checked)} of {len(CASES)} cases:\n{out[-3000:]}"
    return out, _failures(out, r"conformance case (\S+): ([^\n]*)")


@pytest.mark.parametrize("name", CASES)
def test_swift(xctest_results: tuple[str, dict[str, str]], name: str) -> None:
    assert name not in xctest_results[1], f"{name}: {xctest_results[1].get(name)}"

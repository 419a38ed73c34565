"""Which lines of the kits no machine here runs: line coverage of the two kits' library sources
while the existing kit tests run, measured, not guessed (issue 34, item 5).

    python -m tools.kit.never_run            # runs the kit tests instrumented, then reports
    python -m tools.kit.never_run --report   # reports the last run's data again (build/never_run/)

Kotlin (android_assets/src/main/java): every `java` the tests start goes through a shim on PATH
that adds Debian's JaCoCo agent (libjacoco-java 0.8.6, `append=true`, one exec file), and
`tools/kit/JacocoLines.java` reads the exec file against the kit's jar (`tools/kit/kit_jar.sh`):
a line is code when it holds bytecode, run when any of its instructions ran.
Swift (ios_assets/Sources/EdgeM3): with EDGE_M3_SWIFT_COVERAGE set, tests/conftest.py builds the
package with `--enable-code-coverage` (its own scratch directory, build/swift-coverage) and runs
`swift test` the same way, and tests/test_swift_ios_binding.py compiles its TFLiteRunner check
with `-profile-generate -profile-coverage-mapping`; every instrumented process (the XCTests, the
CLI products the pytest kit tests run, the TFLiteRunner check) writes a .profraw, merged with the
toolchain's llvm-profdata, and the toolchain's llvm-cov exports each binary's lines (lcov DA
records: a line is code when a region starts or runs through it); a line is run when any binary
ran it.
The tests run are the kit tests (KIT_TESTS) with `-m 'models or not models'` (the slow and model
tests too); a test that fails or skips is reported, and its lines count as they ran. Prints the
totals and every never-run region (consecutive never-run lines of one function) as
`file:line-line function`; writes build/never_run/never_run.json. Runs under `nice -n 10`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "build/never_run"
KOTLIN_SOURCES = ROOT / "android_assets/src/main/java/dev/edgem3"
SWIFT_SOURCES = ROOT / "ios_assets/Sources/EdgeM3"
KIT_TESTS = ["tests/test_kits.py", "tests/test_kit_api.py", "tests/test_kit_retrieval.py",
             "tests/test_kit_tokenizer.py", "tests/test_kit_writable.py", "tests/test_swift_kit.py",
             "tests/test_swift_ios_binding.py", "tests/test_conformance.py"]
JACOCO = Path("/usr/share/java")
JACOCO_CP = ["org.jacoco.core.jar", "asm.jar", "asm-commons.jar", "asm-tree.jar"]


def _swift_tool(name: str) -> str:
    swift = shutil.which("swift") or "/opt/swift/usr/bin/swift"
    return str(Path(swift).resolve().with_name(name))  # the toolchain's own llvm (profile format)


def _java_shim(exec_dir: Path) -> Path:
    """A directory holding `java`: the real one with JaCoCo's agent, appending to one exec file per
    user (some tests run java as nobody: tests/test_kit_writable.py's read-only checks)."""
    java = shutil.which("java")
    if java is None or not (JACOCO / "org.jacoco.agent.jar").is_file():
        sys.exit("needs java and Debian's libjacoco-java (apt-get install -y libjacoco-java)")
    agent = OUT / "jacocoagent.jar"
    with zipfile.ZipFile(JACOCO / "org.jacoco.agent.jar") as z:
        agent.write_bytes(z.read("jacocoagent.jar"))
    shim = OUT / "bin"
    shim.mkdir(exist_ok=True)
    options = f"destfile={exec_dir}/kotlin-$(id -u).exec,append=true,includes=dev.edgem3.*"
    (shim / "java").write_text(f'#!/bin/sh\nexec {Path(java).resolve()} -javaagent:{agent}={options} "$@"\n')
    (shim / "java").chmod(0o755)
    # tests/test_kits.py finds the JDK's libjava.so beside `java` (<bin>/../lib): the shim's too
    lib = OUT / "lib"
    if not lib.exists():
        lib.symlink_to(Path(java).resolve().parents[1] / "lib")
    return shim


def run_tests(pytest_args: list[str]) -> int:
    """The kit tests, instrumented; returns pytest's exit code."""
    if OUT.exists():
        shutil.rmtree(OUT)
    for folder in ("profraw", "exec"):
        (OUT / folder).mkdir(parents=True)
        (OUT / folder).chmod(0o1777)
    shim = _java_shim(OUT / "exec")
    for stale in (ROOT / "build/swift-coverage").rglob("*.profraw"):
        stale.unlink()
    env = os.environ | {"PATH": f"{shim}:{os.environ.get('PATH', '')}", "EDGE_M3_SWIFT_COVERAGE": "1",
                        "LLVM_PROFILE_FILE": str(OUT / "profraw/%p-%m.profraw")}
    cmd = ["nice", "-n", "10", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs",
           "-m", "models or not models", "--basetemp", str(OUT / "pytest"), *KIT_TESTS, *pytest_args]
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


def kotlin_lines() -> dict[tuple[str, int], tuple[bool, str]]:
    """(file, line) -> (run, function) for the kit's main sources."""
    jar = subprocess.run([str(ROOT / "tools/kit/kit_jar.sh")], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout.strip().splitlines()[-1]
    cp = ":".join(str(JACOCO / j) for j in JACOCO_CP)
    out = subprocess.run(["java", "-cp", cp, str(ROOT / "tools/kit/JacocoLines.java"), jar,
                          *map(str, sorted((OUT / "exec").glob("*.exec")))],
                         capture_output=True, text=True, check=True).stdout
    main = {p.name for p in KOTLIN_SOURCES.rglob("*.kt")}  # generated/ too: JaCoCo names files, not folders
    lines: dict[tuple[str, int], tuple[bool, str]] = {}
    for row in out.splitlines():
        source, line, status, function = row.split("\t")
        if source not in main:
            continue
        key = (source, int(line))
        was = lines.get(key)
        run = status == "run" or (was is not None and was[0])
        lines[key] = (run, function if was is None or (not run and not was[0]) else was[1])
    return lines


def _swift_objects() -> list[Path]:
    build = ROOT / "build/swift-coverage/release"
    objects = [build / "EdgeM3PackageTests.xctest", *(build / p for p in
               ("edge-m3-tokenize", "edge-m3-embed", "edge-m3-retrieval"))]
    objects += sorted((OUT / "pytest").glob("tflite_standin*/tflite-runner-check"))
    return [o for o in objects if o.is_file()]


def _demangle(names: set[str]) -> dict[str, str]:
    names_list = sorted(names)
    proc = subprocess.run([_swift_tool("swift-demangle"), "--simplified", "--compact"],
                          input="\n".join(names_list), capture_output=True, text=True, check=True)
    return dict(zip(names_list, proc.stdout.splitlines(), strict=True))


def swift_lines() -> dict[tuple[str, int], tuple[bool, str]]:
    """(file relative to Sources/EdgeM3, line) -> (run, function), over every instrumented binary."""
    raws = [*(OUT / "profraw").glob("*.profraw"), *(ROOT / "build/swift-coverage").rglob("*.profraw")]
    profdata = OUT / "swift.profdata"
    subprocess.run([_swift_tool("llvm-profdata"), "merge", "-sparse", "-o", str(profdata), *map(str, raws)],
                   check=True)
    run: dict[tuple[str, int], bool] = {}
    starts: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for obj in _swift_objects():
        lcov = subprocess.run([_swift_tool("llvm-cov"), "export", "-format=lcov", f"-instr-profile={profdata}",
                               str(obj), str(SWIFT_SOURCES)], capture_output=True, text=True, check=True).stdout
        source = None
        for row in lcov.splitlines():
            if row.startswith("SF:"):
                path = Path(row[3:])
                source = str(path.relative_to(SWIFT_SOURCES)) if path.is_relative_to(SWIFT_SOURCES) else None
            elif source and row.startswith("DA:"):
                line, count = row[3:].split(",")[:2]
                key = (source, int(line))
                run[key] = run.get(key, False) or int(count) > 0
            elif source and row.startswith("FN:"):
                line, name = row[3:].split(",", 1)
                starts[source].append((int(line), name))
    names = _demangle({n for fns in starts.values() for _, n in fns})
    lines = {}
    for (source, line), ran in run.items():
        before = [(s, n) for s, n in starts[source] if s <= line]
        lines[(source, line)] = (ran, names[max(before)[1]] if before else "?")
    return lines


def regions(lines: dict[tuple[str, int], tuple[bool, str]]) -> list[dict]:
    """Never-run lines grouped: consecutive code lines of one file and function."""
    out: list[dict] = []
    for (source, line) in sorted(lines):
        ran, function = lines[(source, line)]
        if ran:
            continue
        last = out[-1] if out else None
        code_between = [k for k in lines if k[0] == source and last and last["last"] < k[1] < line]
        if last and last["file"] == source and last["function"] == function and not code_between:
            last["last"] = line
            last["lines"] += 1
        else:
            out.append({"file": source, "first": line, "last": line, "lines": 1, "function": function})
    return out


def report() -> dict:
    result = {}
    for kit, lines in (("kotlin", kotlin_lines()), ("swift", swift_lines())):
        never = [k for k, (ran, _) in lines.items() if not ran]
        per_file: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for (source, _), (ran, _) in lines.items():
            per_file[source][0] += 1
            per_file[source][1] += not ran
        result[kit] = {"code_lines": len(lines), "never_run": len(never),
                       "files": {f: {"code": c, "never": n} for f, (c, n) in sorted(per_file.items())},
                       "regions": regions(lines)}
        print(f"{kit}: {len(never)} of {len(lines)} code lines never run")
        for f, (c, n) in sorted(per_file.items()):
            if n:
                print(f"  {f}: {n} of {c}")
        for r in result[kit]["regions"]:
            print(f"    {r['file']}:{r['first']}-{r['last']} ({r['lines']}) {r['function']}")
    (OUT / "never_run.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def markdown(result: dict, kit: str) -> str:
    """The kit's never-run regions as README lines: one per file, `lines function` each."""
    by_file: dict[str, list[str]] = defaultdict(list)
    for r in result[kit]["regions"]:
        span = str(r["first"]) if r["first"] == r["last"] else f"{r['first']}-{r['last']}"
        by_file[r["file"]].append(f"{span} `{r['function']}`")
    return "\n".join(f"- `{f}` ({result[kit]['files'][f]['never']} of {result[kit]['files'][f]['code']}): "
                     + "; ".join(spans) for f, spans in sorted(by_file.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", action="store_true", help="report the last run's data, run nothing")
    parser.add_argument("--markdown", choices=("kotlin", "swift"), help="with --report: the README list")
    args, pytest_args = parser.parse_known_args(argv)
    code = 0 if args.report else run_tests(pytest_args)
    result = report()
    if args.markdown:
        print(markdown(result, args.markdown))
    if code:
        print(f"pytest exited {code}: a failed test's lines count as far as they ran", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())

"""The iOS kit: ios_assets/ built and tested as a Swift package against real bundles' golden.json.

The package is built once per session (conftest `swift_build`, shared with
tests/test_kit_tokenizer.py; warnings are errors); each test then runs `swift test --skip-build`
with environment variables naming the bundle under test (Tests/EdgeM3Tests/EdgeM3GoldenTests.swift):
ids from the kit's own tokenizer, signature choice, post-processing of the recorded raw outputs
and the embedder's async path, all bit for bit, every bundle file's SHA-256, and bad input (lone
surrogates, text past the longest signature) answered as the Python pipeline answers it
(conftest `_write_input_cases`). The TensorFlow Lite runner, compiled only where that module
exists, is type-checked with swiftc against a compile-only stand-in (ios_assets/ci/stubs/).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.models  # builds bundles and the Swift package

ROOT = Path(__file__).resolve().parents[1]
IOS = ROOT / "ios_assets"
SOURCES = IOS / "Sources/EdgeM3"
TESTS = IOS / "Tests/EdgeM3Tests"
BUNDLE_ENV = ("EDGE_M3_BUNDLE", "EDGE_M3_TEST_RESOURCES", "EDGE_M3_INPUT_CASES")
SwiftTest = Callable[..., subprocess.CompletedProcess[str]]  # conftest `swift_test`


def _test_count(suite: str) -> int:
    """How many XCTest methods a test class file declares."""
    text = (TESTS / f"{suite}.swift").read_text(encoding="utf-8")
    return len(re.findall(r"^\s*func test\w+\(\)", text, re.M))


def _swift_test(swift_test: SwiftTest, suite: str,
                **env: str) -> tuple[subprocess.CompletedProcess[str], tuple[int, int, int]]:
    """`swift test` of one XCTest class; returns the process and (executed, skipped, failures)."""
    child_env = {k: v for k, v in os.environ.items() if k not in BUNDLE_ENV} | env
    proc = swift_test("--filter", suite, env=child_env)
    out = proc.stdout + proc.stderr
    m = re.search(r"Test Suite '(?:All|Selected) tests' (?:passed|failed) at [^\n]*\n\s*Executed (\d+) tests?, "
                  r"with (?:(\d+) tests? skipped and )?(\d+) failures?", out)
    assert m, f"no XCTest summary:\n{out[-6000:]}"
    return proc, (int(m.group(1)), int(m.group(2) or 0), int(m.group(3)))


def _kit_env(bundle: Path, inputs: Path, test_resources: Path | None = None) -> dict[str, str]:
    """What EdgeM3GoldenTests reads: the bundle, golden.json's folder (default: the bundle),
    the Python pipeline's answers to bad input."""
    env = {"EDGE_M3_BUNDLE": str(bundle), "EDGE_M3_INPUT_CASES": str(inputs)}
    if test_resources is not None:
        env["EDGE_M3_TEST_RESOURCES"] = str(test_resources)
    return env


def test_swift_core_unit_tests(swift_test: SwiftTest) -> None:
    """Manifest / vocab map decoding, pipeline edge cases, exact comparison, SHA-256 vectors, serial queue."""
    proc, summary = _swift_test(swift_test, "EdgeM3CoreTests")
    assert summary == (_test_count("EdgeM3CoreTests"), 0, 0), proc.stdout[-6000:]


def test_swift_core_reproduces_golden(swift_test: SwiftTest, tiny_bundle: Path) -> None:
    """The app layout `--kits` writes: the bundle in EdgeM3Resources, golden.json in EdgeM3TestResources."""
    kit = tiny_bundle.parent / "kits/ios_assets"
    env = _kit_env(kit / "EdgeM3Resources", tiny_bundle.parent / "input_cases.json",
                   kit / "EdgeM3TestResources")
    proc, summary = _swift_test(swift_test, "EdgeM3GoldenTests", **env)
    # Skipped: the live TFLite outputs (no TensorFlowLite module on this machine).
    assert summary == (_test_count("EdgeM3GoldenTests"), 1, 0), proc.stdout[-6000:]
    assert proc.returncode == 0


def test_swift_golden_replay_catches_drift(swift_test: SwiftTest, drifted_bundle: tuple[Path, str],
                                           tiny_bundle: Path) -> None:
    bundle, key = drifted_bundle
    env = _kit_env(bundle, tiny_bundle.parent / "input_cases.json")
    proc, (executed, _, failures) = _swift_test(swift_test, "EdgeM3GoldenTests", **env)
    assert proc.returncode != 0 and executed == _test_count("EdgeM3GoldenTests")
    assert failures >= 3
    assert f"lexical_weights[{key}]" in proc.stdout
    assert "input_ids" in proc.stdout and "colbert_vecs rows" in proc.stdout


@pytest.mark.slow
def test_swift_core_trimmed_vocabulary(swift_test: SwiftTest, trimmed_bundle: Path) -> None:
    """Trimmed-table rows for the model and for padding, original ids as lexical keys."""
    env = _kit_env(trimmed_bundle, trimmed_bundle.parent / "input_cases.json")
    proc, summary = _swift_test(swift_test, "EdgeM3GoldenTests", **env)
    assert summary == (_test_count("EdgeM3GoldenTests"), 1, 0), proc.stdout[-6000:]


def test_tflite_runner_typechecks(swift: Path, tmp_path: Path) -> None:
    """TFLiteRunner.swift against stand-in TensorFlowLite and TensorFlowLiteC modules, in both ways
    an app builds it: the kit's sources inside the app target, and the file beside the EdgeM3 package."""
    swiftc = str(swift.with_name("swiftc"))
    sources = sorted(map(str, SOURCES.rglob("*.swift")))
    stub = tmp_path / "stub"
    package = tmp_path / "package"
    c_module = ["-I", str(IOS / "ci/stubs/TensorFlowLiteC")]  # module.modulemap + header
    flags = ["-warnings-as-errors", "-swift-version", "5", "-enable-upcoming-feature", "StrictConcurrency"]
    steps = [
        [swiftc, "-emit-module", "-parse-as-library", "-module-name", "TensorFlowLite", *c_module,
         "-emit-module-path", str(stub / "TensorFlowLite.swiftmodule"),
         str(IOS / "ci/stubs/TensorFlowLite.swift")],
        # The sources in the app target: TensorFlowLite(C) visible, no EdgeM3 module.
        [swiftc, "-typecheck", *flags, "-module-name", "YourApp", "-I", str(stub), *c_module, *sources],
        # The package without TensorFlowLite (TFLiteRunner.swift compiles to nothing) ...
        [swiftc, "-emit-module", *flags, "-module-name", "EdgeM3",
         "-emit-module-path", str(package / "EdgeM3.swiftmodule"), *sources],
        # ... and TFLiteRunner.swift in the app target beside it: public API only.
        [swiftc, "-typecheck", *flags, "-module-name", "YourApp", "-I", str(package), "-I", str(stub),
         *c_module, str(SOURCES / "TFLiteRunner.swift")],
    ]
    stub.mkdir()
    package.mkdir()
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, f"{' '.join(cmd[:6])} ...:\n{proc.stdout}\n{proc.stderr}"


def test_tflite_runner_weight_cache() -> None:
    """The runner packs weights once per model (README "Memory"): its own XNNPACK delegate with a
    cache file named by the contract, the pod's XNNPACK only for `.off`, device threads by default."""
    runner = (SOURCES / "TFLiteRunner.swift").read_text(encoding="utf-8")
    for needed in ("TfLiteXNNPackDelegateCreate(", "TfLiteXNNPackDelegateDelete(", "weight_cache_file_path",
                   "EdgeM3Contract.weightCacheName(", "EdgeM3Contract.inMemoryWeightCache",
                   "options.isXNNPackEnabled = weightCache == .off", "delegates: [delegate]"):
        assert needed in runner, needed
    assert not re.search(r"threads: Int = \d", runner), "default threads: EdgeM3Contract.deviceThreads"
    assert runner.count("threads: Int = EdgeM3Contract.deviceThreads") == 4  # runner, 2 inits, load
    assert runner.count("weightCache: TFLiteRunner.WeightCache = .caches") == 3
    readme = (IOS / "README.md").read_text(encoding="utf-8")
    memory = readme[readme.index("## Memory"):]
    assert all(f"`{case}" in memory for case in (".caches", ".memory", ".off"))
    assert "not on an\niPhone" in memory


def test_package_layout(tiny_bundle: Path) -> None:
    """What the README and the other kits rely on: one library, one test target, no outside package."""
    package = (IOS / "Package.swift").read_text(encoding="utf-8")
    assert re.search(r"^// swift-tools-version:\s*(\d+\.\d+)", package, re.M)
    assert ".library(name: \"EdgeM3\", targets: [\"EdgeM3\"])" in package
    assert 'path: "Sources/EdgeM3"' in package and 'path: "Tests/EdgeM3Tests"' in package
    assert ".package(" not in package, "the kit may not depend on an outside package"
    assert ".iOS(.v15)" in package and ".macOS(.v12)" in package
    assert "ios_assets/.build/" in (ROOT / ".gitignore").read_text(encoding="utf-8").split()
    allowed = {"Foundation", "Dispatch", "CryptoKit", "TensorFlowLite", "EdgeM3"}
    for p in SOURCES.rglob("*.swift"):
        imports = set(re.findall(r"^\s*import (\w+)", p.read_text(encoding="utf-8"), re.M))
        # The pod's C API (the XNNPACK delegate) in the runner alone, behind canImport(TensorFlowLite).
        c_api = {"TensorFlowLiteC"} if p.name == "TFLiteRunner.swift" else set()
        assert imports <= allowed | c_api, (p, imports)
    lines = (SOURCES / "TFLiteRunner.swift").read_text(encoding="utf-8").splitlines()
    code = [line for line in lines if line.strip() and not line.lstrip().startswith("//")]
    assert code[0] == "#if canImport(TensorFlowLite)" and code[-1] == "#endif", "all of it behind canImport"
    readme = (IOS / "README.md").read_text(encoding="utf-8")
    assert ".package(path:" in readme and ".package(url:" in readme and "TFLiteRunner.swift" in readme
    # The CocoaPods runtime is what the default variant needs (edge_m3.contract), in the snippet and README.
    from edge_m3.builder.options import DEFAULT_QUANT
    from edge_m3.contract import RECIPES

    oldest = ".".join(RECIPES[DEFAULT_QUANT].oldest_tflite.split(".")[:2])
    pod = f"pod 'TensorFlowLiteSwift', '~> {oldest}'"
    assert pod in (IOS / "Podfile.snippet").read_text(encoding="utf-8") and pod in readme

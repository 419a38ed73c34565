"""The iOS kit: ios_assets/ built and tested as a Swift package against real bundles' golden.json.

The package is built once per session (conftest `swift_build`, shared with
tests/test_kit_tokenizer.py; warnings are errors); each test then runs `swift test --skip-build`
with environment variables naming the bundle under test (Tests/EdgeM3Tests/EdgeM3GoldenTests.swift):
ids from the kit's own tokenizer, signature choice, post-processing of the recorded raw outputs
and the embedder's async path, all bit for bit, every bundle file's SHA-256, and bad input (lone
surrogates, text past the longest signature) answered as the Python pipeline answers it
(conftest `_write_input_cases`). The model runs live on LiteRT's C API (LiteRtCRunner.swift,
the ai-edge-litert wheel's libLiteRt named by EDGE_M3_LITERT_LIB) on the tiny bundles, the
real-weights e5-small int8/int4 bundles, all-MiniLM-L6-v2 int8 (WordPiece, dense head only) and
a random ModernBERT fp32 and int8 (byte-level BPE, dense head only, every signature up to one
past its 128-token window), within the variant's device tolerance; `kit_embed.sh
swift` is held against `edge-m3 embed`. The TensorFlow Lite runner (phone only) is type-checked
with swiftc against a compile-only stand-in (ios_assets/ci/stubs/).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import MODERNBERT_QUANTS
from tests.support import MINILM_TEXTS, assert_kit_embeddings, python_embed

pytestmark = pytest.mark.models  # builds bundles and the Swift package

ROOT = Path(__file__).resolve().parents[1]
IOS = ROOT / "ios_assets"
SOURCES = IOS / "Sources/EdgeM3"
TESTS = IOS / "Tests/EdgeM3Tests"
BUNDLE_ENV = ("EDGE_M3_BUNDLE", "EDGE_M3_TEST_RESOURCES", "EDGE_M3_INPUT_CASES", "EDGE_M3_LITERT_LIB")
LIVE = "EdgeM3GoldenTests/testLiveOutputsWithinTolerance"
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


@pytest.fixture(scope="session")
def litert_lib() -> Path:
    """The ai-edge-litert wheel's LiteRT C library, which the kit's LiteRtCRunner loads
    (missing: a skip here, a failure where CI requires Swift)."""
    import importlib.util
    import sys

    from tests.conftest import _tool_missing

    spec = importlib.util.find_spec("ai_edge_litert")
    name = "libLiteRt.dylib" if sys.platform == "darwin" else "libLiteRt.so"
    lib = Path(spec.origin).with_name(name) if spec and spec.origin else None
    if lib is None or not lib.is_file():
        _tool_missing(f"no {name} from the ai-edge-litert wheel", "EDGE_M3_REQUIRE_SWIFT")
    assert lib is not None
    return lib


def _kit_env(bundle: Path, inputs: Path | None, test_resources: Path | None = None,
             lib: Path | None = None) -> dict[str, str]:
    """What EdgeM3GoldenTests reads: the bundle, golden.json's folder (default: the bundle),
    the Python pipeline's answers to bad input, the LiteRT library the live test runs on."""
    env = {"EDGE_M3_BUNDLE": str(bundle)}
    if inputs is not None:
        env["EDGE_M3_INPUT_CASES"] = str(inputs)
    if lib is not None:
        env["EDGE_M3_LITERT_LIB"] = str(lib)
    if test_resources is not None:
        env["EDGE_M3_TEST_RESOURCES"] = str(test_resources)
    return env


def test_swift_core_unit_tests(swift_test: SwiftTest) -> None:
    """Manifest / vocab map decoding, pipeline edge cases, exact comparison, SHA-256 vectors, serial queue."""
    proc, summary = _swift_test(swift_test, "EdgeM3CoreTests")
    assert summary == (_test_count("EdgeM3CoreTests"), 0, 0), proc.stdout[-6000:]


def test_swift_core_reproduces_golden(swift_test: SwiftTest, tiny_bundle: Path, litert_lib: Path) -> None:
    """The app layout `--kits` writes: the bundle in EdgeM3Resources, golden.json in EdgeM3TestResources;
    every test runs, the live one on LiteRT's C API."""
    kit = tiny_bundle.parent / "kits/ios_assets"
    env = _kit_env(kit / "EdgeM3Resources", tiny_bundle.parent / "input_cases.json",
                   kit / "EdgeM3TestResources", lib=litert_lib)
    proc, summary = _swift_test(swift_test, "EdgeM3GoldenTests", **env)
    assert summary == (_test_count("EdgeM3GoldenTests"), 0, 0), proc.stdout[-6000:]
    assert proc.returncode == 0


@pytest.mark.parametrize("quant", ["int8", "int4"])
def test_swift_live_golden_real_weights(swift_test: SwiftTest, e5_bundles: dict[str, Path], litert_lib: Path,
                                        quant: str) -> None:
    """golden.json of the real-weights e5-small bundles run live through LiteRtCRunner, every
    signature, within the variant's device tolerance (EdgeM3Contract, from edge_m3/spec/recipes.py)."""
    proc, summary = _swift_test(swift_test, LIVE, **_kit_env(e5_bundles[quant], None, lib=litert_lib))
    assert summary == (1, 0, 0), proc.stdout[-6000:]


def test_swift_live_golden_fails_without_library_in_ci(swift_test: SwiftTest, tiny_bundle: Path) -> None:
    """No EDGE_M3_LITERT_LIB: a skip on a developer machine, a failure where CI requires Swift."""
    env = _kit_env(tiny_bundle, None)
    proc, summary = _swift_test(swift_test, LIVE, **env, CI="1")
    assert summary == (1, 0, 1) and proc.returncode != 0, proc.stdout[-3000:]
    assert "EDGE_M3_LITERT_LIB is not set" in proc.stdout
    quiet = {k: v for k, v in os.environ.items() if k not in ("CI", "EDGE_M3_REQUIRE_SWIFT", *BUNDLE_ENV)} | env
    proc = swift_test("--filter", LIVE, env=quiet)
    assert proc.returncode == 0 and "Executed 1 test, with 1 test skipped" in proc.stdout, proc.stdout[-3000:]


def test_swift_runner_bad_input(swift_test: SwiftTest, tiny_bundle: Path, litert_lib: Path) -> None:
    """LiteRtCRunner's one-line errors: a missing library, a file that is no library, a library
    without LiteRT's symbols, model files LiteRT cannot read (not a model, cut short), a manifest
    whose signatures differ from the model's; then every signature runs."""
    proc, summary = _swift_test(swift_test, "LiteRtCRunnerTests", **_kit_env(tiny_bundle, None, lib=litert_lib))
    assert summary == (_test_count("LiteRtCRunnerTests"), 0, 0), proc.stdout[-6000:]


def test_kit_embed_swift_matches_python(swift_build: Path, e5_bundles: dict[str, Path], litert_lib: Path,
                                        tmp_path: Path) -> None:
    """`kit_embed.sh swift` against `edge-m3 embed` (LiteRT, one thread each) on real weights:
    the same keys, ids and signatures exactly, the vectors within the variant's device tolerance."""
    import json

    import numpy as np

    from edge_m3.spec import RECIPES

    bundle = e5_bundles["int8"]
    texts = tmp_path / "texts.txt"
    texts.write_text("What is BGE-M3?\nLe modèle produit des vecteurs denses, lexicaux et multi-vecteurs "
                     "pour la recherche, dans plus de cent langues, à partir de textes courts ou longs.\n"
                     "深度学习 ✓ <mask>\n", encoding="utf-8")
    want = python_embed(bundle, texts, "--runtime", "litert", "--threads", "1")
    proc = subprocess.run([str(ROOT / "tools/kit/kit_embed.sh"), "swift", "--lib", str(litert_lib), str(bundle),
                           str(texts)], capture_output=True, text=True, timeout=300,
                          env=os.environ | {"EDGE_M3_SWIFT_EMBED": str(swift_build / "release/edge-m3-embed")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    kit = [json.loads(line) for line in proc.stdout.splitlines()]
    tol = RECIPES["int8"].device_tolerance
    assert len(kit) == len(want) == 3
    assert {w["signature"] for w in want} == {"embed_16", "embed_128"}  # both lengths
    for k, w in zip(kit, want, strict=True):
        assert list(k) == list(w) and k["input_ids"] == w["input_ids"] and k["signature"] == w["signature"]
        a, b = np.array(k["dense_vecs"]), np.array(w["dense_vecs"])
        assert float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) >= tol.dense_cosine_min
        assert np.abs(a - b).max() <= tol.max_abs
        lk, lw = k["lexical_weights"], w["lexical_weights"]
        assert all(abs(lk.get(t, 0) - lw.get(t, 0)) <= tol.max_abs for t in set(lk) | set(lw))
        assert np.abs(np.array(k["colbert_vecs"]) - np.array(w["colbert_vecs"])).max() <= tol.max_abs


def test_swift_golden_minilm(swift_test: SwiftTest, minilm_bundles: dict[str, Path], minilm_input_cases: Path,
                             litert_lib: Path) -> None:
    """all-MiniLM-L6-v2 int8 (BERT: kind `wordpiece`, heads ["dense"]): every golden test, the
    Python pipeline's answers to bad input, and live within the device tolerance."""
    env = _kit_env(minilm_bundles["int8"], minilm_input_cases, lib=litert_lib)
    proc, summary = _swift_test(swift_test, "EdgeM3GoldenTests", **env)
    assert summary == (_test_count("EdgeM3GoldenTests"), 0, 0), proc.stdout[-6000:]


@pytest.mark.parametrize("quant", MODERNBERT_QUANTS)
def test_swift_golden_modernbert(swift_test: SwiftTest, modernbert_bundles: dict[str, Path],
                                 modernbert_input_cases: Path, litert_lib: Path, quant: str) -> None:
    """A ModernBERT bundle (kind `byte-level-bpe`, heads ["dense"], a 128-token sliding window), fp32
    and int8: every golden test (ids from the kit's BpeTokenizer), the Python pipeline's answers to
    bad input, and live within the device tolerance at every signature, 200 (past the window)
    included: golden.json reaches each one (conftest `modernbert_bundles`)."""
    env = _kit_env(modernbert_bundles[quant], modernbert_input_cases, lib=litert_lib)
    proc, summary = _swift_test(swift_test, "EdgeM3GoldenTests", **env)
    assert summary == (_test_count("EdgeM3GoldenTests"), 0, 0), proc.stdout[-6000:]


def test_kit_embed_swift_minilm_matches_python(swift_build: Path, minilm_bundles: dict[str, Path],
                                               litert_lib: Path, tmp_path: Path) -> None:
    """`kit_embed.sh swift` against `edge-m3 embed` on MiniLM int8, every signature (the longest
    through truncation): ids and signature exact, dense_vecs within the device tolerance, no other head."""
    import json

    bundle = minilm_bundles["int8"]
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(MINILM_TEXTS) + "\n", encoding="utf-8")
    want = python_embed(bundle, texts, "--runtime", "litert", "--threads", "1")
    assert len({w["signature"] for w in want}) == len(MINILM_TEXTS)
    proc = subprocess.run([str(ROOT / "tools/kit/kit_embed.sh"), "swift", "--lib", str(litert_lib), str(bundle),
                           str(texts)], capture_output=True, text=True, timeout=300,
                          env=os.environ | {"EDGE_M3_SWIFT_EMBED": str(swift_build / "release/edge-m3-embed")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_kit_embeddings([json.loads(line) for line in proc.stdout.splitlines()], want, "int8")


@pytest.mark.parametrize(("args", "message"), [
    ("java-script B T", "usage: tools/kit/kit_embed.sh"),
    ("swift --lib /nonexistent/libLiteRt.so B T", "/nonexistent/libLiteRt.so: no such LiteRT library"),
    ("swift --lib {lib} /nonexistent T", "/nonexistent: not a bundle (no manifest.json)"),
    ("swift --lib {lib} {bundle} /nonexistent.txt", "/nonexistent.txt: not found"),
    ("swift --lib {lib} --repeats 0 {bundle} T", "--repeats 0: expected a whole number >= 1"),
    ("swift --lib {bundle}/golden.json {bundle} {bundle}/golden.json", "cannot load it as a library"),
])
def test_kit_embed_bad_input(swift_build: Path, tiny_bundle: Path, litert_lib: Path, args: str,
                             message: str) -> None:
    """One line on stderr naming the file or option, exit 2."""
    argv = args.format(lib=litert_lib, bundle=tiny_bundle).split()
    env = os.environ | {"EDGE_M3_SWIFT_EMBED": str(swift_build / "release/edge-m3-embed")}
    proc = subprocess.run([str(ROOT / "tools/kit/kit_embed.sh"), *argv], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.startswith(("kit_embed", "usage"))]) == 1


def test_swift_golden_replay_catches_drift(swift_test: SwiftTest, drifted_bundle: tuple[Path, str],
                                           tiny_bundle: Path, litert_lib: Path) -> None:
    bundle, key = drifted_bundle
    env = _kit_env(bundle, tiny_bundle.parent / "input_cases.json", lib=litert_lib)
    proc, (executed, _, failures) = _swift_test(swift_test, "EdgeM3GoldenTests", **env)
    assert proc.returncode != 0 and executed == _test_count("EdgeM3GoldenTests")
    assert failures >= 3
    assert f"lexical_weights[{key}]" in proc.stdout
    assert "input_ids" in proc.stdout and "colbert_vecs rows" in proc.stdout


@pytest.mark.slow
def test_swift_core_trimmed_vocabulary(swift_test: SwiftTest, trimmed_bundle: Path, litert_lib: Path) -> None:
    """Trimmed-table rows for the model and for padding, original ids as lexical keys (live too)."""
    env = _kit_env(trimmed_bundle, trimmed_bundle.parent / "input_cases.json", lib=litert_lib)
    proc, summary = _swift_test(swift_test, "EdgeM3GoldenTests", **env)
    assert summary == (_test_count("EdgeM3GoldenTests"), 0, 0), proc.stdout[-6000:]


def test_tflite_runner_typechecks(swift: Path, tmp_path: Path) -> None:
    """TFLiteRunner.swift against the TensorFlowLite and TensorFlowLiteC stand-ins (ios_assets/ci/stubs/,
    compiled as the pod is: Swift 5 mode) in both ways an app builds it, each in Swift 6 mode with
    complete concurrency checking and no warnings, once plain and once with a new Xcode 26 app
    target's settings (default isolation MainActor, approachable concurrency): the kit's sources
    inside the app target, and the file beside the EdgeM3 package. About 15 s."""
    from tests.test_swift_ios_binding import APP_TARGET, SWIFT6, standin_sources

    swiftc = str(swift.with_name("swiftc"))
    sources = sorted(map(str, SOURCES.rglob("*.swift")))
    stub = tmp_path / "stub"
    # module.modulemap + header: TensorFlowLiteC's stand-in, and libsqlite3 (CSQLite, Linux)
    c_module = ["-I", str(IOS / "ci/stubs/TensorFlowLiteC"), "-I", str(IOS / "Sources/CSQLite")]
    package = tmp_path / "package"
    steps = [
        [swiftc, "-emit-module", "-parse-as-library", "-swift-version", "5", "-module-name", "TensorFlowLite",
         *c_module, "-emit-module-path", str(stub / "TensorFlowLite.swiftmodule"),
         *standin_sources("TensorFlowLite.swift")],
        # The package without TensorFlowLite (TFLiteRunner.swift compiles to nothing) ...
        [swiftc, "-emit-module", *SWIFT6, "-module-name", "EdgeM3", "-I", str(IOS / "Sources/CSQLite"),
         "-emit-module-path", str(package / "EdgeM3.swiftmodule"), *sources],
    ]
    for app in ([], APP_TARGET):
        steps += [
            # The sources in the app target: TensorFlowLite(C) visible, no EdgeM3 module.
            [swiftc, "-typecheck", *SWIFT6, *app, "-module-name", "YourApp", "-I", str(stub), *c_module,
             *sources],
            # ... and TFLiteRunner.swift in the app target beside the package: public API only.
            [swiftc, "-typecheck", *SWIFT6, *app, "-module-name", "YourApp", "-I", str(package), "-I",
             str(stub), *c_module, str(SOURCES / "TFLiteRunner.swift")],
        ]
    stub.mkdir()
    package.mkdir()
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, f"{' '.join(cmd[:8])} ...:\n{proc.stdout}\n{proc.stderr}"


def test_tflite_runner_weight_cache() -> None:
    """The runner packs weights once per model (README "Memory"): its own XNNPACK delegate with a
    cache file named by the contract, the pod's XNNPACK only for `.off`, device threads by default."""
    runner = (SOURCES / "TFLiteRunner.swift").read_text(encoding="utf-8")
    for needed in ("TfLiteXNNPackDelegateCreate(", "TfLiteXNNPackDelegateDelete(", "weight_cache_file_path",
                   "weightCache.open(modelSha256:", "options.isXNNPackEnabled = weightCache == .off",
                   "delegates: [delegate]"):
        assert needed in runner, needed
    # The cache file's name and the in-memory cache: one definition for both phone runners.
    shared = (SOURCES / "XNNPackWeightCache.swift").read_text(encoding="utf-8")
    assert "EdgeM3Contract.weightCacheName(" in shared and "EdgeM3Contract.inMemoryWeightCache" in shared
    assert "weightCache.open(modelSha256:" in (SOURCES / "LiteRTRunner.swift").read_text(encoding="utf-8")
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
        # The pod's C API (the XNNPACK delegate) in the phone runner alone, behind canImport(TensorFlowLite);
        # dlopen (the C library) in the desktop runner alone.
        c_api = {"TensorFlowLiteC"} if p.name == "TFLiteRunner.swift" else set()
        # LiteRT's Swift package in its runner alone, behind canImport(LiteRT).
        c_api |= {"LiteRT"} if p.name == "LiteRTRunner.swift" else set()
        c_api |= {"Darwin", "Glibc"} if p.name == "LiteRtCRunner.swift" else set()
        # The platform's SQLite in the writable index's wrapper alone (Apple's module, or Linux's CSQLite).
        c_api |= {"SQLite3", "CSQLite"} if p.name == "SQLiteDB.swift" else set()
        assert imports <= allowed | c_api, (p, imports)
    lines = (SOURCES / "TFLiteRunner.swift").read_text(encoding="utf-8").splitlines()
    code = [line for line in lines if line.strip() and not line.lstrip().startswith("//")]
    assert code[0] == "#if canImport(TensorFlowLite)" and code[-1] == "#endif", "all of it behind canImport"
    readme = (IOS / "README.md").read_text(encoding="utf-8")
    assert ".package(path:" in readme and ".package(url:" in readme and "TFLiteRunner.swift" in readme
    # The CocoaPods runtime is what the default variant needs (edge_m3.spec), in the snippet and README.
    from edge_m3.builder.options import DEFAULT_QUANT
    from edge_m3.spec import RECIPES

    oldest = ".".join(RECIPES[DEFAULT_QUANT].oldest_tflite.split(".")[:2])
    pod = f"pod 'TensorFlowLiteSwift', '~> {oldest}'"
    assert pod in (IOS / "Podfile.snippet").read_text(encoding="utf-8") and pod in readme

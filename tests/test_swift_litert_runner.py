"""The iOS kit on LiteRT's Swift package (ios_assets/Sources/EdgeM3/LiteRTRunner.swift, `#if
canImport(LiteRT)`) compiled and run on Linux against a stand-in for LiteRT's Swift API
(ios_assets/ci/stubs/LiteRT.swift and its C module CLiteRT/, written from
google-ai-edge/LiteRT's litert/swift/Sources): its "model" is the real tiny bundle's signatures
as LiteRT reports them, with raw outputs recorded from LiteRT on the same file, so the kit's
embedding through LiteRTRunner must equal `edge-m3 embed`'s. Also: the kit type-checks with either
runtime, both or neither, in Swift 6 strict mode and as a new Xcode 26 app target compiles it,
warnings as errors; every LiteRT status and every failure on the kit's path comes out as the
kit's typed error (EdgeM3Error.Kind); an iOS app target that links no runtime gets one
compile-time error.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.readme import swift_snippet
from tests.test_swift_ios_binding import (
    APP_TARGET,
    BAD_MODELS,
    SWIFT6,
    TEXT,
    _describe,
    _error,
    _kit_sources,
    _run,
    assert_embeds_like,
    recorded_call,
    spoiled,
    standin,
    standin_sources,
)

pytestmark = pytest.mark.models  # builds a bundle and compiles the kit

ROOT = Path(__file__).resolve().parents[1]
IOS = ROOT / "ios_assets"
SOURCES = IOS / "Sources/EdgeM3"
STUBS = IOS / "ci/stubs"
MODEL_ENV = "EDGE_M3_LITERT_STANDIN_MODEL"
FAIL_ENV = "EDGE_M3_LITERT_STANDIN_FAIL"
ACCELERATORS_ENV = "EDGE_M3_LITERT_STANDIN_ACCELERATORS"
C_MODULES = ["-I", str(STUBS / "TensorFlowLiteC"), "-I", str(STUBS / "CLiteRT"),
             "-I", str(IOS / "Sources/CSQLite")]
NO_RUNTIME = "EdgeM3: no model runtime."

__all__ = ["standin"]  # the TensorFlowLite stand-in fixture, for the both-runtimes build


def _model_file(bundle: Path) -> str:
    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    if "models" not in manifest:
        return next(p for p in bundle.glob("*.tflite")).name
    return next(m["file"] for m in manifest["models"] if m["format"] == "tflite")


def _statuses() -> dict[str, int]:
    """LiteRtStatus of the stand-in's CLiteRT.h (litert_common.h's codes): name -> value."""
    header = (STUBS / "CLiteRT/CLiteRT.h").read_text(encoding="utf-8")
    enum = header[:header.index("} LiteRtStatus;")]
    return {name: int(value) for name, value in re.findall(r"^\s*(kLiteRtStatus\w+) = (\d+),", enum, re.M)}


@pytest.fixture(scope="module")
def litert_standin(swift: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The LiteRT stand-in module, compiled as LiteRT's Package.swift compiles the real one
    (tools 5.9: Swift 5 mode, no strict concurrency): the directory holding it and its object."""
    out = tmp_path_factory.mktemp("litert_standin")
    _run([str(swift.with_name("swiftc")), "-emit-module", "-emit-object", "-wmo", "-parse-as-library",
          "-swift-version", "5", "-module-name", "LiteRT", "-I", str(STUBS / "CLiteRT"),
          "-emit-module-path", str(out / "LiteRT.swiftmodule"), "-o", str(out / "LiteRT.o"),
          *standin_sources("LiteRT.swift")], out)
    return out


def _check_exe(swift: Path, out: Path, modules: list[Path], objects: list[Path]) -> Path:
    """ci/LiteRTRunnerCheck.swift with every kit source in one app-target module (Swift 6, the Xcode 26
    app defaults, warnings as errors), linked with the given stand-ins."""
    exe = out / "litert-runner-check"
    _run([str(swift.with_name("swiftc")), "-Onone", *SWIFT6, *APP_TARGET, "-parse-as-library",
          "-module-name", "YourApp", *[a for m in modules for a in ("-I", str(m))], *C_MODULES,
          "-o", str(exe), *_kit_sources(), str(IOS / "ci/LiteRTRunnerCheck.swift"),
          str(IOS / "ci/RunnerCheckSupport.swift"), *map(str, objects)], out)
    return exe


@pytest.fixture(scope="module")
def litert_check(swift: Path, litert_standin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The check program of an app that links LiteRT alone."""
    return _check_exe(swift, tmp_path_factory.mktemp("litert_check"), [litert_standin],
                      [litert_standin / "LiteRT.o"])


@pytest.fixture(scope="module")
def both_check(swift: Path, litert_standin: Path, standin: Path,
               tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The check program of an app that links LiteRT and TensorFlowLiteSwift."""
    return _check_exe(swift, tmp_path_factory.mktemp("both_check"), [litert_standin, standin],
                      [litert_standin / "LiteRT.o", standin / "TensorFlowLite.o", standin / "tflitec_stub.o"])


def _check(exe: Path, model: dict, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    description = tmp_path / f"model-{len(list(tmp_path.iterdir()))}.json"
    description.write_text(json.dumps(model), encoding="utf-8")
    child = {k: v for k, v in os.environ.items() if k not in (FAIL_ENV, ACCELERATORS_ENV)}
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120,
                          env=child | {MODEL_ENV: str(description)} | env)


@pytest.fixture(scope="module")
def recorded(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    """`edge-m3 embed`'s answer for TEXT on LiteRT, and the model described with that call recorded."""
    return recorded_call(tiny_bundle, tmp_path_factory.mktemp("texts"))


@pytest.mark.parametrize("linked", ["litert", "both"])
def test_litert_runner_embeds_like_python(litert_check: Path, both_check: Path, tiny_bundle: Path,
                                          recorded: tuple[dict, dict], tmp_path: Path, linked: str) -> None:
    """LiteRTRunner binds by signature name: the kit's embedding through the stand-in (raw outputs
    recorded from LiteRT on the same file) equals `edge-m3 embed`'s on LiteRT, through
    `EdgeM3Embedder(directory:)` with LiteRT alone and `runtime: LiteRTRunner.self` beside
    TensorFlowLite; the CPU accelerator gets the threads and the weight cache path."""
    want, model = recorded
    exe = litert_check if linked == "litert" else both_check
    for cache in ("off", "memory", f"file:{tmp_path / 'cache'}"):
        proc = _check(exe, model, tmp_path, "embed", str(tiny_bundle), TEXT, cache)
        assert proc.returncode == 0, proc.stderr
        got = json.loads(proc.stdout)
        assert_embeds_like(got, want)
        compiled = got["compiled_with"]
        assert compiled.startswith("accelerators 1; xnnpack: num_threads = 2\n"), compiled  # CPU, 2 threads
        if cache == "off":
            assert "weight_cache_file_path" not in compiled
        elif cache == "memory":
            assert 'weight_cache_file_path = ":memory"' in compiled  # Linux: XNNPACK's in-memory cache
        else:
            path = re.search(r'weight_cache_file_path = "([^"]+)"', compiled)
            assert path and Path(path[1]).parent == tmp_path / "cache", compiled
            assert path[1].endswith(".xnnpack_cache"), compiled


@pytest.mark.parametrize(("change", "message"),
                         [*BAD_MODELS, ("unreadable-dtype", "a type LiteRT's Swift API cannot read")])
def test_litert_runner_bad_model(litert_check: Path, tiny_bundle: Path, tmp_path: Path, change: str,
                                 message: str) -> None:
    """A model whose names, shapes or dtypes differ from manifest.json: one typed error line."""
    # float8_e4m3fn: LiteRT's C enum has it, its Swift ElementType not.
    model = spoiled(_describe(tiny_bundle), change, "float8_e4m3fn")
    line = _error(_check(litert_check, model, tmp_path, "embed", str(tiny_bundle), TEXT))
    assert line.startswith("error signatureMismatch:") and message in line, line


# Each step of the kit's path where LiteRT's native code can fail, with the status it gives there
# (litert/runtime/compiled_model.cc, litert/core/util/flatbuffer_tools.cc, litert/c/*.cc).
FAILURES = [
    ("LiteRtCreateEnvironment", "RuntimeFailure", "cannot create the environment: Runtime failure"),
    ("LiteRtCreateOptions", "MemoryAllocationFailure", "options: Memory allocation failure"),
    ("LiteRtSetOptionsHardwareAccelerators", "InvalidArgument", "accelerators: Invalid argument"),
    ("LiteRtCreateOpaqueOptions", "InvalidArgument", "CPU options: Invalid argument"),
    ("LiteRtAddOpaqueOptions", "InvalidArgument", "CPU options: Invalid argument"),
    ("LiteRtCreateModelFromFile", "FileIO", "cannot open model.tflite: File I/O error"),
    ("LiteRtCreateModelFromFile", "InvalidFlatbuffer", "cannot open model.tflite: Invalid flatbuffer"),
    ("LiteRtCreateCompiledModel", "Compilation", "cannot open model.tflite: Compilation error"),
    ("LiteRtCreateCompiledModel", "Unsupported", "cannot open model.tflite: Unsupported operation"),
    ("LiteRtCreateCompiledModel", "DynamicLoading", "cannot open model.tflite: Dynamic loading error"),
    ("LiteRtGetNumModelSignatures", "InvalidArgument", "signatures of model.tflite: Invalid argument"),
    ("LiteRtSetCompiledModelCancellationFunction", "InvalidArgument",
     "cancellation function: Invalid argument"),
    ("LiteRtGetRankedTensorType", "Unsupported", "Unsupported operation"),
    ("LiteRtGetCompiledModelInputBufferRequirements", "NotFound", "buffers of signature"),
    ("LiteRtCreateManagedTensorBuffer", "MemoryAllocationFailure", "Memory allocation failure"),
    ("LiteRtCreateManagedTensorBuffer", "Unsupported", "Unsupported operation"),
    ("LiteRtLockTensorBuffer", "Unsupported", "Unsupported operation"),
    # "Failed to allocate tensors" and "Failed to invoke" are both kLiteRtStatusErrorRuntimeFailure.
    ("LiteRtRunCompiledModel", "RuntimeFailure", "Runtime failure"),
    ("LiteRtRunCompiledModel", "MissingInputTensor", "Missing input tensor"),
]


@pytest.mark.parametrize(("call", "status", "message"), FAILURES)
def test_litert_failure_is_a_typed_error(litert_check: Path, recorded: tuple[dict, dict], tiny_bundle: Path,
                                         tmp_path: Path, call: str, status: str, message: str) -> None:
    """LiteRT failing at one step of the kit's path: one `runtimeFailed` line naming the step and the
    status as LiteRtError describes it, never a crash."""
    _, model = recorded
    line = _error(_check(litert_check, model, tmp_path, "embed", str(tiny_bundle), TEXT,
                         **{FAIL_ENV: f"{call}:{_statuses()['kLiteRtStatusError' + status]}"}))
    tflite = _model_file(tiny_bundle)
    assert line.startswith("error runtimeFailed: LiteRT: "), line
    assert message.replace("model.tflite", tflite) in line, line


def test_every_litert_status_is_a_typed_error(litert_check: Path, recorded: tuple[dict, dict],
                                              tiny_bundle: Path, tmp_path: Path) -> None:
    """Every status of litert_common.h from the run: cancelled is `.cancelled`, each other one
    `.runtimeFailed` with its own LiteRtError description (30 errors, 30 sentences)."""
    _, model = recorded
    statuses = _statuses()
    assert len(statuses) == 31 and statuses["kLiteRtStatusOk"] == 0
    sentences = set()
    for name, value in statuses.items():
        if value == 0:
            continue
        line = _error(_check(litert_check, model, tmp_path, "embed", str(tiny_bundle), TEXT,
                             **{FAIL_ENV: f"LiteRtRunCompiledModel:{value}"}))
        kind = "cancelled" if name == "kLiteRtStatusCancelled" else "runtimeFailed"
        assert line.startswith(f"error {kind}: LiteRT: run of embed_"), (name, line)
        sentences.add(line.rsplit(": ", 1)[1])
    assert len(sentences) == 30 and "Unknown error" in sentences, sorted(sentences)


def test_litert_gpu_without_its_accelerator(litert_check: Path, recorded: tuple[dict, dict], tiny_bundle: Path,
                                            tmp_path: Path) -> None:
    """`.gpu` on a LiteRT build without its GPU accelerator: the compile's Compilation error as one
    typed line naming the GPU (no silent CPU run); with the accelerator registered, the GPU alone."""
    want, model = recorded
    line = _error(_check(litert_check, model, tmp_path, "embed", str(tiny_bundle), TEXT, "off", "gpu"))
    assert line.startswith("error runtimeFailed: LiteRT: cannot compile") and "for the GPU" in line, line
    assert line.endswith(": Compilation error"), line
    proc = _check(litert_check, model, tmp_path, "embed", str(tiny_bundle), TEXT, "off", "gpu",
                  **{ACCELERATORS_ENV: "cpu,gpu"})
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["compiled_with"].startswith("accelerators 2;") and got["input_ids"] == want["input_ids"], got


def test_litert_runner_closed_and_cancelled(litert_check: Path, recorded: tuple[dict, dict], tiny_bundle: Path,
                                            tmp_path: Path) -> None:
    """A closed runner, a Task cancelled before the model call and one cancelled during it, and a
    missing model description: their own typed errors."""
    _, model = recorded
    line = _error(_check(litert_check, model, tmp_path, "closed", str(tiny_bundle)))
    assert line.startswith("error runnerClosed:") and "closed" in line, line
    line = _error(_check(litert_check, model, tmp_path, "cancelled", str(tiny_bundle), TEXT))
    assert line.startswith("error cancelled:") and "before the model call of text 1 of 2" in line, line
    # Cancelled while the model call is under way (a gate holds it): LiteRT's cancellation function,
    # which the runner sets from the embedder's Task, stops it with kLiteRtStatusCancelled.
    line = _error(_check(litert_check, model, tmp_path, "cancel-in-call", str(tiny_bundle), TEXT))
    assert line.startswith("error cancelled: LiteRT: run of embed_") and "during the model call" in line, line
    env = {k: v for k, v in os.environ.items() if k not in (MODEL_ENV, FAIL_ENV)}
    proc = subprocess.run([str(litert_check), "embed", str(tiny_bundle), TEXT], capture_output=True, text=True,
                          timeout=120, env=env)
    line = _error(proc)
    assert line.startswith("error runtimeFailed: LiteRT: cannot open") and "Invalid flatbuffer" in line, line


def test_kit_typechecks_with_either_runtime(swift: Path, litert_standin: Path, standin: Path,
                                            tmp_path: Path) -> None:
    """The kit's sources in an app target linking LiteRT, TensorFlowLite, both, or neither (a
    Linux/macOS build: the desktop runner), and each runner file beside the EdgeM3 package: Swift 6
    strict mode, plain and with a new Xcode 26 app target's settings, no warnings."""
    swiftc = str(swift.with_name("swiftc"))
    package = tmp_path / "package"
    package.mkdir()
    _run([swiftc, "-emit-module", *SWIFT6, "-module-name", "EdgeM3", "-I", str(IOS / "Sources/CSQLite"),
          "-emit-module-path", str(package / "EdgeM3.swiftmodule"), *_kit_sources()], tmp_path)
    runtimes = {"litert": [litert_standin], "tflite": [standin], "both": [litert_standin, standin],
                "neither": []}
    # The README's iOS quickstart snippet, in the app target that links LiteRT (tests/test_readme.py).
    readme = tmp_path / "ReadmeQuickstart.swift"
    readme.write_text(swift_snippet(), encoding="utf-8")
    checks = []
    for app in ([], APP_TARGET):
        for name, modules in runtimes.items():
            includes = [a for m in modules for a in ("-I", str(m))]
            typecheck = [swiftc, "-typecheck", *SWIFT6, *app, "-module-name", "YourApp"]
            snippet = [str(readme)] if name == "litert" else []
            checks.append([*typecheck, *includes, *C_MODULES, *_kit_sources(), *snippet])
            for runner in ("LiteRTRunner.swift", "TFLiteRunner.swift"):
                checks.append([*typecheck, "-I", str(package), *includes, *C_MODULES, str(SOURCES / runner)])
    # 24 independent compiles, one per core at a time (each asserts its own success).
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for done in [pool.submit(_run, cmd, tmp_path) for cmd in checks]:
            done.result()


def test_no_runtime_on_ios_is_one_compile_error(swift: Path, tmp_path: Path) -> None:
    """An iOS app target (the real target triple; `-parse-stdlib`: no iOS SDK here, and with no
    runtime nothing else in the runner files is active) with neither TensorFlowLite nor LiteRT: one
    error, the kit's sentence, whether it compiles the kit's sources or one runner file beside the
    EdgeM3 package; none in the package's own build (SWIFT_PACKAGE) or on macOS (LiteRtCRunner)."""
    swiftc = str(swift.with_name("swiftc"))
    ios = ["-target", "arm64-apple-ios15.0", "-parse-stdlib"]
    runners = [str(SOURCES / "TFLiteRunner.swift"), str(SOURCES / "LiteRTRunner.swift")]
    beside = tmp_path / "beside"
    beside.mkdir()
    (tmp_path / "empty.swift").write_text("", encoding="utf-8")
    _run([swiftc, "-emit-module", *ios, "-module-name", "EdgeM3", "-emit-module-path",
          str(beside / "EdgeM3.swiftmodule"), str(tmp_path / "empty.swift")], tmp_path)

    def errors(*args: str) -> list[str]:
        proc = subprocess.run([swiftc, "-typecheck", *args], capture_output=True, text=True, timeout=120,
                              cwd=tmp_path)
        found = re.findall(r"^\S+\.swift:\d+:\d+: error: (.*)$", proc.stderr, re.M)
        assert (proc.returncode != 0) == bool(found), proc.stderr
        return found

    for case in ([*ios, *runners], *([*ios, "-I", str(beside), runner] for runner in runners)):
        found = errors(*case)
        assert len(found) == 1 and found[0].startswith(NO_RUNTIME) and "LiteRT" in found[0], (case, found)
        assert "TensorFlowLiteSwift" in found[0]
    assert errors(*ios, "-DSWIFT_PACKAGE", *runners) == []
    assert errors("-target", "arm64-apple-macosx12.0", "-parse-stdlib", *runners) == []

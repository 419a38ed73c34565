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
    from tests.support.synthetic import make_checkpoint

    return make_checkpoint(tmp_path_factory.mktemp("tiny_ckpt"), seed=0)


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
    """fp32 and int8 TFLite bundles of the tiny checkpoint at lengths 8 and 16 (what `check`
    replays, here and on the emulated aarch64 rig). Treat as read-only."""
    from edge_m3.cli import main

    out = tmp_path_factory.mktemp("tiny_bundles")
    assert main(["build", "--checkpoint", str(tiny_ckpt), "--quant", "fp32,int8", "--seq-lens", "8,16",
                 "--out", str(out / "b-{quant}"), "--kits", "none", "--no-self-check", "-q"]) == 0
    return {q: out / f"b-{q}" for q in ("fp32", "int8")}

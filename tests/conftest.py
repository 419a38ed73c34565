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

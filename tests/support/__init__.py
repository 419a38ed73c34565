"""Shared helpers of the tests."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def blocked_imports_env(tmp_path: Path, blocked: Iterable[str]) -> dict[str, str]:
    """The environment of a child process in which these top-level packages cannot be imported
    (a sitecustomize on PYTHONPATH, so the CLI's own children are blocked too): what a device
    with only `pip install edge-m3` has."""
    site = Path(tmp_path) / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {tuple(blocked)!r}:\n"
        "            raise ImportError('not in the runtime install: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n")
    root = Path(__file__).resolve().parents[2]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(root)])}


def python_embed(bundle: Path, texts: Path, *args: str) -> list[dict]:
    """`edge-m3 embed BUNDLE --texts FILE` (the one-text-per-call pipeline, JSON lines on stdout,
    with each text's `signature`): what the kits' `kit_embed.sh` output is held against."""
    import contextlib
    import io
    import json

    from edge_m3.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["embed", str(bundle), "--texts", str(texts), *args]) == 0
    return [json.loads(line) for line in buf.getvalue().splitlines()]

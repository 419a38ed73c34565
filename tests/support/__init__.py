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


# Texts whose all-MiniLM-L6-v2 ids land on each of its default signatures (16 ... 256, the last one
# truncated), for the kits' live comparisons with `edge-m3 embed`.
MINILM_TEXTS = (
    "Hello world",
    "Le modèle tourne sur le téléphone, sans serveur, même hors ligne, pour tout le monde.",
    "検索は端末の中で。 " + "The quick brown fox jumps over the lazy dog. " * 4,
    "Embeddings on a phone: " + "tokenize, pad, run the model, pool the tokens and normalise. " * 6,
    "word " * 300,
)


def assert_kit_embeddings(got: list[dict], want: list[dict], quant: str) -> None:
    """A kit's `kit_embed.sh` lines against `edge-m3 embed`'s: the same keys (the bundle's heads),
    ids and signature exactly, every head within the variant's device tolerance."""
    import numpy as np

    from edge_m3.spec import RECIPES

    tol = RECIPES[quant].device_tolerance
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert set(g) == set(w) and (g["input_ids"], g["signature"]) == (w["input_ids"], w["signature"])
        a, b = np.asarray(g["dense_vecs"]), np.asarray(w["dense_vecs"])
        assert a @ b / np.linalg.norm(a) / np.linalg.norm(b) >= tol.dense_cosine_min
        assert np.abs(a - b).max() <= tol.max_abs
        if "lexical_weights" in w:
            lg, lw = g["lexical_weights"], w["lexical_weights"]
            assert all(abs(lg.get(k, 0.0) - lw.get(k, 0.0)) <= tol.max_abs for k in set(lg) | set(lw))
        if "colbert_vecs" in w:
            assert np.abs(np.asarray(g["colbert_vecs"]) - np.asarray(w["colbert_vecs"])).max() <= tol.max_abs

"""What the harness commands take in: users' texts, the built-in retrieval set, the ship
thresholds of a variant."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from edge_m3.common.files import read_lines
from edge_m3.contract import recipe
from edge_m3.errors import EdgeM3Error


def read_texts(path: Path) -> list[str]:
    """`--texts`: one text per line, UTF-8 (see edge_m3.common.files). An empty file is an
    error: a wrong file should not pass unnoticed (embed would have nothing to do, verify
    would gate on the built-in set alone)."""
    texts = read_lines(path, "--texts")
    if not texts:
        raise EdgeM3Error(f"--texts {path}: no text in the file (one text per line)")
    return texts


def retrieval_set() -> dict[str, Any]:
    """The built-in multilingual queries and passages (edge_m3/data/retrieval_set.json)."""
    return json.loads(resources.files("edge_m3").joinpath("data/retrieval_set.json")
                      .read_text("utf-8"))


def load_thresholds(path: Path | None, quant: str) -> tuple[dict[str, float], str]:
    """One variant's ship thresholds, and where they came from: a user's file (`--thresholds`,
    JSON `{variant: {figure_min|figure_max: value}}`), else the variant's own (edge_m3.contract)."""
    from edge_m3.harness.metrics import check_limits

    if path is None:
        return check_limits(recipe(quant, "manifest.json: quant").thresholds,
                            f"edge_m3.contract ({quant})"), "edge_m3.contract"
    source = str(path)
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise EdgeM3Error(f"--thresholds {source}: unreadable ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get(quant), dict):
        raise EdgeM3Error(f"--thresholds {source}: no entry for variant '{quant}'")
    return check_limits(data[quant], f"--thresholds {source} ({quant})"), source

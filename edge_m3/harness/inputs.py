"""What the harness commands take in beside users' texts (edge_m3.common.files.read_texts): the
built-in retrieval set, the ship thresholds of a variant."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from edge_m3.errors import OptionError
from edge_m3.spec import QuantRecipe


def retrieval_set() -> dict[str, Any]:
    """The built-in multilingual queries and passages (edge_m3/data/retrieval_set.json)."""
    return json.loads(resources.files("edge_m3").joinpath("data/retrieval_set.json")
                      .read_text("utf-8"))


def load_thresholds(path: Path | None, recipe: QuantRecipe,
                    field: str = "thresholds") -> tuple[dict[str, float], str]:
    """One variant's ship thresholds, and where they came from: a user's file (option `field`,
    JSON `{variant: {figure_min|figure_max: value}}`), else the variant's own (edge_m3.spec)."""
    from edge_m3.harness.metrics import check_limits

    quant = recipe.name
    if path is None:
        return check_limits(recipe.thresholds, f"edge_m3.spec ({quant})"), "edge_m3.spec"
    source = str(path)
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise OptionError(field, source, f"unreadable ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get(quant), dict):
        raise OptionError(field, source, f"no entry for variant '{quant}'")
    return check_limits(data[quant], f"{source} ({quant})", field), source

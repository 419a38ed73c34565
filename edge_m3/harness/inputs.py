"""What the harness commands take in: users' texts, the built-in retrieval set, the ship
thresholds of a variant, and the runtimes to check."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from edge_m3.bundle import Bundle
from edge_m3.common.files import read_lines
from edge_m3.contract import recipe
from edge_m3.errors import EdgeM3Error


def read_texts(path: Path) -> list[str]:
    """`--texts`: one text per line, UTF-8 (see edge_m3.common.files)."""
    return read_lines(path, "--texts")


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


def select_runtimes(bundle: Bundle, wanted: str | None, option: str = "--runtime") -> list[str]:
    """The runtimes to check: those asked for, else every installed one the bundle can use."""
    from edge_m3.common.options import split_list
    from edge_m3.runtime.runners import (
        RUNTIME_PACKAGES,
        RUNTIMES,
        TFLITE_RUNTIMES,
        available_runtimes,
        format_of,
    )

    formats = bundle.manifest.formats
    have = available_runtimes()
    if not wanted:  # skip what the build's self-check saw fail (int8 on tflite-runtime 2.14)
        failed = {rt for m in bundle.manifest.models for rt, res in m.self_check.items()
                  if str(res).startswith("FAILED")}
        out = [r for r in TFLITE_RUNTIMES if "tflite" in formats and r in have and r not in failed]
        if "onnx" in formats and "onnxruntime" in have:
            out.append("onnxruntime")
        if not out:
            package = RUNTIME_PACKAGES["litert" if "tflite" in formats else "onnxruntime"]
            raise EdgeM3Error(f"{bundle.path}: no installed runtime can run this bundle "
                              f"(formats {sorted(formats)}): pip install {package}")
        return out
    chosen = split_list(wanted, option)
    for r in chosen:
        if r not in RUNTIMES:
            raise EdgeM3Error(f"{option} {r}: unknown (choose from {', '.join(RUNTIMES)})")
        if r not in have:
            raise EdgeM3Error(f"{option} {r}: not installed (pip install {RUNTIME_PACKAGES[r]})")
        if format_of(r) not in formats:
            raise EdgeM3Error(f"{option} {r}: {bundle.path} has no {format_of(r)} model")
    return chosen



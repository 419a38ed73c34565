"""golden.json: a dozen multilingual texts through the device pipeline, raw and post-processed.

Apps' tests replay it (ids, signature and post-processing exactly; live outputs within the
variant's device tolerance), and so do the kits' JVM and Swift checks in CI.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from edge_m3.bundle import Bundle
from edge_m3.contract import DEFAULT_MODE_WEIGHTS, RESULT_OUTPUTS, SCORE_MODES, mode_signals
from edge_m3.runtime.pipeline import DevicePipeline, to_jsonable
from edge_m3.runtime.registry import of_format


def golden_texts() -> list[str]:
    text = resources.files("edge_m3").joinpath("data/golden_texts.txt").read_text("utf-8")
    return [line for line in text.split("\n") if line]


def make_golden(bundle: Bundle, quant: str) -> dict[str, Any]:
    """Every golden text through the bundle's first model, with its format's preferred
    runtime where installed (LiteRT for TFLite)."""
    fmt = bundle.manifest.models[0].format
    runtimes = of_format(fmt)
    runtime = next((r for r in runtimes if r.version() is not None), runtimes[-1])
    pipe = DevicePipeline(bundle, runtime, threads=1, fmt=fmt)
    cases = []
    for text in golden_texts():
        res = pipe.embed(text)
        case = {"text": text, "seq_len": res["seq_len"], **to_jsonable(res, raw=True)}
        cases.append(case)
    return {"schema_version": 1, "quant": quant, "model_file": pipe.entry.file,
            "runtime": runtime.name, "cases": cases, "scores": golden_scores(cases)}


# weights_for_different_modes of the golden scores besides compute_score's default: uneven, so a
# kit that swaps two weights or normalises by the wrong sum fails.
GOLDEN_WEIGHTS = (0.4, 0.2, 0.4)


def golden_scores(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every mode's score between pairs of cases (docs/bundle-format.md): each case with the next
    and with itself under the default weights, with the one after next under GOLDEN_WEIGHTS.
    Computed from the cases' JSON fields, which is what a kit reads back."""
    from edge_m3.retrieval.scores import compute_score

    n = len(cases)
    modes = [m for m in SCORE_MODES
             if all(RESULT_OUTPUTS[s] in c for c in cases for s in mode_signals(m))]
    out = []
    for i in range(n):
        for j, weights in (((i + 1) % n, DEFAULT_MODE_WEIGHTS), (i, DEFAULT_MODE_WEIGHTS),
                           ((i + 2) % n, GOLDEN_WEIGHTS)):
            scores = compute_score(cases[i], cases[j], weights, modes) if modes else {}
            out.append({"query": i, "passage": j, "weights": list(weights), **scores})
    return out

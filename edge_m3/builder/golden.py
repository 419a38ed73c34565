"""golden.json: a dozen multilingual texts through the device pipeline, raw and post-processed.

Apps' tests replay it (ids, signature and post-processing exactly; live outputs within the
variant's device tolerance), and so do the kits' JVM and Swift checks in CI.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from edge_m3.bundle import Bundle
from edge_m3.retrieval.scores import golden_scores
from edge_m3.runtime.pipeline import DevicePipeline, to_jsonable
from edge_m3.runtime.registry import of_format


def golden_texts() -> list[str]:
    text = resources.files("edge_m3").joinpath("data/golden_texts.txt").read_text("utf-8")
    return [line for line in text.split("\n") if line]


def make_golden(bundle: Bundle, quant: str, texts: list[str] | None = None) -> dict[str, Any]:
    """Every golden text (`texts`, default golden_texts()) through the bundle's first model, with
    its format's preferred runtime where installed (LiteRT for TFLite)."""
    fmt = bundle.manifest.models[0].format
    runtimes = of_format(fmt)
    runtime = next((r for r in runtimes if r.version() is not None), runtimes[-1])
    pipe = DevicePipeline(bundle, runtime, threads=1, fmt=fmt)
    cases = []
    for text in golden_texts() if texts is None else texts:
        res = pipe.embed(text)
        case = {"text": text, "seq_len": res["seq_len"], **to_jsonable(res, raw=True)}
        cases.append(case)
    return {"schema_version": 1, "quant": quant, "model_file": pipe.entry.file,
            "runtime": runtime.name, "cases": cases, "scores": golden_scores(cases)}

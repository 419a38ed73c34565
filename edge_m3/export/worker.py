"""The exporters' child processes, both sides: the parent's calls and the child's entry point.

Each heavy phase (trace, TFLite conversion, ONNX export) runs in `python -m
edge_m3.export.worker STEP JOB.json` so the weights it held (2.3 GB for BGE-M3, more inside a
converter) go back to the OS before the next phase starts. The job travels as one JSON file and
the result comes back as JSON on the child's last stdout line (edge_m3.common.proc's one wire
format).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_m3.common.proc import Job, job_main, peak_rss, run_json
from edge_m3.spec import AI_EDGE_QUANTIZER, RECIPES, TFLITE_CONVERTER, QuantRecipe

MODULE = "edge_m3.export.worker"
# oneDNN's allocator keeps every buffer TF ever held (the 1 GB embedding table read from the
# checkpoint included) for reuse; the ONNX export computes nothing in TF, so plain malloc it is.
_ONNX_ENV = {"TF_ENABLE_ONEDNN_OPTS": "0"}


def _call(step: str, job: dict[str, Any], what: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    return run_json(Job(MODULE, step, job, what), env)


# --------------------------------------------------------------------------- parent side


@dataclass(frozen=True)
class Calibration:
    """What a statically quantized variant calibrates on: per signature name, each calibration
    text's model-row ids truncated to that length (every text feeds every signature); the
    table row `<pad>` pads with; how many texts."""

    ids: dict[str, list[list[int]]]
    pad_id: int
    texts: int


def trace(checkpoint_dir: Path, saved: Path | None, seq_lens: Sequence[int], heads: Sequence[str],
          dynamic: bool, kept_ids: Sequence[int] | None,
          lookup_saved: Path | None = None) -> dict[str, Any]:
    """Checkpoint -> Keras -> SavedModel (and the EMBEDDING_LOOKUP one at `lookup_saved`, for
    ai-edge-quantizer variants); returns {params, kept_ids, peak_rss}."""
    return _call("trace", {"checkpoint": str(checkpoint_dir),
                           "saved": None if saved is None else str(saved),
                           "seq_lens": list(seq_lens), "heads": list(heads), "dynamic": dynamic,
                           "kept_ids": None if kept_ids is None else list(kept_ids),
                           "lookup_saved": None if lookup_saved is None else str(lookup_saved)},
                 "tracing the Keras model")


def convert_float(lookup_saved: Path, out_file: Path, seq_lens: Sequence[int]) -> dict[str, Any]:
    """The float32 .tflite (EMBEDDING_LOOKUP tables) that ai-edge-quantizer starts from."""
    return _call("tflite-float", {"saved": str(lookup_saved), "out": str(out_file),
                                  "seq_lens": list(seq_lens)}, "TFLite float conversion")


def quantize_aeq(src: Path, out_file: Path, rules: Sequence[Sequence[Any]],
                 what: str) -> dict[str, Any]:
    """ai-edge-quantizer over the float file `src`; returns size, operators, weight types and
    signatures of the result."""
    return _call("aeq", {"src": str(src), "out": str(out_file), "rules": [list(r) for r in rules]},
                 f"ai-edge-quantizer ({what})")


def quantize_aeq_static(src: Path, out_file: Path, bits: int, calibration: Calibration,
                        what: str) -> dict[str, Any]:
    """ai-edge-quantizer's static recipe over the float file `src`, calibrated on `calibration`
    (token ids per signature, and the pad id); returns what `quantize_aeq` returns, plus the ops
    left in float."""
    return _call("aeq-static", {"src": str(src), "out": str(out_file), "bits": bits,
                                "calibration": calibration.ids, "pad_id": calibration.pad_id},
                 f"ai-edge-quantizer ({what}, calibrated on {calibration.texts} texts)")


def _by_converter(saved: Path, out_file: Path, recipe: QuantRecipe, seq_lens: Sequence[int],
                  params: int, lookup_saved: Path | None,
                  calibration: Calibration | None = None) -> dict[str, Any]:
    """The converter quantizes as it converts (edge_m3.export.tflite.CONVERTER_RECIPES)."""
    return _call("tflite", {"saved": str(saved), "out": str(out_file), "quant": recipe.name,
                            "seq_lens": list(seq_lens), "params": params},
                 f"TFLite conversion ({recipe.name})")


def _by_quantizer(saved: Path, out_file: Path, recipe: QuantRecipe, seq_lens: Sequence[int],
                  params: int, lookup_saved: Path | None,
                  calibration: Calibration | None = None) -> dict[str, Any]:
    """ai-edge-quantizer (edge_m3.export.aeq.AEQ_RECIPES, STATIC_RECIPES): float file ->
    quantizer, each in a child; the float file lives beside `out_file` only meanwhile. Weight
    recipes start from `lookup_saved` (EMBEDDING_LOOKUP tables); static ones from `saved`
    (GATHER tables, which AEQ quantizes like the activations) and need `calibration`."""
    from edge_m3.export.aeq import AEQ_RECIPES, STATIC_RECIPES
    from edge_m3.export.tflite import check_size

    static = recipe.tflite.name in STATIC_RECIPES
    if static and calibration is None:
        raise ValueError(f"{recipe.name}: needs calibration texts")
    source = saved if static else lookup_saved
    if source is None:
        raise ValueError(f"{recipe.name}: needs the EMBEDDING_LOOKUP trace (lookup_saved)")
    with tempfile.TemporaryDirectory(prefix="edge-m3-float-", dir=out_file.parent) as tmp:
        src = Path(tmp) / "float.tflite"
        convert_float(source, src, seq_lens)
        if static:
            assert calibration is not None
            info = quantize_aeq_static(src, out_file, STATIC_RECIPES[recipe.tflite.name],
                                       calibration, recipe.name)
        else:
            info = quantize_aeq(src, out_file, AEQ_RECIPES[recipe.tflite.name], recipe.name)
    check_size(info["size"], recipe, params)
    return info


# Who makes a TFLite file, by the tool its recipe names (spec.FormatRecipe.tool).
_TFLITE_TOOLS = {TFLITE_CONVERTER: _by_converter, AI_EDGE_QUANTIZER: _by_quantizer}


def convert_tflite(saved: Path, out_file: Path, recipe: QuantRecipe, seq_lens: Sequence[int],
                   params: int, lookup_saved: Path | None = None,
                   calibration: Calibration | None = None) -> dict[str, Any]:
    """One TFLite variant; returns its size, operators, min runtime and signatures.
    `calibration`: the texts of a variant whose activations are quantized statically."""
    return _TFLITE_TOOLS[recipe.tflite.tool](saved, out_file, recipe, seq_lens, params, lookup_saved,
                                             calibration)


def export_onnx(saved: Path, out_dir: Path, recipe: QuantRecipe, seq_lens: Sequence[int],
                heads: Sequence[str], params: int, external_threshold: int | None = None,
                ort: bool = False, calibration: Calibration | None = None) -> dict[str, Any]:
    """Write `model_<quant>.onnx` (plus `.data` when large, and `.ort` with its operator config
    when `ort`) into out_dir; return its manifest entry. `calibration`: the texts a calibrated
    recipe measures activations on (each distinct row of ids once, at its own length)."""
    job = {"saved": str(saved), "out_dir": str(out_dir), "quant": recipe.name,
           "seq_lens": list(seq_lens), "heads": list(heads), "params": params, "ort": ort}
    if external_threshold is not None:
        job["external_threshold"] = external_threshold
    if calibration is not None:
        rows = {tuple(ids) for per_sig in calibration.ids.values() for ids in per_sig}
        job["calibration_ids"] = [list(r) for r in sorted(rows)]
    entry = _call("onnx", job, f"ONNX export ({recipe.name})", _ONNX_ENV)
    entry.pop("peak_rss", None)  # the child's figure, not part of the manifest entry
    return entry


# --------------------------------------------------------------------------- child side


def _trace(job: dict[str, Any]) -> dict[str, Any]:
    from edge_m3.export.trace import trace_checkpoint

    lookup = Path(job["lookup_saved"]) if job.get("lookup_saved") else None
    params, kept = trace_checkpoint(Path(job["checkpoint"]), job["seq_lens"], job["heads"],
                                    Path(job["saved"]) if job["saved"] else None,
                                    job["dynamic"], job["kept_ids"], lookup)
    return {"params": params, "kept_ids": kept}


def _tflite_float(job: dict[str, Any]) -> dict[str, Any]:
    from edge_m3.export.tflite import convert_float

    return {"size": convert_float(Path(job["saved"]), job["seq_lens"], Path(job["out"]))}


def _aeq(job: dict[str, Any]) -> dict[str, Any]:
    from edge_m3.export.aeq import quantize, weight_bits
    from edge_m3.export.tflite import audit, signature_details

    out = Path(job["out"])
    quantize(Path(job["src"]), out, [tuple(r) for r in job["rules"]])
    return {"size": out.stat().st_size, **audit(out), "weights": weight_bits(out),
            "signatures": signature_details(out)}


def _aeq_static(job: dict[str, Any]) -> dict[str, Any]:
    from edge_m3.export.aeq import float_ops, quantize_static, weight_bits
    from edge_m3.export.tflite import audit, signature_details

    out = Path(job["out"])
    quantize_static(Path(job["src"]), out, int(job["bits"]), job["calibration"], int(job["pad_id"]))
    return {"size": out.stat().st_size, **audit(out), "weights": weight_bits(out),
            "float_ops": float_ops(out), "signatures": signature_details(out)}


def _tflite(job: dict[str, Any]) -> dict[str, Any]:
    from edge_m3.export.tflite import audit, convert, signature_details

    out = Path(job["out"])
    size = convert(Path(job["saved"]), job["seq_lens"], RECIPES[job["quant"]], out, job["params"])
    return {"size": size, **audit(out), "signatures": signature_details(out)}


def _onnx(job: dict[str, Any]) -> dict[str, Any]:
    from edge_m3.export.onnx import export

    extra = {k: job[k] for k in ("external_threshold", "calibration_ids") if k in job}
    return export(Path(job["saved"]), Path(job["out_dir"]), RECIPES[job["quant"]], job["seq_lens"],
                  job["heads"], job["params"], ort=job["ort"], **extra)


Step = Callable[[dict[str, Any]], dict[str, Any]]


def _with_peak_rss(step: Step) -> Step:
    """The step's result plus the child's peak RSS (what the phase cost)."""
    return lambda job: {**step(job), "peak_rss": peak_rss()}


STEPS = {name: _with_peak_rss(fn) for name, fn in (
    ("trace", _trace), ("tflite-float", _tflite_float), ("aeq", _aeq), ("aeq-static", _aeq_static),
    ("tflite", _tflite),
    ("onnx", _onnx))}


if __name__ == "__main__":
    job_main(STEPS)

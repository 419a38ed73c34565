"""`edge-m3 check`: on the device itself, with only the runtime installed, does the bundle give
the answers it was built with, how fast, in how much memory?

No reference checkpoint: golden.json is the reference. Token ids, the chosen signature and the
post-processing of the recorded raw outputs must match exactly (they are plain code); the live
outputs of the device's runtime must stay within the variant's device tolerance
(`edge_m3.spec.RECIPES[quant].device_tolerance`), since another CPU's kernels (ARM's
XNNPACK, an older TF Lite) round differently. Then every signature is timed, cold and warm, and
peak RSS read, each runtime in its own process. The kits' instrumented tests apply the same
rules on phones (the Android kit's Golden.compareExact / compareWithin).
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.bundle import Bundle
from edge_m3.common.files import check_writable
from edge_m3.errors import EdgeM3Error, one_line
from edge_m3.harness.bench import Repeats, bench_row
from edge_m3.harness.workers import load_outputs, run_workers, runtime_job, worker
from edge_m3.runtime.choice import select_runtimes
from edge_m3.runtime.registry import RUNTIMES, Runtime, WeightCache
from edge_m3.spec import (
    COLBERT_VECS,
    DENSE_VECS,
    GOLDEN,
    LEXICAL_WEIGHTS,
    SCORE_MODES,
    CheckResult,
    ModelEntry,
    Tolerance,
)


@dataclass(frozen=True)
class CheckOptions:
    """What `edge-m3 check` was asked for, parsed (edge_m3.cli)."""

    bundle: Path
    runtimes: tuple[Runtime, ...] = ()  # none: every installed device runtime that runs the model
    threads: int = 1
    timing: Repeats = Repeats()
    report: Path | None = None  # default reports/<bundle name>-check
    weight_cache: WeightCache = WeightCache.MEMORY  # OFF: LiteRT's Interpreter


def read_golden(bundle: Bundle) -> dict[str, Any]:
    """golden.json, checked for what the replay reads (one line naming the problem)."""
    path = bundle.path / GOLDEN
    if not path.is_file():
        raise EdgeM3Error(f"{path}: missing (a bundle built by edge-m3 build has it)")
    try:
        golden = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise EdgeM3Error(f"{path}: unreadable ({one_line(exc)})") from None
    cases = golden.get("cases") if isinstance(golden, dict) else None
    if not isinstance(cases, list) or not cases or not isinstance(golden.get("model_file"), str):
        raise EdgeM3Error(f"{path}: needs model_file and a non-empty list of cases")
    ids = range(bundle.manifest.tokenizer.vocab_size)
    for i, case in enumerate(cases):
        ok = (isinstance(case, dict) and isinstance(case.get("text"), str)
              and isinstance(case.get("signature"), str) and isinstance(case.get("raw"), dict)
              and isinstance(case.get("input_ids"), list)
              and all(isinstance(x, int) and not isinstance(x, bool) and x in ids for x in case["input_ids"]))
        if not ok:
            raise EdgeM3Error(f"{path}: case {i} needs text, input_ids (in the vocabulary), signature and raw")
        # What the replay and the comparison read: numbers in the shapes they index.
        bad = [f"raw.{k}" for k, v in case["raw"].items()  # EdgeM3Error escapes a key's line breaks
               if _array(v, 2, 9) is None or len(v) != 1]
        bad += [k for k, n in ((DENSE_VECS, 1), (COLBERT_VECS, 2))
                if k in case and _array(case[k], n, n) is None]
        lex = case.get(LEXICAL_WEIGHTS, {})
        if not isinstance(lex, dict) or not all(_number(w) for w in lex.values()):
            bad.append(LEXICAL_WEIGHTS)
        if bad:
            raise EdgeM3Error(f"{path}: case {i} {', '.join(bad)}: not numbers in the expected shape")
    scores = golden.get("scores") or []
    if not isinstance(scores, list) or not all(
            isinstance(s, dict) and all(_number(s[m]) for m in SCORE_MODES if m in s) for s in scores):
        raise EdgeM3Error(f"{path}: scores must be a list of objects with a number per mode")
    return golden


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _array(value: Any, min_ndim: int, max_ndim: int) -> np.ndarray | None:
    """`value` (nested JSON lists) as a float64 array of min_ndim..max_ndim dimensions, else None."""
    try:
        arr = np.asarray(value, np.float64)
    except (ValueError, TypeError, OverflowError):
        return None
    return arr if min_ndim <= arr.ndim <= max_ndim else None


def golden_entry(bundle: Bundle, golden: Mapping[str, Any]) -> ModelEntry:
    """The model file golden.json was recorded from (outputs of another file differ)."""
    entry = next((m for m in bundle.manifest.models if m.file == golden["model_file"]), None)
    if entry is None:
        raise EdgeM3Error(f"{bundle.path / GOLDEN}: model_file {golden['model_file']!r} is not in "
                          "the manifest")  # !r: the file's string on one line, whatever it holds
    return entry


def _short(text: str, n: int = 40) -> str:
    return repr(text if len(text) <= n else text[:n] + "…")


def replay_exact(bundle: Bundle, golden: Mapping[str, Any]) -> list[str]:
    """Post-processing of each case's recorded raw outputs vs its recorded named outputs: exact
    (they are plain code, identical on every CPU)."""
    from edge_m3.runtime.pipeline import named_outputs, to_jsonable

    tok = bundle.tokenizer()
    problems = []
    for i, case in enumerate(golden["cases"]):
        try:
            named = named_outputs(tok, case["input_ids"], case["raw"])
        except (ValueError, TypeError, IndexError) as exc:  # shapes read_golden cannot know
            problems.append(f"golden case {i} {_short(case['text'])}: the recorded raw outputs do not "
                            f"fit its input_ids ({one_line(exc)})")
            continue
        got = to_jsonable({"input_ids": case["input_ids"], "signature": case["signature"], **named})
        for key in (DENSE_VECS, LEXICAL_WEIGHTS, COLBERT_VECS):
            if (key in got or key in case) and got.get(key) != case.get(key):
                problems.append(f"golden case {i} {_short(case['text'])}: {key} post-processed "
                                "from the recorded raw outputs differs from the recorded one")
    return problems + replay_scores(golden)


def _score_keys(golden: Mapping[str, Any]) -> list[tuple[int, str]]:
    return [(k, m) for k, rec in enumerate(golden.get("scores") or []) for m in SCORE_MODES if m in rec]


def replay_scores(golden: Mapping[str, Any]) -> list[str]:
    """golden.json's `scores`, recomputed here from its recorded cases: exact (the contract's
    sequential float64 sums, the same on every CPU, as the kits reproduce them)."""
    from edge_m3.retrieval.scores import golden_scores

    recorded = golden.get("scores")
    if not recorded:
        return []
    try:
        got = golden_scores(golden["cases"])
    except (EdgeM3Error, KeyError, TypeError, ValueError) as exc:
        return [f"golden scores cannot be recomputed from the recorded cases ({exc})"]
    if [(r.get("query"), r.get("passage")) for r in recorded] != [(g["query"], g["passage"]) for g in got]:
        return ["golden scores: the recorded pairs are not the ones golden.json's cases give"]
    return [f"golden score {k} (case {recorded[k]['query']} x case {recorded[k]['passage']}, {m}): "
            f"{got[k].get(m)!r} recomputed here != {recorded[k][m]!r} recorded"
            for k, m in _score_keys(golden) if got[k].get(m) != recorded[k][m]]


def live_score_err(golden: Mapping[str, Any], outs: Sequence[Mapping[str, Any]]) -> float | None:
    """The largest difference between golden.json's scores and the same pairs' scores from
    this device's live outputs (a figure: the live outputs are bounded by the tolerance)."""
    from edge_m3.retrieval.scores import golden_scores

    if not golden.get("scores"):
        return None
    live = golden_scores(outs)
    return max((abs(live[k].get(m, float("nan")) - golden["scores"][k][m])
                for k, m in _score_keys(golden)), default=0.0)


def _max_abs(a: Any, b: Any) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf")
    return float(np.abs(a - b).max(initial=0.0))


def compare_live(i: int, case: Mapping[str, Any], live: Mapping[str, Any],
                 tol: Tolerance) -> tuple[dict[str, float], list[str]]:
    """One case's live outputs vs golden: ids and signature exact, the rest within `tol`
    (the kits' compareWithin). Returns the figures and the problems, each naming the text,
    the output and the size of the difference."""
    from edge_m3.harness.metrics import cosine

    where = f"golden case {i} {_short(case['text'])}"
    problems, fig = [], {}
    if [int(x) for x in live["input_ids"]] != case["input_ids"]:
        problems.append(f"{where}: input_ids differ ({len(live['input_ids'])} tokens here, "
                        f"{len(case['input_ids'])} recorded)")
    if live.get("signature") != case["signature"]:
        problems.append(f"{where}: signature {live.get('signature')} != {case['signature']}")
    if DENSE_VECS in case:
        fig["dense_cosine"] = cosine(live[DENSE_VECS], case[DENSE_VECS]) \
            if np.shape(live[DENSE_VECS]) == np.shape(case[DENSE_VECS]) else 0.0
        if not fig["dense_cosine"] >= tol.dense_cosine_min:
            problems.append(f"{where}: dense_vecs cosine {fig['dense_cosine']:.7f} < "
                            f"{tol.dense_cosine_min:g}")
        fig["dense_max_abs"] = _max_abs(live[DENSE_VECS], case[DENSE_VECS])
    if LEXICAL_WEIGHTS in case:  # a weight near 0 may fall on either side of relu: missing = 0
        ours, ref = live.get(LEXICAL_WEIGHTS, {}), case[LEXICAL_WEIGHTS]
        fig["lexical_max_abs"] = max((abs(float(ours.get(k, 0.0)) - float(ref.get(k, 0.0)))
                                      for k in set(ours) | set(ref)), default=0.0)
    if COLBERT_VECS in case:
        fig["colbert_max_abs"] = _max_abs(live[COLBERT_VECS], case[COLBERT_VECS])
    for key in ("dense_max_abs", "lexical_max_abs", "colbert_max_abs"):
        if key in fig and not fig[key] <= tol.max_abs:
            output = key.removesuffix("_max_abs")
            name = {"dense": DENSE_VECS, "lexical": LEXICAL_WEIGHTS, "colbert": COLBERT_VECS}[output]
            problems.append(f"{where}: {name} differs by up to {fig[key]:.3g} > {tol.max_abs:g}")
    return fig, problems


def golden_figures(golden: Mapping[str, Any], outs: Sequence[Mapping[str, Any]],
                   tol: Tolerance) -> dict[str, Any]:
    """Every case of one runtime: worst figures over the cases, and every problem."""
    per_case, problems = [], []
    for i, (case, live) in enumerate(zip(golden["cases"], outs, strict=True)):
        fig, bad = compare_live(i, case, live, tol)
        per_case.append(fig)
        problems += bad
    out: dict[str, Any] = {"cases": len(per_case), "problems": problems}
    if any("dense_cosine" in f for f in per_case):
        out["dense_cosine_min"] = min(f["dense_cosine"] for f in per_case)
    for key in ("dense_max_abs", "lexical_max_abs", "colbert_max_abs"):
        if any(key in f for f in per_case):
            out[key] = max(f[key] for f in per_case)
    return out


def device_info() -> dict[str, Any]:
    """What the figures were measured on."""
    return {"machine": platform.machine(), "system": platform.platform(terse=True),
            "python": platform.python_version(), "cpus": os.cpu_count()}


def check_runtime(bundle: Bundle, golden: Mapping[str, Any], entry: ModelEntry, runtime: Runtime,
                  opts: CheckOptions, work: Path) -> tuple[CheckResult, dict[str, Any]]:
    """One runtime, in a child of its own: golden.json replayed and every signature timed. The
    verdict (FAILED: the child's error or the golden problems) and the report's entry."""
    out = work / runtime.name
    error = run_workers([worker("check", {"bundle": str(bundle.path),
                                          **runtime_job(runtime, opts.weight_cache),
                                          "threads": opts.threads, "warmup": opts.timing.warmup,
                                          "repeats": opts.timing.repeats, "out": str(out)},
                                f"runtime {runtime.name}")])[0]
    if error:
        return CheckResult.failed(runtime.version(), error), {"error": error, "passed": False}
    outs, meta = load_outputs(out)
    fig = golden_figures(golden, outs, bundle.manifest.recipe.device_tolerance)
    if (score_err := live_score_err(golden, outs)) is not None:
        fig["scores_max_abs"] = score_err
    timing = bench_row(runtime.name, opts.threads, meta, None, entry.seq_lens)
    verdict = (CheckResult.failed(meta["version"], "; ".join(fig["problems"])) if fig["problems"]
               else CheckResult.passed(meta["version"]))
    return verdict, {"version": meta["version"], "golden": fig, "timing": timing,
                     "passed": verdict.ok}


def cmd_check(opts: CheckOptions) -> int:
    """The whole `check` command: 0 when every runtime replays golden.json within tolerance,
    1 when one does not (or crashes), 2 for bad input (before any model is loaded)."""
    from edge_m3 import __version__
    from edge_m3.bundle import load_bundle
    from edge_m3.harness.report import check_markdown, print_check, write_report

    bundle = load_bundle(opts.bundle)  # refuses any file whose sha256 is not the manifest's
    tol = bundle.manifest.recipe.device_tolerance
    golden = read_golden(bundle)
    entry = golden_entry(bundle, golden)
    runtimes = select_runtimes(bundle, opts.runtimes, "runtime", [entry],
                               skip=[r for r in RUNTIMES.values() if not r.on_device])
    report_dir = opts.report or Path("reports") / f"{Path(opts.bundle).resolve().name}-check"
    check_writable(report_dir, "report")  # before the runs, not after
    exact = replay_exact(bundle, golden)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="edge-m3-check-") as tmp_s:
        for rt in runtimes:  # one after another, so timings are not disturbed
            results[rt.name] = check_runtime(bundle, golden, entry, rt, opts, Path(tmp_s))[1]
    report = {
        "command": "check", "bundle": str(bundle.path), "quant": bundle.manifest.quant,
        "model_file": entry.file, "edge_m3_version": __version__, "device": device_info(),
        "threads": opts.threads, "warmup": opts.timing.warmup, "repeats": opts.timing.repeats,
        "tolerance": {"dense_cosine_min": tol.dense_cosine_min, "max_abs": tol.max_abs,
                      "source": f"edge_m3.spec ({bundle.manifest.quant})"},
        "golden": {"cases": len(golden["cases"]), "recorded_with": golden.get("runtime"),
                   "postprocess_problems": exact},
        "runtimes_checked": [rt.name for rt in runtimes], "runtimes": results,
        "passed": not exact and all(r["passed"] for r in results.values()),
    }
    write_report(report_dir, report, render=check_markdown, with_plots=False)
    print_check(report, report_dir)
    return 0 if report["passed"] else 1

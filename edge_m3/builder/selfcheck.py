"""The build's self-check: every TFLite variant loaded and run under each installed runtime.

Each runtime runs in a child (`python -m edge_m3.builder.selfcheck check JOB.json`, the one
wire format of edge_m3.common.proc): tflite-runtime cannot share a process with TensorFlow.
The results decide the manifest's `oldest_runtime`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edge_m3.common.options import version_tuple
from edge_m3.common.proc import Job, job_main, run_jobs
from edge_m3.errors import OptionError
from edge_m3.runtime.registry import RUNTIMES, Runtime
from edge_m3.spec import RECIPES, CheckResult, QuantRecipe, Signature

MODULE = "edge_m3.builder.selfcheck"
# The oldest runtime we ship for: Raspberry Pi rigs and older apps pin tflite-runtime 2.14.
OLDEST_TFLITE_RUNTIME = min((r.oldest_tflite for r in RECIPES.values()), key=version_tuple)


def self_check(model_file: Path, signatures: list[dict[str, Any]],
               runtimes: Sequence[Runtime]) -> dict[str, CheckResult]:
    """Load and run every signature under each installed TFLite runtime, each in a child.

    LiteRT's result also says how many FULLY_CONNECTED ops its XNNPACK delegate took: a
    kernel XNNPACK lacks (some weight type) falls back to a slow reference kernel silently."""
    results = {}
    for rt in runtimes:
        version = rt.version()
        if version is None:
            results[rt.name] = CheckResult(CheckResult.NOT_INSTALLED)
            continue
        done = run_jobs([Job(MODULE, "check", {"model": str(model_file), "signatures": signatures,
                                               "runtime": rt.name}, f"self-check {rt.name}")])[0]
        if done.returncode == 0:
            results[rt.name] = CheckResult.passed(version, done.result()["detail"])
        else:  # the runtime's own last words (a crashed interpreter leaves no error line of ours)
            results[rt.name] = CheckResult.failed(version, (done.stderr.strip().splitlines() or ["?"])[-1])
    return results


def should_run(runtime: Runtime, recipe: QuantRecipe) -> bool:
    """Whether `runtime`, as installed, is new enough for the variant's kernels."""
    version = runtime.version()
    if version is None or runtime.oldest is None:
        return False
    return version_tuple(version) >= version_tuple(runtime.oldest(recipe))


def refuse_unloadable(name: str, recipe: QuantRecipe, checks: dict[str, CheckResult]) -> None:
    """A file that a runtime new enough for it cannot run is not shipped: one line, exit 2."""
    bad = [f"{rt} {res}" for rt, res in checks.items()
           if res.is_failure and should_run(RUNTIMES[rt], recipe)]
    if bad:
        raise OptionError("quant", recipe.name, f"{name} does not run on {bad[0]}; not shipped")


def oldest_runtime(audit: dict[str, Any], checks: dict[str, CheckResult], r: QuantRecipe) -> dict[str, str]:
    """The oldest runtime that runs the file: tflite-runtime 2.14 if it loaded there, else the
    oldest LiteRT and TF Lite the variant's kernels compute right (edge_m3.spec)."""
    need = audit.get("min_runtime_version") or "0"
    loaded = checks.get("tflite-runtime")
    if (loaded is not None and loaded.ok) or (
        "tflite-runtime" not in checks
        and version_tuple(r.oldest_tflite) <= version_tuple(OLDEST_TFLITE_RUNTIME)
    ):
        return {"tflite-runtime": OLDEST_TFLITE_RUNTIME, "converter_min_runtime_version": need}
    return {"ai-edge-litert": r.oldest_litert, "tflite": r.oldest_tflite,
            "converter_min_runtime_version": need}


def xnnpack_fully_connected(interpreter: Any) -> tuple[int, int]:
    """(FULLY_CONNECTED ops whose weights XNNPACK's delegate took, all of them) in the primary
    subgraph: a delegated op's weights are inputs of the DELEGATE node that replaced it."""
    ops = interpreter._get_ops_details()
    taken = {int(i) for o in ops if o["op_name"] == "DELEGATE" for i in o["inputs"]}
    fc = [o for o in ops if o["op_name"] == "FULLY_CONNECTED"]
    return sum(int(o["inputs"][1]) in taken for o in fc), len(fc)


def _check(job: dict[str, Any]) -> dict[str, Any]:
    """Child (job: model, signatures, runtime): runs <s> x </s> + padding at every length;
    `detail` is what else it saw (LiteRT: how many FULLY_CONNECTED XNNPACK took)."""
    import numpy as np

    from edge_m3.runtime.registry import WeightCache
    from edge_m3.runtime.runners import open_runner

    path, runtime = job["model"], RUNTIMES[job["runtime"]]
    sigs = [Signature.from_json(s, "signatures") for s in job["signatures"]]
    # LiteRT through its Interpreter, the API the kits use, whose delegation can be inspected;
    # the golden vectors then run the CompiledModel path (weight cache).
    runner = open_runner(Path(path), sigs, runtime, 1, WeightCache.OFF)
    for s in sigs:
        ids = np.full((1, s.seq_len), 1, np.int32)
        ids[0, :3] = [0, 5, 2]
        mask = (ids != 1).astype(np.int32)
        mask[0, 0] = 1
        out = runner.run(ids, mask)
        assert all(np.isfinite(v).all() for v in out.values()), s.name
    interpreter = getattr(runner, "interpreter", None)
    if runtime.xnnpack and interpreter is not None:
        taken, total = xnnpack_fully_connected(interpreter)
        return {"detail": f"XNNPACK runs {taken} of {total} FULLY_CONNECTED"}
    return {"detail": ""}


if __name__ == "__main__":
    job_main({"check": _check})

"""The build's self-check: every TFLite variant loaded and run under each installed runtime.

Each runtime runs in a child (`python -m edge_m3.builder.selfcheck`): tflite-runtime cannot
share a process with TensorFlow. The results decide the manifest's `oldest_runtime`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edge_m3.common.options import version_tuple
from edge_m3.common.proc import child_main, run_children
from edge_m3.contract import RECIPES, Signature
from edge_m3.runtime.runners import runtime_version

MODULE = "edge_m3.builder.selfcheck"
# The oldest runtime we ship for: Raspberry Pi rigs and older apps pin tflite-runtime 2.14.
OLDEST_TFLITE_RUNTIME = min((r.oldest_tflite for r in RECIPES.values()), key=version_tuple)


def self_check(model_file: Path, signatures: list[dict[str, Any]], runtimes: Sequence[str]) -> dict[str, str]:
    """Load and run every signature under each installed TFLite runtime, each in a child."""
    results = {}
    for rt in runtimes:
        version = runtime_version(rt)
        if version is None:
            results[rt] = "not installed"
            continue
        done = run_children([(["-m", MODULE, str(model_file), json.dumps(signatures), rt],
                              f"self-check {rt}")])[0]
        ok = done.returncode == 0 and done.stdout.strip().endswith("ok")
        err = (done.stderr.strip().splitlines() or ["?"])[-1]
        results[rt] = f"ok ({version})" if ok else f"FAILED ({version}): {err}"
    return results


def oldest_runtime(audit: dict[str, Any], checks: dict[str, str]) -> dict[str, str]:
    """The oldest runtime that runs the file: tflite-runtime 2.14 if it loaded there."""
    need = audit.get("min_runtime_version") or "0"
    if checks.get("tflite-runtime", "").startswith("ok") or (
        "tflite-runtime" not in checks
        and version_tuple(need) <= version_tuple(OLDEST_TFLITE_RUNTIME)
    ):
        return {"tflite-runtime": OLDEST_TFLITE_RUNTIME, "converter_min_runtime_version": need}
    return {"ai-edge-litert": runtime_version("litert") or "?", "converter_min_runtime_version": need}


def main(argv: list[str]) -> int:
    """Child: `MODEL SIGNATURES_JSON RUNTIME`; runs <s> x </s> + padding at every length."""
    import numpy as np

    from edge_m3.runtime.runners import open_runner

    path, sigs_json, runtime = argv
    sigs = [Signature.from_json(s, "signatures") for s in json.loads(sigs_json)]
    runner = open_runner(Path(path), sigs, runtime, 1)
    for s in sigs:
        ids = np.full((1, s.seq_len), 1, np.int32)
        ids[0, :3] = [0, 5, 2]
        mask = (ids != 1).astype(np.int32)
        mask[0, 0] = 1
        out = runner.run(ids, mask)
        assert all(np.isfinite(v).all() for v in out.values()), s.name
    print("ok")
    return 0


if __name__ == "__main__":
    child_main(main)

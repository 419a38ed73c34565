"""Load a checkpoint into the Keras BGE-M3 and report wall time and peak RSS.

    python -m tools.bench.bench_load checkpoints/bge-m3-random

Target (issue 2): peak RSS <= 2.5x the fp32 weight bytes. Weights are read one tensor at a
time from the memory-mapped safetensors file and assigned straight into the Keras variables.
`--results docs/results/load_fullsize.json` also writes the table for docs/benchmarks.md
(tools/bench/results.py).
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from tools.bench.results import Load, add_option, write_result


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", type=Path)
    add_option(p, "load_fullsize.json")
    a = p.parse_args()
    load = Load()
    t0 = time.perf_counter()
    import tensorflow  # noqa: F401  (import cost reported separately)

    t_import = time.perf_counter() - t0
    base = _rss_gb()
    from edge_m3.checkpoint import load_checkpoint
    from edge_m3.modeling import build_model

    t1 = time.perf_counter()
    ckpt = load_checkpoint(a.checkpoint)
    t_validate = time.perf_counter() - t1
    model = build_model(ckpt)
    t_load = time.perf_counter() - t1
    weight_bytes = model.parameter_count() * 4
    peak = _rss_gb()
    rows = [
        ("parameters", f"{model.parameter_count():,}"),
        ("fp32 weight bytes", f"{weight_bytes / 1e9:.2f} GB"),
        ("import tensorflow", f"{t_import:.1f} s"),
        ("validate checkpoint (headers + hashes)", f"{t_validate:.1f} s"),
        ("load into Keras (total)", f"{t_load:.1f} s"),
        ("peak RSS", f"{peak:.2f} GB ({peak / (weight_bytes / 1e9):.2f}x weights)"),
        ("RSS after importing TF", f"{base:.2f} GB"),
    ]
    width = max(len(r[0]) for r in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    if a.results:
        write_result(a.results, title=f"Loading {a.checkpoint.name} into Keras",
                     module="tools.bench.bench_load", columns=["figure", "value"], rows=rows, load=load)


if __name__ == "__main__":
    main()

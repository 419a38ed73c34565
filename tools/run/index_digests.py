"""Build a fixed set of index folders and print every file's SHA-256: a refactor's proof.

    python tools/run/index_digests.py --bundle BUNDLE --out DIR [--corpus FILE] > digests.txt

Run it on the commit before a change and on the commit after (the same script file, with
PYTHONPATH naming each commit's tree, e.g. a `git archive` of the old one), with the same
arguments, and `diff` the two outputs: a behaviour-neutral change leaves every index folder
byte-identical. It builds, for each dense/ColBERT store pair:

- `edge-m3 index` of the corpus with the bundle (the command, in-process);
- a writable index made by `WritableIndex` operations from seeded synthetic passages: create,
  add, add_many, update (a chunked passage), remove, remove_many, compact, more writes on top of
  the compacted base (so index.sqlite holds passages, tombstones and a base name);
- the same operations on top of the format-1 folder `edge-m3 index` wrote (a base at ".").

The clock is fixed while it runs (index.json's `created`, and so the base manifest's sha256 that
index.sqlite's meta records), so every file is compared as bytes, index.sqlite included; only
uses the API that both sides of issue 59's redesign have.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

FIXED_TIME = time.gmtime(1_800_000_000)  # 2027-01-15: every `created` the same
STORES = [("float32", "fp16"), ("float32", "none"), ("int8", "int8"), ("int8", "fp16")]
DIM = 16


def passage(seed: int, dim: int = DIM) -> dict[str, Any]:
    """Pipeline-like outputs from a seed: unit dense, 0..6 lexical weights, 1..6 unit ColBERT vectors."""
    rng = np.random.default_rng(seed)
    d = rng.standard_normal(dim).astype(np.float32)
    toks = rng.choice(30, size=int(rng.integers(0, 7)), replace=False)
    col = rng.standard_normal((int(rng.integers(1, 7)), dim)).astype(np.float32)
    return {"dense_vecs": d / np.linalg.norm(d),
            "lexical_weights": {str(int(t)): float(np.float32(rng.random() + 1e-3)) for t in toks},
            "colbert_vecs": col / np.linalg.norm(col, axis=1, keepdims=True)}


def writes(w: Any, start: int) -> None:
    """A fixed sequence of writes: ids of both types, a chunked passage, updates and removals."""
    w.add(start, passage(start))
    w.add_many([(start + i, passage(start + i)) for i in range(1, 6)] + [(f"s{start}", passage(start + 50))])
    w.add(f"chunked{start}", [passage(start + 60), passage(start + 61), passage(start + 62)])
    w.update(start + 2, passage(start + 70))
    w.update(f"chunked{start}", [passage(start + 71), passage(start + 72)])
    w.remove(start + 3)
    w.add_many([(start + 4, passage(start + 80))], replace=True)


def writable_folder(out: Path, dense: str, colbert: str) -> None:
    from edge_m3.retrieval.writable import WritableIndex

    w = WritableIndex.create(out, DIM, dense, colbert)
    writes(w, 0)
    w.compact()
    writes(w, 100)
    w.remove(1)
    w.close()


def on_base(folder: Path, out: Path) -> None:
    """Writes on top of a format-1 folder (a base at "."), one compaction, more writes."""
    from edge_m3.retrieval.index import Index
    from edge_m3.retrieval.writable import WritableIndex

    shutil.copytree(folder, out)
    base = Index.load(out)
    dim, first = base.dim, base.ids[0]
    w = WritableIndex.open(out)
    w.add("new", passage(7, dim))
    w.remove(first)
    w.compact()
    w.add("after", passage(8, dim))
    w.close()


def digests(folder: Path) -> list[str]:
    """`relative/path sha256` of every file under a folder, sorted."""
    from edge_m3.common.files import sha256_file

    return [f"{p.relative_to(folder)} {sha256_file(p)}" for p in sorted(folder.rglob("*")) if p.is_file()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", type=Path, required=True, help="a bundle for `edge-m3 index`")
    ap.add_argument("--corpus", type=Path, help="the passages (default: 40 lines of the built-in corpus)")
    ap.add_argument("--out", type=Path, required=True, help="a new folder for the indexes")
    args = ap.parse_args(argv)
    if args.out.exists():
        ap.error(f"--out {args.out} exists")
    args.out.mkdir(parents=True)
    corpus = args.corpus
    if corpus is None:
        from importlib import resources

        text = resources.files("edge_m3").joinpath("data/corpus_multilingual.txt").read_text(encoding="utf-8")
        corpus = args.out / "corpus.txt"
        corpus.write_text("\n".join(text.splitlines()[:40]) + "\n", encoding="utf-8")
    time.gmtime = lambda *_: FIXED_TIME  # type: ignore[assignment]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from edge_m3.cli import main as cli

    folders = []
    for dense, colbert in STORES:
        name = f"{dense}-{colbert}"
        built = args.out / f"index-{name}"
        rc = cli(["index", str(args.bundle), str(corpus), "--out", str(built),
                  "--dense", dense, "--colbert", colbert, "-q"])
        if rc != 0:
            return rc
        writable_folder(args.out / f"writable-{name}", dense, colbert)
        on_base(built, args.out / f"onbase-{name}")
        folders += [built, args.out / f"writable-{name}", args.out / f"onbase-{name}"]
    for folder in folders:
        for line in digests(folder):
            print(f"{folder.name}/{line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Writes two targets' seeds into tools/fuzz/seeds/: `python -m tools.fuzz.kits.make_seeds`.

tools/fuzz/make_seeds.py writes the others (SentencePiece model, bundles, vocab_map, golden,
WordPiece vocabulary, index folders); these two came with the kits' targets, and the Python
targets of the same names read them as well: a byte-level BPE
folder (bpe.json and the manifest's tokenizer entry, a 400-token BPE trained as
tests/support/bpe.py trains ModernBERT's) and the writable index's index.sqlite (issue 35), one
per store pair, each holding four passages (one of two chunks), one removed.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

from tools.fuzz.harness import SEEDS, pack


def bpe_folder() -> bytes:
    from edge_m3.tokenizer.bpe import bpe_spec, write_bpe
    from tests.support import bpe as support

    support.VOCAB_SIZE = 400
    support.trained.cache_clear()
    with tempfile.TemporaryDirectory() as d:
        ckpt = support.write_checkpoint(Path(d) / "ckpt")
        spec, data = bpe_spec(ckpt)
        write_bpe(data, Path(d) / spec.file)
        manifest = json.dumps({"schema_version": 1, "tokenizer": spec.to_manifest()}).encode()
        return pack({"manifest.json": manifest, spec.file: (Path(d) / spec.file).read_bytes()})


def writable_db(dense: str, colbert: str) -> bytes:
    from edge_m3.retrieval.writable import WritableIndex

    rng = np.random.default_rng(38)
    dim = 8
    with tempfile.TemporaryDirectory() as d:
        idx = WritableIndex.create(Path(d) / "ix", dim, dense=dense, colbert=colbert)
        for i, pid in enumerate(["a", "b", 7, "d"]):
            v = rng.standard_normal(dim).astype(np.float32)
            c = rng.standard_normal((3, dim)).astype(np.float32)
            out = {"dense_vecs": v / np.linalg.norm(v), "lexical_weights": {str(5 + i): 0.5, "9": 0.25},
                   "colbert_vecs": c / np.linalg.norm(c, axis=1, keepdims=True)}
            idx.add(pid, [out, {**out, "lexical_weights": {"11": 0.75}}] if pid == "d" else out)  # d: 2 chunks
        idx.remove("b")
        idx.close()
        db = Path(d) / "ix" / "index.sqlite"
        return db.read_bytes()


def main() -> None:
    (SEEDS / "bpe").mkdir(parents=True, exist_ok=True)
    (SEEDS / "bpe" / "modernbert-400").write_bytes(bpe_folder())
    (SEEDS / "writable").mkdir(parents=True, exist_ok=True)
    for dense, colbert in (("float32", "fp16"), ("int8", "int8"), ("float32", "none")):
        (SEEDS / "writable" / f"{dense}-{colbert}.sqlite").write_bytes(writable_db(dense, colbert))
    for p in sorted(SEEDS.rglob("*")):
        if p.is_file():
            print(p.relative_to(SEEDS), p.stat().st_size)


if __name__ == "__main__":
    main()

"""sentencepiece.bpe.model: the protobuf reader (spmodel.read_model), then the tokenizer built
on it (charsmap, unigram lattice), as a bundle's tokenizer file is read on the device."""

from __future__ import annotations

from edge_m3.tokenizer.tokenizer import Tokenizer
from tools.fuzz.harness import TEXTS, scratch_file


def run(data: bytes) -> None:
    tok = Tokenizer(scratch_file("sentencepiece.bpe.model", data))
    for text in TEXTS:
        ids = tok.encode(text)
        assert ids[0] == tok.bos and ids[-1] == tok.eos, ids
        assert all(0 <= i < tok.spec.vocab_size for i in ids), ids

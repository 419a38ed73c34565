"""A WordPiece vocab.txt (tokenizer.wordpiece.read_vocab): one token a line, each once."""

from __future__ import annotations

from edge_m3.tokenizer.wordpiece import read_vocab
from tools.fuzz.harness import scratch_file


def run(data: bytes) -> None:
    tokens = read_vocab(scratch_file("vocab.txt", data))
    assert tokens and len(set(tokens)) == len(tokens)
    assert all(t and "\n" not in t for t in tokens)

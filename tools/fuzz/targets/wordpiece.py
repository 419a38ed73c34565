"""A BERT checkpoint's tokenizer files (tokenizer.wordpiece.wordpiece_spec: tokenizer.json, or
vocab.txt with tokenizer_config.json and special_tokens_map.json), as one folder blob; what is
accepted is written as a bundle's vocabulary and must tokenize."""

from __future__ import annotations

from edge_m3.spec import TokenizerSpec
from edge_m3.tokenizer.wordpiece import WordPieceTokenizer, wordpiece_spec, write_vocab
from tools.fuzz.harness import TEXTS, scratch, unpack, write_folder


def run(data: bytes) -> None:
    spec, tokens = wordpiece_spec(write_folder(unpack(data)))
    assert TokenizerSpec.from_manifest(spec.to_manifest()) == spec
    path = scratch() / spec.file
    write_vocab(tokens, path)
    tok = WordPieceTokenizer(path, spec)
    for text in TEXTS:
        ids = tok.encode(text)
        assert ids[0] == tok.bos and ids[-1] == tok.eos and all(0 <= i < len(tokens) for i in ids), ids

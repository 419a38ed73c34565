"""A byte-level BPE bundle's tokenizer as one folder blob (the kits' `bpe` inputs): manifest.json's
`tokenizer` entry (TokenizerSpec.from_manifest, as Manifest.read reads it) and the file it names
(bpe.json: read_bpe, ByteLevelBPETokenizer; or another kind's file when the entry names that
kind), opened as a bundle's tokenizer is. What is accepted must tokenize: bos first, eos last,
every id inside vocab_size, truncation within its bound."""

from __future__ import annotations

import json

from edge_m3.errors import EdgeM3Error
from edge_m3.spec import MANIFEST, TokenizerSpec
from edge_m3.tokenizer import open_tokenizer
from tools.fuzz.harness import TEXTS, unpack, write_folder


def run(data: bytes) -> None:
    files = unpack(data)
    try:
        entry = json.loads(files[MANIFEST])["tokenizer"]
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise EdgeM3Error(f"{MANIFEST}: no readable tokenizer entry ({type(exc).__name__})") from None
    if not isinstance(entry, dict):
        raise EdgeM3Error(f"{MANIFEST}: tokenizer must be an object")
    spec = TokenizerSpec.from_manifest(entry)
    tok = open_tokenizer(write_folder(files) / spec.file, spec)
    for text in TEXTS:
        ids = tok.encode(text)
        assert ids[0] == tok.bos and ids[-1] == tok.eos, ids
        assert all(0 <= i < spec.vocab_size for i in ids), ids
        assert len(tok.encode(text, 5)) <= 5

"""vocab_map.json (Tokenizer.with_row_map: tokenizer._load_row_map, vocab.row_map) of an
otherwise intact trimmed bundle: the committed tiny trimmed bundle seed, verified and its
tokenizer read once, with this input as its vocab_map.json (in a scratch folder of its own),
read as the tokenizer reads it at open; then every text's ids (encoded once) mapped to rows.
Every file of a folder at once is the `bundle` target's."""

from __future__ import annotations

from functools import cache
from typing import Any

from tools.fuzz.harness import TEXTS, scratch_file
from tools.fuzz.targets.bundle import opened_base

BASE = "tiny-trimmed"


@cache
def _opened() -> tuple[Any, list[list[int]]]:
    tok = opened_base(BASE).tokenizer()
    return tok, [tok.encode(text) for text in TEXTS]


def run(data: bytes) -> None:
    tok, encoded = _opened()
    mapped = tok.with_row_map(scratch_file(tok.spec.vocab_map["file"], data).parent)
    rows = tok.spec.model_rows
    for ids in encoded:
        assert all(0 <= r < rows for r in mapped.to_model_ids(ids))

"""vocab_map.json (tokenizer._load_row_map, vocab.row_map) in an otherwise intact trimmed
bundle: the committed tiny trimmed bundle seed with this input as its vocab_map.json."""

from __future__ import annotations

from functools import cache

from edge_m3.contract import VOCAB_MAP
from tools.fuzz.harness import TEXTS
from tools.fuzz.targets.bundle import base, open_bundle

BASE = "tiny-trimmed"


@cache
def _files() -> dict[str, bytes]:
    return base(BASE)


def run(data: bytes) -> None:
    bundle = open_bundle(_files() | {VOCAB_MAP: data})
    tok = bundle.tokenizer()
    rows = bundle.manifest.tokenizer.model_rows
    for text in TEXTS:
        assert all(0 <= r < rows for r in tok.to_model_ids(tok.encode(text)))

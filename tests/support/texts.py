"""Texts the tokenizer tests compare on: the committed corpora and every code point."""

from __future__ import annotations

import json
from importlib import resources

PER_TEXT = 500  # code points per text of the every-code-point texts
CODE_POINTS = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]


def corpora() -> list[str]:
    """The fidelity sample (every text) and the multilingual corpus (one text a line)."""
    data = resources.files("edge_m3").joinpath("data")
    lines = data.joinpath("fidelity_sample.jsonl").read_text("utf-8").splitlines()
    texts = [json.loads(line)["text"] for line in lines if line.strip()]
    return texts + data.joinpath("corpus_multilingual.txt").read_text("utf-8").split("\n")[:-1]

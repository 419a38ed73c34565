"""Texts the tokenizer tests compare on: the committed corpora and every code point."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

PER_TEXT = 500  # code points per text of the every-code-point texts
CODE_POINTS = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]


def corpora() -> list[str]:
    """The fidelity sample (every text) and the multilingual corpus (one text a line)."""
    data = resources.files("edge_m3").joinpath("data")
    lines = data.joinpath("fidelity_sample.jsonl").read_text("utf-8").splitlines()
    texts = [json.loads(line)["text"] for line in lines if line.strip()]
    return texts + data.joinpath("corpus_multilingual.txt").read_text("utf-8").split("\n")[:-1]


def check_ids(ours: Any, ref: Any, texts: list[str], max_length: int | None = None) -> None:
    """ours.encode(text, max_length) equals the reference's ids for every text (no exceptions)."""
    expected = [e.ids for e in ref.encode_batch(texts)]
    bad = [t for t, e in zip(texts, expected, strict=True) if ours.encode(t, max_length) != e]
    assert not bad, f"{len(bad)} of {len(texts)} texts differ, e.g. {bad[0][:200]!r}"


def check_padded(ours: Any, raw: Any, texts: list[str], length: int) -> None:
    """A reference that truncates and pads to `length` itself = ours.encode(text, length) padded."""
    for text, e in zip(texts, raw.encode_batch(texts), strict=True):
        ids, mask = ours.pad(ours.encode(text, length), length)
        assert ids.tolist() == e.ids and mask.tolist() == e.attention_mask, text[:200]

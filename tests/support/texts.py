"""Texts the tokenizer tests compare on: the committed corpora and every code point."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any, TypeVar

T = TypeVar("T")

PER_TEXT = 500  # code points per text of the every-code-point texts
CODE_POINTS = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]


def corpora() -> list[str]:
    """The fidelity sample (every text) and the multilingual corpus (one text a line)."""
    data = resources.files("edge_m3").joinpath("data")
    lines = data.joinpath("fidelity_sample.jsonl").read_text("utf-8").splitlines()
    texts = [json.loads(line)["text"] for line in lines if line.strip()]
    return texts + data.joinpath("corpus_multilingual.txt").read_text("utf-8").split("\n")[:-1]


def reference_ids(ref: Any, texts: list[str], ours: Callable[[], T]) -> tuple[list[list[int]], T]:
    """(the reference's ids for `texts`, `ours()`), the two computed at once: `tokenizers`'
    encode_batch releases the GIL, so on a second core it runs beside the pure-Python
    tokenizer (its half of an every-code-point comparison: ~45 s of ~100 s on CI's machine)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        want = pool.submit(lambda: [e.ids for e in ref.encode_batch(texts)])
        got = ours()
        return want.result(), got


def check_ids(ours: Any, ref: Any, texts: list[str], max_length: int | None = None) -> None:
    """ours.encode(text, max_length) equals the reference's ids for every text (no exceptions).
    Block by block, the reference encodes a block while ours encodes it (see reference_ids);
    blocks keep one block's ids in memory, not every text's twice."""
    bad: list[str] = []
    with ThreadPoolExecutor(max_workers=1) as pool:
        for i in range(0, len(texts), 64):
            block = texts[i:i + 64]
            want = pool.submit(lambda b: [e.ids for e in ref.encode_batch(b)], block)
            got = [ours.encode(t, max_length) for t in block]
            bad += [t for t, g, e in zip(block, got, want.result(), strict=True) if g != e]
    assert not bad, f"{len(bad)} of {len(texts)} texts differ, e.g. {bad[0][:200]!r}"


def check_padded(ours: Any, raw: Any, texts: list[str], length: int) -> None:
    """A reference that truncates and pads to `length` itself = ours.encode(text, length) padded."""
    for text, e in zip(texts, raw.encode_batch(texts), strict=True):
        ids, mask = ours.pad(ours.encode(text, length), length)
        assert ids.tolist() == e.ids and mask.tolist() == e.attention_mask, text[:200]

"""The device pipeline, replayed from a bundle alone: tokenize, pick a length, run, post-process.

This is what an app does (docs/bundle-format.md); the builder's golden vectors, `embed`,
`verify` and `bench` all go through it so there is one implementation to trust.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge_m3.bundle import Bundle
from edge_m3.errors import EdgeM3Error
from edge_m3.runtime.postprocess import postprocess
from edge_m3.runtime.registry import Runtime, WeightCache
from edge_m3.runtime.runners import Runner, open_runner
from edge_m3.spec import COLBERT_VECS, DENSE_VECS, LEXICAL_WEIGHTS, choose_length


@dataclass
class Encoded:
    """One text on its way through the pipeline."""

    input_ids: list[int]
    seq_len: int
    signature: str


class DevicePipeline:
    """Tokenizer + runner for one model file of a bundle, as an app would hold them."""

    def __init__(self, bundle: Bundle, runtime: Runtime, threads: int | None = None,
                 fmt: str | None = None, runner: Runner | None = None,
                 weight_cache: WeightCache | None = None, open_model: bool = True) -> None:
        """`open_model=False` loads the tokenizer only; `open()` then opens the model (the
        harness measures the model's memory apart from the tokenizer's)."""
        self.bundle = bundle
        self.entry = bundle.model_entry(fmt or runtime.format)
        self.spec = bundle.manifest.tokenizer
        self.tokenizer = bundle.tokenizer()
        self.signatures = {s.seq_len: s.name for s in self.entry.signatures}
        self.lengths = sorted(self.signatures)
        self._open_args = (runtime, threads, weight_cache)
        self.runner: Runner = runner or (self.open() if open_model else None)  # type: ignore[assignment]

    def open(self) -> Runner:
        """Open the model file under the runtime (see runners.open_runner for the cache)."""
        runtime, threads, weight_cache = self._open_args
        self.runner = open_runner(self.bundle.path / self.entry.file, self.entry.signatures,
                                  runtime, threads, weight_cache)
        return self.runner

    def encode(self, text: str) -> Encoded:
        """Token ids truncated to the largest signature (keeping `</s>`), and the length used."""
        ids = self.tokenizer.encode(text, max_length=self.lengths[-1])
        seq_len = choose_length(len(ids), self.lengths)
        return Encoded(ids, seq_len, self.signatures[seq_len])

    def encode_chunks(self, text: str, overlap: int | None = None) -> list[Encoded]:
        """The text's chunks (docs/index-format.md, "Passages and chunks"), each with the
        smallest signature that holds it: a long passage indexed whole, not truncated."""
        out = []
        for ids in self.tokenizer.encode_chunks(text, self.lengths[-1], overlap):
            seq_len = choose_length(len(ids), self.lengths)
            out.append(Encoded(ids, seq_len, self.signatures[seq_len]))
        return out

    def embed_chunks(self, text: str, overlap: int | None = None) -> list[dict[str, Any]]:
        """FlagEmbedding-named outputs of each chunk of the text (what an index stores per row)."""
        return [self.postprocess(e.input_ids, self.run(e)) for e in self.encode_chunks(text, overlap)]

    def model_inputs(self, enc: Encoded) -> tuple[np.ndarray, np.ndarray]:
        """Padded int32 `[1, L]` ids (model-row ids, trimmed vocabularies remapped) and mask."""
        ids, mask = self.tokenizer.pad(self.tokenizer.to_model_ids(enc.input_ids), enc.seq_len)
        return ids[None, :], mask[None, :]

    def run(self, enc: Encoded) -> dict[str, np.ndarray]:
        """The raw outputs of the chosen signature."""
        ids, mask = self.model_inputs(enc)
        return self.runner.run(ids, mask)

    def embed(self, text: str) -> dict[str, Any]:
        """FlagEmbedding-named outputs for one text, plus the ids and the signature used."""
        if not isinstance(text, str):
            raise EdgeM3Error(f"text must be a string, got {type(text).__name__}")
        enc = self.encode(text)
        raw = self.run(enc)
        return {"input_ids": enc.input_ids, "signature": enc.signature, "seq_len": enc.seq_len,
                "raw": raw, **self.postprocess(enc.input_ids, raw)}

    def postprocess(self, input_ids: list[int], raw: dict[str, np.ndarray]) -> dict[str, Any]:
        """FlagEmbedding's named outputs from one text's raw outputs."""
        return named_outputs(self.tokenizer, input_ids, raw)


def special_rows(tokenizer: Any) -> dict[str, int]:
    """The special tokens' model rows (a trimmed vocabulary moves them)."""
    return {k: tokenizer.to_model_ids([v])[0] for k, v in tokenizer.spec.special_ids.items()}


def named_outputs(tokenizer: Any, input_ids: list[int], raw: Mapping[str, Any]) -> dict[str, Any]:
    """Raw signature outputs -> FlagEmbedding's names, for the bundle's ids (golden.json's rule)."""
    # A trimmed vocabulary runs on table rows but reports the original ids.
    return postprocess(raw, tokenizer.to_model_ids(input_ids), special_rows(tokenizer), original_ids=input_ids)


def to_jsonable(result: dict[str, Any], raw: bool = False) -> dict[str, Any]:
    """One `embed` result as plain JSON types (FlagEmbedding's names)."""
    out: dict[str, Any] = {"input_ids": [int(i) for i in result["input_ids"]],
                           "signature": result["signature"]}
    if DENSE_VECS in result:
        out[DENSE_VECS] = [float(x) for x in result[DENSE_VECS]]
    if LEXICAL_WEIGHTS in result:
        out[LEXICAL_WEIGHTS] = {k: float(v) for k, v in result[LEXICAL_WEIGHTS].items()}
    if COLBERT_VECS in result:
        out[COLBERT_VECS] = np.asarray(result[COLBERT_VECS], dtype=float).tolist()
    if raw:
        out["raw"] = {k: np.asarray(v, dtype=float).tolist() for k, v in result["raw"].items()}
    return out

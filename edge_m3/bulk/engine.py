"""Many texts through the device pipeline at once, as columns.

The model step is the one an app runs, text by text at the smallest fixed length that holds it
(`DevicePipeline`: the same tokenizer, runner and post-processing), so every output equals the
one-text-per-call pipeline's exactly. What bulk adds is around it:

- lanes: the threads a job is given run as that many model instances of one thread each, every
  instance taking every other text of a length-sorted chunk (LiteRT and onnxruntime release the
  GIL while they run). On 2 cores two 1-thread lanes beat one 2-thread instance: XNNPACK splits
  one text's small matrices across threads poorly (docs/benchmarks.md, issue 27). Batching
  texts into one call does not apply: the bundles' graphs are traced at batch 1, and resizing
  the batch dimension fails in LiteRT (XNNPACK cannot reshape the traced reshapes);
- length sorting: a chunk's texts run grouped by signature, each lane reusing its buffers;
- columns: the results of a chunk come out as flat arrays plus offsets (`Embedded`), which the
  sinks write to Parquet or .npy without a Python object per float.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge_m3.bundle import Bundle
from edge_m3.contract import COLBERT_VECS, DENSE_VECS, HEADS, LEXICAL_WEIGHTS, RESULT_OUTPUTS
from edge_m3.errors import EdgeM3Error
from edge_m3.harness.corpus import Rejected, Row
from edge_m3.runtime.pipeline import DevicePipeline, Encoded
from edge_m3.runtime.registry import Runtime, WeightCache
from edge_m3.runtime.runners import Runner, open_runner

ID = "id"  # the input's id, beside the outputs (edge_m3.harness.corpus)
ROW = "row"  # the 0-based input row (line N of a text file is row N-1)


@dataclass(frozen=True)
class Ragged:
    """One variable-length value per text: text i is `values[offsets[i]:offsets[i + 1]]`."""

    values: np.ndarray
    offsets: np.ndarray  # int64, len(texts) + 1

    @staticmethod
    def of(parts: Sequence[np.ndarray], dtype: Any, width: int | None = None) -> Ragged:
        offsets = np.zeros(len(parts) + 1, np.int64)
        np.cumsum([len(p) for p in parts], out=offsets[1:])
        shape = (0,) if width is None else (0, width)
        values = np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(shape, dtype)
        return Ragged(values, offsets)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i]:self.offsets[i + 1]]


@dataclass
class Embedded:
    """A chunk's results in input order, as columns (only the outputs asked for are set)."""

    rows: np.ndarray  # int64 input rows
    ids: list[int | str]
    input_ids: Ragged  # int32 original vocabulary ids, <s> and </s> included
    dense: np.ndarray | None = None  # float32 [n, hidden]
    lexical_ids: Ragged | None = None  # int32 token ids, in lexical_weights' order
    lexical_weights: np.ndarray | None = None  # float32, aligned with lexical_ids.values
    colbert: Ragged | None = None  # float32 [tokens, hidden] per text

    def __len__(self) -> int:
        return len(self.rows)

    def record(self, i: int) -> dict[str, Any]:
        """Text i as the JSON object `embed` writes (FlagEmbedding's names)."""
        out: dict[str, Any] = {ROW: int(self.rows[i]), ID: self.ids[i], "input_ids": self.input_ids[i].tolist()}
        if self.dense is not None:
            out[DENSE_VECS] = self.dense[i].tolist()
        if self.lexical_ids is not None and self.lexical_weights is not None:
            sl = slice(self.lexical_ids.offsets[i], self.lexical_ids.offsets[i + 1])
            out[LEXICAL_WEIGHTS] = {str(k): float(w) for k, w in
                                    zip(self.lexical_ids.values[sl].tolist(),
                                        self.lexical_weights[sl].tolist(), strict=True)}
        if self.colbert is not None:
            out[COLBERT_VECS] = self.colbert[i].tolist()
        return out


def parse_outputs(heads: Sequence[str], bundle: Bundle) -> tuple[str, ...]:
    """The heads to write, in HEADS order; each must be one the bundle exports."""
    have = tuple(bundle.manifest.heads)
    for h in heads:
        if h not in HEADS:
            raise EdgeM3Error(f"--outputs {h}: unknown (choose from {', '.join(HEADS)})")
        if h not in have:
            raise EdgeM3Error(f"--outputs {h}: {bundle.path} exports {', '.join(have)} only")
    return tuple(h for h in HEADS if h in heads)


def split_threads(threads: int, lanes: int | None) -> tuple[int, int]:
    """(lanes, threads per lane): by default one lane of `threads` threads. Lanes are Python
    threads, and LiteRT's Python binding holds the GIL while it runs a model, so two lanes ran
    one after the other on an idle machine (27.8 s against 17.0 s for one lane of two threads,
    2,000 texts, docs/benchmarks.md issue 27); more lanes pay only where the runtime lets go."""
    lanes = max(1, min(lanes or 1, threads))
    return lanes, max(1, threads // lanes)


class BulkEmbedder:
    """One bundle's tokenizer and `lanes` model instances, loaded once, embedding chunks of rows."""

    def __init__(self, bundle: Bundle, runtime: Runtime, threads: int, outputs: Sequence[str],
                 lanes: int | None = None, weight_cache: WeightCache | None = None) -> None:
        self.outputs = tuple(outputs)
        self.lanes, per_lane = split_threads(threads, lanes)
        self.pipe = DevicePipeline(bundle, runtime, per_lane, weight_cache=weight_cache)
        entry = self.pipe.entry
        self.runners: list[Runner] = [self.pipe.runner] + [
            open_runner(bundle.path / entry.file, entry.signatures, runtime, per_lane, weight_cache)
            for _ in range(self.lanes - 1)]
        self.hidden = int(bundle.manifest.hidden_size)

    def encode(self, rows: Sequence[Row]) -> tuple[list[Row], list[Encoded], list[Rejected]]:
        """Tokenize (the step a thread runs ahead of the model); a text the tokenizer refuses
        is rejected with its row, not raised."""
        kept, encs, bad = [], [], []
        for r in rows:
            try:
                encs.append(self.pipe.encode(r.text))
            except EdgeM3Error as exc:
                bad.append(Rejected(r.row, r.id, str(exc)))
                continue
            kept.append(r)
        return kept, encs, bad

    def _lane(self, runner: Runner, order: Sequence[int], encs: Sequence[Encoded],
              out: list[Any], errors: list[BaseException]) -> None:
        try:
            for i in order:
                enc = encs[i]
                ids, mask = self.pipe.model_inputs(enc)
                raw = runner.run(ids, mask)
                out[i] = self.pipe.postprocess(enc.input_ids, raw)
        except BaseException as exc:  # re-raised by the caller's thread
            errors.append(exc)

    def embed(self, rows: Sequence[Row], encs: Sequence[Encoded],
              progress: Callable[[int], None] | None = None) -> Embedded:
        """The chunk's outputs, in the rows' order."""
        results = self.run(encs)
        if progress:
            progress(len(rows))
        return self.columns(rows, [e.input_ids for e in encs], results)

    def run(self, encs: Sequence[Encoded]) -> list[dict[str, Any]]:
        """Each text's FlagEmbedding-named outputs, in order; the lanes take the texts sorted by
        length (the index build reads these as they are, `embed` turns them into columns)."""
        n = len(encs)
        by_length = sorted(range(n), key=lambda i: encs[i].seq_len)
        results: list[Any] = [None] * n
        errors: list[BaseException] = []
        if self.lanes == 1 or n < 2:
            self._lane(self.runners[0], by_length, encs, results, errors)
        else:
            threads = [threading.Thread(target=self._lane, daemon=True,
                                        args=(r, by_length[k::self.lanes], encs, results, errors))
                       for k, r in enumerate(self.runners)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        if errors:
            raise errors[0]
        return results

    def columns(self, rows: Sequence[Row], input_ids: Sequence[Sequence[int]],
                results: Sequence[dict[str, Any]]) -> Embedded:
        """Per-text named outputs (FlagEmbedding's) -> columns."""
        got = Embedded(rows=np.fromiter((r.row for r in rows), np.int64, len(rows)),
                       ids=[r.id for r in rows],
                       input_ids=Ragged.of([np.asarray(i, np.int32) for i in input_ids], np.int32))
        if "dense" in self.outputs:
            got.dense = (np.stack([r[DENSE_VECS] for r in results]).astype(np.float32, copy=False)
                         if results else np.zeros((0, self.hidden), np.float32))
        if "sparse" in self.outputs:
            lex = [r[LEXICAL_WEIGHTS] for r in results]
            got.lexical_ids = Ragged.of([np.fromiter(map(int, d), np.int32, len(d)) for d in lex], np.int32)
            got.lexical_weights = (np.fromiter((w for d in lex for w in d.values()), np.float32,
                                               int(got.lexical_ids.offsets[-1])))
        if "colbert" in self.outputs:
            got.colbert = Ragged.of([r[COLBERT_VECS] for r in results], np.float32, self.hidden)
        return got


OUTPUT_COLUMNS = RESULT_OUTPUTS  # head -> column name (the JSON keys)

"""Many texts through the device pipeline at once, as columns.

The model step is the one an app runs, text by text at the smallest fixed length that holds it
(`DevicePipeline`: the same tokenizer, runner and post-processing), so every output equals the
one-text-per-call pipeline's exactly. What bulk adds is around it:

- lanes: the threads a job is given run as that many model instances of one thread each, each in
  its own process (edge_m3.bulk.lanes: LiteRT's Python binding holds the GIL while a model runs,
  so lanes as threads took turns), every lane taking every other text of a length-sorted chunk.
  On 2 cores two 1-thread lanes beat one 2-thread instance: XNNPACK splits one text's small
  matrices across threads poorly (docs/benchmarks.md, "Bulk embedding"). Batching texts into one call
  does not apply: the bundles' graphs are traced at batch 1, resizing the batch dimension fails in
  LiteRT (XNNPACK cannot reshape the traced reshapes), and per token a 16-token call costs only
  1.2-1.4x a 64-token one, so a batch signature could win little over the lanes;
- length sorting: a chunk's texts run grouped by signature, each lane reusing its buffers;
- columns: the results of a chunk come out as flat arrays plus offsets (`Embedded`), which the
  sinks write to Parquet or .npy without a Python object per float.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge_m3.bulk.columns import Ragged, result_columns
from edge_m3.bulk.lanes import LaneProcess, ids_frame, wait_ready
from edge_m3.bundle import Bundle
from edge_m3.common.corpus import Rejected, Row
from edge_m3.errors import EdgeM3Error
from edge_m3.runtime.pipeline import DevicePipeline, Encoded, special_rows
from edge_m3.runtime.registry import Runtime, WeightCache
from edge_m3.spec import COLBERT_VECS, DENSE_VECS, HEADS, LEXICAL_WEIGHTS, RESULT_OUTPUTS

ID = "id"  # the input's id, beside the outputs (edge_m3.common.corpus)
ROW = "row"  # the 0-based input row (line N of a text file is row N-1)


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
    """(lanes, threads per lane): by default one lane of one thread per thread given. A lane
    is its own process (edge_m3.bulk.lanes) with its own model instance: on 2 cores two
    1-thread lanes beat one instance of 2 threads, whose XNNPACK splits one text's small
    matrices poorly (e5-small int8, 2,000 texts: 17.1 s against 18.4 s; full size 36.6 s against
    40.1 s; tools/bench/bench_bulk.py). `lanes=1` keeps the model in this process."""
    lanes = max(1, min(lanes or threads, threads))
    return lanes, max(1, threads // lanes)


def _gather(parts: Sequence[tuple[Sequence[int], dict[str, np.ndarray]]], n: int,
            hidden: int) -> dict[str, np.ndarray]:
    """Lanes' columns (each for its own positions of a chunk) -> one set in chunk order."""
    cols: dict[str, np.ndarray] = {}
    first = parts[0][1]
    if "dense" in first:
        dense = np.zeros((n, hidden), np.float32)
        for pos, c in parts:
            dense[np.asarray(pos, np.int64)] = c["dense"]
        cols["dense"] = dense
    for values, offsets, extra, width in (("lex_ids", "lex_offsets", "lex_weights", None),
                                          ("colbert", "colbert_offsets", None, hidden)):
        if values not in first:
            continue
        per_text: list[Any] = [None] * n
        per_extra: list[Any] = [None] * n
        for pos, c in parts:
            rag = Ragged(c[values], c[offsets])
            for j, i in enumerate(pos):
                per_text[i] = rag[j]
                if extra:
                    per_extra[i] = c[extra][rag.offsets[j]:rag.offsets[j + 1]]
        dtype = first[values].dtype
        joined = Ragged.of(per_text, dtype, width)
        cols[values], cols[offsets] = joined.values, joined.offsets
        if extra:
            cols[extra] = Ragged.of(per_extra, np.float32).values
    return cols


def _results_of(cols: dict[str, np.ndarray], n: int) -> list[dict[str, Any]]:
    """Columns -> per-text named outputs, as postprocess gives them (values are exact: the
    columns hold the same float32s)."""
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    if "dense" in cols:
        for i in range(n):
            out[i][DENSE_VECS] = cols["dense"][i]
    if "lex_ids" in cols:
        ids, offs, w = cols["lex_ids"].tolist(), cols["lex_offsets"], cols["lex_weights"].tolist()
        for i in range(n):
            a, b = int(offs[i]), int(offs[i + 1])
            out[i][LEXICAL_WEIGHTS] = {str(k): v for k, v in zip(ids[a:b], w[a:b], strict=True)}
    if "colbert" in cols:
        rag = Ragged(cols["colbert"], cols["colbert_offsets"])
        for i in range(n):
            out[i][COLBERT_VECS] = rag[i]
    return out


def _tokenized(rows: Sequence[Row],
               encode: Callable[[str], Any]) -> tuple[list[Row], list[Any], list[Rejected]]:
    """`encode` of each row's text: the rows kept, their encodings, and the rows it refused."""
    kept, encs, bad = [], [], []
    for r in rows:
        try:
            encs.append(encode(r.text))
        except EdgeM3Error as exc:
            bad.append(Rejected(r.row, r.id, str(exc)))
            continue
        kept.append(r)
    return kept, encs, bad


class BulkEmbedder:
    """One bundle's tokenizer and `lanes` model instances, loaded once, embedding chunks of rows.

    With one lane the model runs in this process; with more, each lane is a child process
    (edge_m3.bulk.lanes) and this process only tokenizes and gathers. Call `close()` (or use it
    as a context manager) to stop the children; they also stop when this process ends."""

    def __init__(self, bundle: Bundle, runtime: Runtime, threads: int, outputs: Sequence[str],
                 lanes: int | None = None, weight_cache: WeightCache | None = None) -> None:
        self.outputs = tuple(outputs)
        self.lanes, per_lane = split_threads(threads, lanes)
        self.threads_per_lane = per_lane
        self.hidden = int(bundle.manifest.hidden_size)
        self.children: list[LaneProcess] = []
        if self.lanes == 1:
            self.pipe = DevicePipeline(bundle, runtime, per_lane, weight_cache=weight_cache)
            return
        # The children open their models while this process loads the tokenizer.
        self.children = [LaneProcess(bundle.path, runtime.name, per_lane, self.outputs, weight_cache)
                         for _ in range(self.lanes)]
        try:
            self.pipe = DevicePipeline(bundle, runtime, per_lane, open_model=False)
        except BaseException:
            self.close()
            raise
        wait_ready(self.children, special_rows(self.pipe.tokenizer))

    def close(self) -> None:
        for child in self.children:
            child.close()
        self.children = []

    def __enter__(self) -> BulkEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def encode(self, rows: Sequence[Row]) -> tuple[list[Row], list[Encoded], list[Rejected]]:
        """Tokenize (the step a thread runs ahead of the model); a text the tokenizer refuses
        is rejected with its row, not raised."""
        return _tokenized(rows, self.pipe.encode)

    def encode_chunks(self, rows: Sequence[Row]) -> tuple[list[Row], list[list[Encoded]], list[Rejected]]:
        """Each text's chunks (DevicePipeline.encode_chunks: a long passage split, not truncated);
        a text the tokenizer refuses is rejected with its row."""
        return _tokenized(rows, self.pipe.encode_chunks)

    def embed(self, rows: Sequence[Row], encs: Sequence[Encoded],
              progress: Callable[[int], None] | None = None) -> Embedded:
        """The chunk's outputs, in the rows' order."""
        got = self.submit(rows, encs).result()
        if progress:
            progress(len(rows))
        return got

    def submit(self, rows: Sequence[Row], encs: Sequence[Encoded]) -> Submitted:
        """Hand a chunk to the lanes and return at once (with lanes in this process, run it
        now): the caller submits the next chunk before collecting this one, so the children
        never wait while this process gathers and hands on results."""
        if not self.children or not encs:  # nothing to run (a chunk all rejected): no child asked
            cols = result_columns(self._run_here(encs), self.outputs, self.hidden)
            return Submitted(self, rows, encs, [], cols)
        if len(encs) < 2:
            shares = [list(range(len(encs)))]
        else:
            by_length = sorted(range(len(encs)), key=lambda i: encs[i].seq_len)
            shares = [by_length[k::len(self.children)] for k in range(len(self.children))]
        busy = []
        for child, share in zip(self.children, shares, strict=False):
            if share or not busy:
                child.send(ids_frame(self.pipe, [encs[i] for i in share]))
                busy.append((child, share))
        return Submitted(self, rows, encs, busy, None)

    def run(self, encs: Sequence[Encoded]) -> list[dict[str, Any]]:
        """Each text's FlagEmbedding-named outputs, in order (the index build reads these)."""
        if not self.children:
            return self._run_here(encs)
        return _results_of(self.submit([], encs).columns(), len(encs))

    def _run_here(self, encs: Sequence[Encoded]) -> list[dict[str, Any]]:
        """One lane in this process, the texts sorted by length (each signature's buffers reused)."""
        results: list[Any] = [None] * len(encs)
        for i in sorted(range(len(encs)), key=lambda i: encs[i].seq_len):
            enc = encs[i]
            results[i] = self.pipe.postprocess(enc.input_ids, self.pipe.run(enc))
        return results

    def columns(self, rows: Sequence[Row], input_ids: Sequence[Sequence[int]],
                cols: dict[str, np.ndarray]) -> Embedded:
        """A chunk's columns (`result_columns`) with its rows, ids and token ids."""
        got = Embedded(rows=np.fromiter((r.row for r in rows), np.int64, len(rows)),
                       ids=[r.id for r in rows],
                       input_ids=Ragged.of([np.asarray(i, np.int32) for i in input_ids], np.int32))
        if "dense" in cols:
            got.dense = cols["dense"]
        if "lex_ids" in cols:
            got.lexical_ids = Ragged(cols["lex_ids"], cols["lex_offsets"])
            got.lexical_weights = cols["lex_weights"]
        if "colbert" in cols:
            got.colbert = Ragged(cols["colbert"], cols["colbert_offsets"])
        return got


@dataclass
class Submitted:
    """A chunk handed to the lanes; `result()` waits for its columns (children answer in the
    order they were sent requests)."""

    embedder: BulkEmbedder
    rows: Sequence[Row]
    encs: Sequence[Encoded]
    busy: list[tuple[LaneProcess, list[int]]]
    cols: dict[str, np.ndarray] | None

    def columns(self) -> dict[str, np.ndarray]:
        if self.cols is None:
            parts = [(share, child.receive()) for child, share in self.busy]
            self.cols = _gather(parts, len(self.encs), self.embedder.hidden)
        return self.cols

    def result(self) -> Embedded:
        return self.embedder.columns(self.rows, [e.input_ids for e in self.encs], self.columns())


OUTPUT_COLUMNS = RESULT_OUTPUTS  # head -> column name (the JSON keys)

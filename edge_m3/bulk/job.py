"""A bulk `embed` job on one machine: read, tokenize ahead, run, write committed parts.

Three stages overlap, each in its own thread, joined by small queues (at most two chunks wait
in each, so memory stays bounded whatever the corpus size): the reader-tokenizer (pure Python),
the model lanes (edge_m3.bulk.engine: child processes, which this thread feeds), and the writer
(Parquet and .npy writes are native code; Parquet takes each chunk as a row group when it comes,
so the writing overlaps the model). A part is committed (edge_m3.bulk.sinks) before the job record
counts it, so `--resume` starts from the first row no committed part holds.
"""

from __future__ import annotations

import hashlib
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_m3.bulk.engine import BulkEmbedder, Submitted
from edge_m3.bulk.sinks import Sink, make_sink, out_format, rejected_path
from edge_m3.bundle import Bundle
from edge_m3.common.corpus import DEFAULT_ID_COLUMN, DEFAULT_TEXT_COLUMN, Corpus, Rejected, Row, open_corpus
from edge_m3.common.files import check_writable
from edge_m3.errors import EdgeM3Error, OptionError
from edge_m3.runtime.registry import Runtime
from edge_m3.spec import MANIFEST

CHUNK_ROWS = 256  # tokenized and run together: the unit the three stages hand on
LOOKAHEAD = 2  # chunks handed to the lane processes beyond the one being gathered
DEFAULT_PART_ROWS = 4096  # rows per committed part: what a killed job may have to redo
JOB_VERSION = 1


@dataclass(frozen=True)
class BulkOptions:
    """A bulk `embed` (a texts file or dataset to `--out` X.parquet / X.npy / X.jsonl)."""

    bundle: Path
    runtime: Runtime
    out: Path
    texts_file: Path | None = None
    texts: tuple[str, ...] = ()  # given on the command line (rows 0.., before none of the file)
    outputs: tuple[str, ...] = ()  # heads to write; () = every head the bundle exports
    threads: int = 2
    lanes: int | None = None  # model instances sharing the threads (None: one per thread, engine.split_threads)
    resume: bool = False
    part_rows: int = DEFAULT_PART_ROWS
    id_column: str | None = DEFAULT_ID_COLUMN
    text_column: str = DEFAULT_TEXT_COLUMN


class _Inline:
    """Command-line texts as a corpus (rows 0.., the row number as id)."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = list(texts)

    def rows(self, start: int = 0) -> Iterator[Row | Rejected]:
        for i, t in enumerate(self.texts[start:], start):
            yield Row(i, i, t) if t.strip() else Rejected(i, i, "empty text")

    def count(self) -> int:
        return len(self.texts)


def job_identity(opts: BulkOptions, outputs: Sequence[str]) -> dict[str, Any]:
    """What must not change between a job and its `--resume`."""
    src: dict[str, Any] = {"texts": list(opts.texts)} if not opts.texts_file else {
        "texts_file": str(Path(opts.texts_file).resolve()), "id_column": opts.id_column,
        "text_column": opts.text_column}
    if opts.texts_file and Path(opts.texts_file).is_file():
        st = Path(opts.texts_file).stat()
        src["size"] = st.st_size
    manifest = hashlib.sha256((Path(opts.bundle) / MANIFEST).read_bytes()).hexdigest()
    return {"version": JOB_VERSION, "bundle_manifest_sha256": manifest, "outputs": list(outputs),
            "part_rows": opts.part_rows, **src}


def resumable(record: dict[str, Any] | None, identity: dict[str, Any], out: Path) -> bool:
    """`--resume` into `out`: True when its job record says this job is complete already; a
    record of another job (or none) is one line, and nothing in `out` is changed."""
    if record is None or {k: record.get(k) for k in identity} != identity:
        diff = sorted(k for k in identity if record is None or record.get(k) != identity[k])
        raise OptionError("resume", out, f"was not written by this job (differs in: "
                          f"{', '.join(diff) or 'everything'}); nothing was changed")
    return bool(record.get("complete"))


def _chunks(rows: Iterator[Row | Rejected], first: int, part_rows: int,
            chunk_rows: int) -> Iterator[tuple[int, bool, list[Row], list[Rejected]]]:
    """(part, last chunk of the part?, rows, rejected) in input order; a part holds rows
    [k * part_rows, (k + 1) * part_rows) of the input, its chunks never cross that border."""
    buf_rows: list[Row] = []
    buf_bad: list[Rejected] = []
    n = 0
    row = first * part_rows
    for item in rows:
        (buf_rows if isinstance(item, Row) else buf_bad).append(item)
        n += 1
        row += 1
        end_of_part = row % part_rows == 0
        if end_of_part or n == chunk_rows:
            yield (row - 1) // part_rows, end_of_part, buf_rows, buf_bad
            buf_rows, buf_bad, n = [], [], 0
    if row % part_rows:  # the input ended inside a part: close it (maybe with an empty chunk)
        yield (row - 1) // part_rows, True, buf_rows, buf_bad


class _Stage(threading.Thread):
    """A pipeline stage: its first exception is kept and handed to the main thread."""

    def __init__(self, target: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self._fn, self.error = target, None

    def run(self) -> None:
        try:
            self._fn()
        except BaseException as exc:
            self.error = exc


_END = object()


def _put(q: queue.Queue, item: Any, stop: threading.Event, consumer: _Stage | None = None) -> bool:
    """Hand on `item`; False once the job stops or the consumer died (its error is raised later)."""
    while not stop.is_set() and (consumer is None or consumer.error is None):
        try:
            q.put(item, timeout=0.2)
            return True
        except queue.Full:
            continue
    return False


def prepare(opts: BulkOptions) -> tuple[Corpus | _Inline, Sink, list[str], Bundle]:
    """Everything checked before the model loads: the input, the output's state, `--resume`."""
    out_format(opts.out)
    if opts.part_rows < 1:
        raise OptionError("part_rows", opts.part_rows, "must be at least 1")
    if opts.texts_file and opts.texts:
        raise OptionError(None, None, "give TEXT arguments or {}, not both, with {}",
                          mentions=("texts", "out"))
    corpus: Corpus | _Inline
    if opts.texts_file:
        corpus = open_corpus(opts.texts_file, id_column=opts.id_column, text_column=opts.text_column)
    elif opts.texts:
        corpus = _Inline(opts.texts)
    else:
        raise OptionError(None, None, "no text: give TEXT arguments or {} FILE", mentions=("texts",))
    from edge_m3.bundle import load_bundle

    bundle = load_bundle(opts.bundle)
    from edge_m3.bulk.engine import parse_outputs

    outputs = list(parse_outputs(opts.outputs or bundle.manifest.heads, bundle))
    sink = make_sink(opts.out, outputs, int(bundle.manifest.hidden_size))
    if sink.exists() and not opts.resume:
        raise OptionError("out", opts.out, "exists (add {} to continue the job that wrote it, or "
                          "choose another path)", mentions=("resume",))
    check_writable(opts.out, "out", is_file=out_format(opts.out) == "jsonl")
    return corpus, sink, outputs, bundle


def run_job(opts: BulkOptions, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run (or resume) the job; returns its figures. Raises EdgeM3Error for the one-line cases."""

    from edge_m3.runtime.choice import require_runtime

    log = log or (lambda s: sys.stderr.write(s + "\n"))
    t_start = time.perf_counter()
    corpus, sink, outputs, bundle = prepare(opts)
    identity = job_identity(opts, outputs)
    first_part = 0
    record = sink.record()
    if opts.resume and sink.exists():
        if record is None and out_format(opts.out) == "jsonl" and opts.out.exists() and not sink.work.exists():
            log(f"{opts.out}: complete already; nothing to do")
            return {"rows": 0, "rejected": 0, "seconds": 0.0, "skipped": True}
        if resumable(record, identity, opts.out):
            log(f"{opts.out}: complete already; nothing to do")
            return {"rows": 0, "rejected": 0, "seconds": 0.0, "skipped": True}
        first_part = int(record.get("parts", 0))
        sink.drop_parts_from(first_part)
    else:
        record = None
    require_runtime(bundle, opts.runtime)
    embedder = BulkEmbedder(bundle, opts.runtime, opts.threads, outputs, opts.lanes)
    try:
        return _run(opts, corpus, sink, identity, record, first_part, embedder, log, t_start)
    finally:
        embedder.close()


def _run(opts: BulkOptions, corpus: Corpus | _Inline, sink: Sink, identity: dict[str, Any],
         record: dict[str, Any] | None, first_part: int, embedder: BulkEmbedder,
         log: Callable[[str], None], t_start: float) -> dict[str, Any]:
    """The three stages over the rows not committed yet (`run_job` has checked everything)."""
    from edge_m3.common.progress import progress as progress_bar

    sink.begin()
    state = dict(identity, parts=first_part, complete=False)
    sink.save_record(state)
    total = corpus.count()
    start_row = first_part * opts.part_rows
    progress = progress_bar("embed", total)
    stop = threading.Event()
    tokenized: queue.Queue = queue.Queue(maxsize=2)
    embedded: queue.Queue = queue.Queue(maxsize=2)
    counts = {"rows": 0, "rejected": 0}

    def read() -> None:  # stage 1: read and tokenize, a chunk ahead of the model
        rows = corpus.rows(start_row)
        for part, last, chunk, bad in _chunks(rows, first_part, opts.part_rows, CHUNK_ROWS):
            kept, encs, refused = embedder.encode(chunk)
            if not _put(tokenized, (part, last, kept, encs, bad + refused), stop):
                return
        _put(tokenized, _END, stop)

    def write() -> None:  # stage 3: each chunk into its part as it comes, parts committed in order
        part_bad: list[Rejected] = []
        try:
            while True:
                item = embedded.get()
                if item is _END:
                    return
                part, last, emb, bad = item
                sink.add(part, emb)
                counts["rows"] += len(emb)
                part_bad.extend(bad)
                if not last:
                    continue
                part_bad.sort(key=lambda r: r.row)
                sink.commit(part, part_bad)
                counts["rejected"] += len(part_bad)
                state["parts"] = part + 1
                sink.save_record(state)
                part_bad = []
        finally:
            sink.abort()  # a part begun but not committed (an error, a stop) leaves nothing

    reader, writer = _Stage(read), _Stage(write)
    t0 = time.perf_counter()
    try:
        with progress:
            task = progress.add_task("embed", total=total, completed=min(start_row, total))
            reader.start()
            writer.start()
            # Chunks k+1 and k+2 go to the lanes before chunk k's results are gathered and handed
            # on, so the children always have the next chunk queued.
            waiting: deque[tuple[int, bool, Submitted, list[Rejected]]] = deque()
            ended = False
            while waiting or not ended:
                if not ended:
                    item = _get(tokenized, reader)
                    if item is _END:
                        ended = True
                    else:
                        part, last, kept, encs, bad = item
                        waiting.append((part, last, embedder.submit(kept, encs), bad))
                if waiting and (ended or len(waiting) > LOOKAHEAD):
                    part, last, sub, bad = waiting.popleft()
                    if not _put(embedded, (part, last, sub.result(), bad), stop, writer):
                        break
                    progress.advance(task, len(sub.rows) + len(bad))
            _put(embedded, _END, stop, writer)
            writer.join()
    finally:
        stop.set()
    for stage in (reader, writer):
        if stage.error is not None:
            raise stage.error
    parts = int(state["parts"])
    seconds = time.perf_counter() - t0
    rejected_before = int(record.get("rejected", 0)) if record else 0
    state["rejected"] = rejected_before + counts["rejected"]
    sink.save_record(state)
    total_rejected = sink.finish(parts)
    figures = {"rows": counts["rows"], "rejected": total_rejected, "seconds": seconds,
               "wall_seconds": time.perf_counter() - t_start, "lanes": embedder.lanes,
               "parts": parts, "resumed_from_row": start_row}
    rate = counts["rows"] / max(seconds, 1e-9)
    msg = (f"{counts['rows']} text(s) embedded in {seconds:.2f} s: {rate:.1f} texts/s "
           f"({opts.runtime.name}, {embedder.lanes} lane(s) x {embedder.threads_per_lane} "
           f"thread(s), model load excluded) -> {opts.out}")
    if start_row:
        msg += f"; resumed at row {start_row}"
    log(msg)
    if total_rejected:
        log(f"{total_rejected} row(s) rejected (row, id and reason in {rejected_path(opts.out)})")
    return figures


def _get(q: queue.Queue, producer: _Stage) -> Any:
    """The next item, or the producer's error once it died."""
    while True:
        try:
            return q.get(timeout=0.2)
        except queue.Empty:
            if producer.error is not None:
                raise producer.error from None
            if not producer.is_alive() and q.empty():
                raise EdgeM3Error("the reader stopped without finishing") from None

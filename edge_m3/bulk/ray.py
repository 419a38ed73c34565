"""Past one machine on Ray Data: `embed --engine ray`, and `EmbedBatches` for teams' pipelines.

`EmbedBatches` is a class-based `map_batches` callable: each Ray actor loads the bundle once
(LiteRT with its XNNPACK weight cache in memory: the packed weights once per actor) and runs
every batch through the same code as a single-machine job (edge_m3.bulk.engine), returning an
Arrow table with the Parquet sink's columns (edge_m3.bulk.sinks). In a team's own pipeline:

    import ray
    from edge_m3.bulk.ray import EmbedBatches

    ds = ray.data.read_parquet("s3://bucket/passages/")          # columns: id, text
    ds = ds.map_batches(EmbedBatches, fn_constructor_kwargs={"bundle": "/models/bge-m3-int8",
                                                              "outputs": ("dense", "sparse")},
                        batch_size=256, batch_format="pyarrow",
                        compute=ray.data.ActorPoolStrategy(size=8), num_cpus=1)
    ds.write_parquet("s3://bucket/embeddings/")

Rows it cannot embed (a null id, a null, empty or non-UTF-8 text, a text the tokenizer
refuses) are left out of its output; `rejected_rows` lists them for a second, model-free pass.
The bundle's path must exist on every node (a shared file system, or the same path on each).

`embed --engine ray` reads the corpus in the driver with the one corpus reader (row numbers,
rejected rows to X.rejected.jsonl, exactly as on one machine), hands it to the cluster's object
store in blocks, and Ray Data schedules the actors and writes the Parquet dataset: no scheduling
of our own. On a cluster (`--ray-address`), `--out` must be a path every node can write.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edge_m3.bulk.engine import ID, ROW, BulkEmbedder
from edge_m3.bulk.job import job_identity, resumable
from edge_m3.bulk.sinks import JOB_FILE, arrow_table, read_record, rejected_path
from edge_m3.common.corpus import (
    DEFAULT_ID_COLUMN,
    DEFAULT_TEXT_COLUMN,
    Rejected,
    Row,
    check_row,
    open_corpus,
    require_pyarrow,
)
from edge_m3.common.files import check_writable, fill_atomic, write_json
from edge_m3.errors import EdgeM3Error, OptionError
from edge_m3.spec import HEADS

RAY_EXTRA = "pip install 'edge-m3[ray]'"
BATCH_ROWS = 256  # rows per map_batches call: the same chunk as a single-machine job
BLOCK_ROWS = 4096  # rows per block the driver puts into the object store
# Rows a Parquet file gathers at least (Ray writes a file per output block, one per batch, else):
# what a killed job redoes for each file it was writing, as a one-machine job's part.
FILE_ROWS = 4096
# Each actor reserves half a CPU: an actor pool that reserves every CPU starves Ray Data's own
# read and write tasks of a slot, and the job waits forever (seen on 2 cores).
ACTOR_CPUS = 0.5


def require_ray() -> Any:
    """ray (with ray.data), or the one line saying which extra installs it."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise EdgeM3Error(f"--engine ray needs Ray Data, which is not installed: {RAY_EXTRA}") from None
    return ray


def _batch_rows(batch: Any, id_column: str | None, text_column: str) -> tuple[list[Row], list[Rejected]]:
    """An Arrow batch's rows, checked as the corpus reader checks them."""
    n = batch.num_rows
    texts = batch.column(text_column).to_pylist()
    ids = batch.column(id_column).to_pylist() if id_column else None
    rows = batch.column(ROW).to_pylist() if ROW in batch.column_names else list(range(n))
    kept, bad = [], []
    for i in range(n):
        item = check_row(rows[i], ids[i] if ids is not None else rows[i], texts[i], id_column, text_column)
        (kept if isinstance(item, Row) else bad).append(item)
    return kept, bad


class EmbedBatches:
    """`map_batches` callable (batch_format="pyarrow"): a batch with an id and a text column in,
    the embeddings out (columns `id`, `row` when the input has one, `input_ids`, and the
    `outputs`' columns: edge_m3.bulk.sinks)."""

    def __init__(self, bundle: str | os.PathLike[str], outputs: Sequence[str] = HEADS,
                 runtime: str = "litert", threads: int = 1, id_column: str | None = DEFAULT_ID_COLUMN,
                 text_column: str = DEFAULT_TEXT_COLUMN) -> None:
        from edge_m3.bulk.engine import parse_outputs
        from edge_m3.bundle import load_bundle
        from edge_m3.runtime.choice import require_runtime
        from edge_m3.runtime.registry import RUNTIMES, WeightCache

        b = load_bundle(Path(bundle))
        rt = RUNTIMES[runtime]
        require_runtime(b, rt)
        self.outputs = parse_outputs(outputs, b)
        self.id_column, self.text_column = id_column, text_column
        self.embedder = BulkEmbedder(b, rt, threads, self.outputs, lanes=1, weight_cache=WeightCache.MEMORY)

    def __call__(self, batch: Any) -> Any:
        kept, _ = _batch_rows(batch, self.id_column, self.text_column)
        kept, encs, _ = self.embedder.encode(kept)
        id_type = batch.schema.field(self.id_column).type if self.id_column else None
        table = arrow_table(self.embedder.embed(kept, encs), self.outputs, self.embedder.hidden, id_type)
        return table if ROW in batch.column_names else table.drop_columns([ROW])


def rejected_rows(batch: Any, id_column: str | None = DEFAULT_ID_COLUMN,
                  text_column: str = DEFAULT_TEXT_COLUMN) -> Any:
    """`map_batches` function (no model): the rows EmbedBatches leaves out, with the reason
    (columns row, id as a string, reason). The tokenizer's own refusals are not among them."""
    pa = require_pyarrow()
    _, bad = _batch_rows(batch, id_column, text_column)
    return pa.table({ROW: pa.array([r.row for r in bad], pa.int64()),
                     ID: pa.array([None if r.id is None else str(r.id) for r in bad], pa.string()),
                     "reason": pa.array([r.reason for r in bad], pa.string())})


def run_ray_job(opts: Any, address: str | None = None, workers: int = 2) -> dict[str, Any]:
    """`embed --engine ray` (opts: edge_m3.bulk.job.BulkOptions); --out is a Parquet dataset."""
    import time

    from edge_m3.bulk.engine import parse_outputs
    from edge_m3.bundle import load_bundle
    from edge_m3.runtime.choice import require_runtime

    t_start = time.perf_counter()
    out = Path(opts.out)
    if out.suffix and out.suffix.lower() != ".parquet":
        raise OptionError("out", out, "--engine ray writes a Parquet dataset: a directory, or X.parquet")
    if not opts.texts_file:
        raise OptionError("texts", None, "--engine ray needs a corpus file or dataset")
    corpus = open_corpus(opts.texts_file, id_column=opts.id_column, text_column=opts.text_column)
    exists = out.exists() or rejected_path(out).exists()
    if exists and not opts.resume:
        raise OptionError("out", out, "exists (add {} to continue the job that wrote it, or choose "
                          "another path)", mentions=("resume",))
    check_writable(out, "out")
    ray = require_ray()  # before pyarrow: the [ray] extra brings both
    pa = require_pyarrow()
    bundle = load_bundle(opts.bundle)
    require_runtime(bundle, opts.runtime)
    outputs = parse_outputs(opts.outputs or bundle.manifest.heads, bundle)
    threads = max(1, opts.threads // workers) if workers <= opts.threads else 1
    identity = {**job_identity(opts, outputs), "engine": "ray"}
    done: set[int] = set()
    if exists:
        if resumable(read_record(out), identity, out):
            sys.stderr.write(f"{out}: complete already; nothing to do\n")
            return {"rows": 0, "rejected": 0, "seconds": 0.0, "skipped": True}
        done = written_rows(out)
    write_json(out / JOB_FILE, {**identity, "complete": False}, "out")

    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.WARNING, **({} if address else {"num_cpus": os.cpu_count()}))
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True  # blocks written in input order
    ctx.enable_progress_bars = sys.stderr.isatty()

    # The driver reads the corpus (no model) into object-store blocks of row, id, text: a few
    # blocks per worker at least, so that every actor gets some.
    block_rows = min(BLOCK_ROWS, max(1, -(-corpus.count() // (4 * workers))))
    refs, rejected, id_type = [], [], None
    buf: list[Row] = []

    def flush() -> None:
        nonlocal id_type
        if not buf:
            return
        ids = pa.array([r.id for r in buf], type=id_type)
        id_type = ids.type
        refs.append(ray.put(pa.table({ROW: pa.array([r.row for r in buf], pa.int64()), ID: ids,
                                      "text": pa.array([r.text for r in buf], pa.string())})))
        buf.clear()

    for item in corpus.rows():
        if isinstance(item, Rejected):
            rejected.append(item)
            continue
        if item.row in done:  # written by the run this one resumes
            continue
        buf.append(item)
        if len(buf) == block_rows:
            flush()
    flush()
    if not refs and not done:
        raise OptionError("texts", opts.texts_file, "no row that can be embedded")
    t0 = time.perf_counter()
    if refs:
        _run_ray(ray, refs, opts, out, outputs, threads, workers, started)
    elif started:
        ray.shutdown()
    seconds = time.perf_counter() - t0
    rows = sum(pa.parquet.ParquetFile(p).metadata.num_rows for p in out.glob("*.parquet"))
    if rejected:
        lines = "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in rejected)
        fill_atomic(rejected_path(out), lambda tmp: tmp.write_text(lines, "utf-8"), "out")
    write_json(out / JOB_FILE, {**identity, "workers": workers, "rows": rows,
                                "rejected": len(rejected), "complete": True}, "out")
    new_rows = rows - len(done)
    sys.stderr.write(f"{new_rows} text(s) embedded in {seconds:.2f} s: {new_rows / max(seconds, 1e-9):.1f} "
                     f"texts/s (Ray Data, {workers} worker(s) x {threads} thread(s), {opts.runtime.name}, "
                     f"actor start-up included) -> {out}"
                     + (f"; resumed: {len(done)} row(s) written before kept" if done else "") + "\n")
    if rejected:
        sys.stderr.write(f"{len(rejected)} row(s) rejected (row, id and reason in {rejected_path(out)})\n")
    return {"rows": new_rows, "rejected": len(rejected), "seconds": seconds, "resumed_rows": len(done),
            "wall_seconds": time.perf_counter() - t_start}


def written_rows(out: Path) -> set[int]:
    """The input rows a killed Ray job wrote whole: its readable Parquet files' `row` column.
    A file cut short (no footer) is deleted: its rows are embedded again."""
    pq = require_pyarrow().parquet
    done: set[int] = set()
    for p in sorted(out.glob("*.parquet")):
        try:
            rows = pq.read_table(p, columns=[ROW]).column(ROW).to_pylist()
        except Exception:  # pyarrow raises ArrowInvalid (a ValueError) or OSError for a cut file
            p.unlink(missing_ok=True)
            continue
        done.update(rows)
    return done


def _run_ray(ray: Any, refs: list[Any], opts: Any, out: Path, outputs: Sequence[str], threads: int,
             workers: int, started: bool) -> None:
    """Ray Data reads the blocks, runs the actors and appends Parquet files to `out`."""
    ds = ray.data.from_arrow_refs(refs).map_batches(
        EmbedBatches, batch_size=BATCH_ROWS, batch_format="pyarrow",
        fn_constructor_kwargs={"bundle": str(Path(opts.bundle).resolve()), "outputs": outputs,
                               "runtime": opts.runtime.name, "threads": threads, "id_column": ID,
                               "text_column": "text"},
        compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=ACTOR_CPUS)
    try:
        ds.write_parquet(str(out.resolve()), min_rows_per_file=FILE_ROWS)
    finally:
        if started:
            ray.shutdown()

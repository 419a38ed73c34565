"""`edge-m3 embed`: the device pipeline from the bundle alone, as an app would run it.

Without `--out`, results stream to stdout as JSON lines, one text per call (a file's bad line
is an error). With `--out` it is a bulk job (edge_m3.bulk): a corpus of any size to Parquet,
.npy or JSON lines in committed parts, `--resume`-able, bad rows reported and skipped, on this
machine or on Ray Data (`--engine ray`). A progress bar and the throughput (texts/s, model load
excluded) go to stderr.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from edge_m3.common.files import read_texts
from edge_m3.errors import OptionError
from edge_m3.runtime.registry import Runtime


@dataclass(frozen=True)
class EmbedOptions:
    """What `edge-m3 embed` was asked for, parsed (edge_m3.cli)."""

    bundle: Path
    runtime: Runtime
    texts: tuple[str, ...] = ()  # given on the command line
    texts_file: Path | None = None  # one text per line, after `texts`
    out: Path | None = None  # a bulk job's output (edge_m3.bulk.sinks) instead of stdout
    threads: int | None = None  # None: the runtime's default (bulk: spec.DEVICE_THREADS)
    # The bulk job's (edge_m3.bulk.job.BulkOptions; the CLI refuses them without `out`).
    outputs: tuple[str, ...] = ()
    resume: bool = False
    id_column: str | None = "id"
    text_column: str = "text"
    part_rows: int = 4096
    lanes: int | None = None
    engine: str = "local"  # or "ray" (edge_m3.bulk.ray)
    ray_address: str | None = None
    ray_workers: int = 2


def cmd_embed(opts: EmbedOptions) -> int:
    """JSON lines of FlagEmbedding-named outputs, from the bundle alone (as an app would)."""
    from edge_m3.bundle import load_bundle
    from edge_m3.common.progress import progress as progress_bar
    from edge_m3.runtime.choice import require_runtime
    from edge_m3.runtime.pipeline import DevicePipeline, to_jsonable

    if opts.out:
        return _bulk(opts)
    texts = list(opts.texts) + (read_texts(opts.texts_file) if opts.texts_file else [])
    if not texts:
        raise OptionError(None, None, "no text: give TEXT arguments or {} FILE (one text per line)",
                          mentions=("texts",))
    bundle = load_bundle(opts.bundle)  # refuses any file whose sha256 is not the manifest's
    require_runtime(bundle, opts.runtime)  # one line, not the interpreter's traceback
    pipe = DevicePipeline(bundle, opts.runtime, opts.threads)
    # On stderr; not when the JSON lines themselves scroll by on the same terminal.
    progress = progress_bar("embed", len(texts), show=not sys.stdout.isatty())
    t0 = time.perf_counter()
    with progress:
        task = progress.add_task("embed", total=len(texts))
        for text in texts:
            sys.stdout.write(json.dumps(to_jsonable(pipe.embed(text)), ensure_ascii=False) + "\n")
            progress.advance(task)
    seconds = time.perf_counter() - t0
    if len(texts) < 2:
        return 0
    threads = f"{opts.threads} thread(s)" if opts.threads else "default threads"
    sys.stderr.write(f"{len(texts)} text(s) in {seconds:.2f} s: {len(texts) / max(seconds, 1e-9):.1f} "
                     f"texts/s ({opts.runtime.name}, {threads}, model load excluded)\n")
    return 0


def _bulk(opts: EmbedOptions) -> int:
    """A bulk job (edge_m3.bulk): this machine's threads, or Ray Data."""
    from edge_m3.bulk.job import BulkOptions, run_job
    from edge_m3.spec import DEVICE_THREADS

    bulk = BulkOptions(bundle=opts.bundle, runtime=opts.runtime, out=opts.out, texts_file=opts.texts_file,
                       texts=opts.texts, outputs=opts.outputs, threads=opts.threads or DEVICE_THREADS,
                       lanes=opts.lanes, resume=opts.resume, part_rows=opts.part_rows,
                       id_column=opts.id_column, text_column=opts.text_column)
    if opts.engine == "ray":
        from edge_m3.bulk.ray import run_ray_job

        run_ray_job(bulk, address=opts.ray_address, workers=opts.ray_workers)
    else:
        run_job(bulk)
    return 0

"""`edge-m3 embed`: the device pipeline from the bundle alone, as an app would run it.

Results stream out as JSON lines (stdout, or `--out` written atomically), so a file of
thousands of texts never has to fit in memory; a progress bar and the throughput (texts/s,
model load excluded) go to stderr.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from edge_m3.common.files import check_writable, write_lines_atomic
from edge_m3.errors import OptionError
from edge_m3.harness.inputs import read_texts
from edge_m3.runtime.registry import Runtime


@dataclass(frozen=True)
class EmbedOptions:
    """What `edge-m3 embed` was asked for, parsed (edge_m3.cli)."""

    bundle: Path
    runtime: Runtime
    texts: tuple[str, ...] = ()  # given on the command line
    texts_file: Path | None = None  # one text per line, after `texts`
    out: Path | None = None  # JSON lines here instead of stdout
    threads: int | None = None  # None: the runtime's default


def cmd_embed(opts: EmbedOptions) -> int:
    """JSON lines of FlagEmbedding-named outputs, from the bundle alone (as an app would)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from edge_m3.bundle import load_bundle
    from edge_m3.runtime.choice import require_runtime
    from edge_m3.runtime.pipeline import DevicePipeline, to_jsonable

    texts = list(opts.texts) + (read_texts(opts.texts_file) if opts.texts_file else [])
    if not texts:
        raise OptionError(None, None, "no text: give TEXT arguments or {} FILE (one text per line)",
                          mentions=("texts",))
    if opts.out:
        check_writable(opts.out, "out", is_file=True)
    bundle = load_bundle(opts.bundle)  # refuses any file whose sha256 is not the manifest's
    require_runtime(bundle, opts.runtime)  # one line, not the interpreter's traceback
    pipe = DevicePipeline(bundle, opts.runtime, opts.threads)
    # On stderr; not when the JSON lines themselves scroll by on the same terminal.
    quiet = len(texts) < 2 or (not opts.out and sys.stdout.isatty())
    progress = Progress(TextColumn("embed"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                        console=Console(stderr=True), transient=True, disable=quiet,
                        redirect_stdout=False, redirect_stderr=False)
    t0 = time.perf_counter()

    def lines() -> Iterator[str]:
        with progress:
            task = progress.add_task("embed", total=len(texts))
            for text in texts:
                yield json.dumps(to_jsonable(pipe.embed(text)), ensure_ascii=False)
                progress.advance(task)

    if opts.out:
        write_lines_atomic(opts.out, lines(), "out")
    else:
        for line in lines():
            sys.stdout.write(line + "\n")
    seconds = time.perf_counter() - t0
    if len(texts) < 2:
        return 0
    threads = f"{opts.threads} thread(s)" if opts.threads else "default threads"
    sys.stderr.write(f"{len(texts)} text(s) in {seconds:.2f} s: {len(texts) / max(seconds, 1e-9):.1f} "
                     f"texts/s ({opts.runtime.name}, {threads}, model load excluded)\n")
    return 0

"""`edge-m3 embed`: the device pipeline from the bundle alone, as an app would run it.

Results stream out as JSON lines (stdout, or `--out` written atomically), so a file of
thousands of texts never has to fit in memory; a progress bar and the throughput (texts/s,
model load excluded) go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from edge_m3.common.files import check_writable, write_lines_atomic
from edge_m3.common.options import check_threads
from edge_m3.errors import EdgeM3Error
from edge_m3.harness.inputs import read_texts


def cmd_embed(a: argparse.Namespace) -> int:
    """JSON lines of FlagEmbedding-named outputs, from the bundle alone (as an app would)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from edge_m3.bundle import load_bundle
    from edge_m3.runtime.choice import require_runtime
    from edge_m3.runtime.pipeline import DevicePipeline, to_jsonable

    check_threads(a.threads)
    texts = list(a.text) + (read_texts(a.texts) if a.texts else [])
    if not texts:
        raise EdgeM3Error("no text: give TEXT arguments or --texts FILE (one text per line)")
    if a.out:
        check_writable(Path(a.out), "--out", is_file=True)
    bundle = load_bundle(a.bundle)  # refuses any file whose sha256 is not the manifest's
    require_runtime(bundle, a.runtime)  # one line, not the interpreter's traceback
    pipe = DevicePipeline(bundle, a.runtime, a.threads)
    # On stderr; not when the JSON lines themselves scroll by on the same terminal.
    quiet = len(texts) < 2 or (not a.out and sys.stdout.isatty())
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

    if a.out:
        write_lines_atomic(Path(a.out), lines())
    else:
        for line in lines():
            sys.stdout.write(line + "\n")
    seconds = time.perf_counter() - t0
    if len(texts) < 2:
        return 0
    threads = f"{a.threads} thread(s)" if a.threads else "default threads"
    sys.stderr.write(f"{len(texts)} text(s) in {seconds:.2f} s: {len(texts) / max(seconds, 1e-9):.1f} "
                     f"texts/s ({a.runtime}, {threads}, model load excluded)\n")
    return 0

"""How much edge-m3 says while it works: one switch for -q/-v and one kind of progress bar.

stdout carries results (embed's and search's JSON lines), so everything said while working goes
to stderr, and only to a terminal: a bar in a log file or a pipe is noise. `-q` silences the
bars and the build's phase lines; `-v` lets the runtimes' own native logs through
(edge_m3.runtime.native_logs). The switches live in the environment so the children a command
starts (bench workers, bulk lanes) follow them too.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

QUIET_ENV = "EDGE_M3_QUIET"
VERBOSE_ENV = "EDGE_M3_VERBOSE"


@contextlib.contextmanager
def switched(quiet: bool = False, verbose: bool = False) -> Iterator[None]:
    """The CLI's -q / -v for this process and the children it starts, undone afterwards (an
    EDGE_M3_QUIET / EDGE_M3_VERBOSE=1 already in the environment stays on)."""
    before = {name: os.environ.get(name) for name in (QUIET_ENV, VERBOSE_ENV)}
    for name, on in ((QUIET_ENV, quiet), (VERBOSE_ENV, verbose)):
        if on:
            os.environ[name] = "1"
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def quiet() -> bool:
    """-q was given: no progress bars, no phase lines."""
    return os.environ.get(QUIET_ENV) == "1"


def verbose() -> bool:
    """-v was given: the runtimes' native logs are let through."""
    return os.environ.get(VERBOSE_ENV) == "1"


def console(silent: bool = False) -> Any:
    """A rich Console on stderr, silenced by -q (or `silent`)."""
    from rich.console import Console

    return Console(stderr=True, quiet=silent or quiet())


def shows_progress(total: int | None = None) -> bool:
    """Whether a progress bar would be drawn: stderr is a terminal, no -q, and more than one item."""
    if quiet() or (total is not None and total < 2):
        return False
    return bool(console().is_terminal)


def progress(label: str, total: int | None = None, rate: bool = False, show: bool = True) -> Any:
    """The one progress bar: `label`, bar, done/total, [items/s], time left; transient, on stderr.

    A no-op with the same API unless `show` and `shows_progress(total)`. With `rate`, each task
    takes a `rate` field (progress.update(task, rate="12.3 texts/s")).
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns: list[Any] = [TextColumn(label), BarColumn(), MofNCompleteColumn()]
    if rate:
        columns.append(TextColumn("{task.fields[rate]}"))
    columns.append(TimeRemainingColumn())
    return Progress(*columns, console=console(), transient=True,
                    disable=not (show and shows_progress(total)),
                    redirect_stdout=False, redirect_stderr=False)


@contextlib.contextmanager
def working(title: str, silent: bool = False) -> Iterator[None]:
    """A step with no count to show (a conversion in a child process): a spinner, the title and
    the time elapsed, on a terminal only, gone when the step ends."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    bar = Progress(SpinnerColumn(), TextColumn(f"[bold]{title}[/bold]"), TimeElapsedColumn(),
                   console=console(silent), transient=True,
                   disable=silent or not shows_progress(), redirect_stdout=False, redirect_stderr=False)
    with bar:
        bar.add_task(title, total=None)
        yield

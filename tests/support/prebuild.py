"""The session's long subprocess builds (the Swift package, the Swift fuzz targets, the Kotlin kit
jar), started in the background once collection knows which ones the chosen tests need.

They are one-core compiles that nothing in the Python tests waits on until the kit tests, minutes
later: run one at a time on a thread beside the Python tests (in the order the tests first need
them), they come off the session's critical path (~3-5 min of CI on 2 cores). The fixture that
needs a build takes its finished process from `result`, or runs the command itself when it was
not started (a job still queued is run at once, not after the others). The command, its folders
and its caches are the same either way, so the builds and what the tests check are unchanged.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """One build: its argv, its environment (None: this process's) and subprocess.run's timeout."""

    argv: list[str]
    env: dict[str, str] | None = None
    timeout: float | None = None


_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prebuild")
_jobs: dict[str, Future[subprocess.CompletedProcess[str]]] = {}
_running: list[subprocess.Popen[str]] = []


def start(items: Iterable[object], builds: dict[str, Callable[[], Command | None]]) -> None:
    """Queues each build whose name is a fixture some collected test uses (directly or not), first
    needed first; a build whose factory gives None (its tool is missing) is left to its fixture."""
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        for name in set(getattr(item, "fixturenames", ())) & builds.keys():
            first.setdefault(name, index)
    for name in sorted(first, key=first.__getitem__):
        command = builds[name]()
        if command is not None and name not in _jobs:
            _jobs[name] = _pool.submit(_run, command)


def result(name: str, command: Command) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(command, capture_output=True, text=True)`'s result, from the background job
    of that name when one was started (waiting for it), else run here."""
    job = _jobs.pop(name, None)
    if job is not None and not job.cancel():
        return job.result()
    return _run(command)


def stop() -> None:
    """Drops the queued builds and ends the running one (a session that stops early: -x, Ctrl-C)."""
    for job in _jobs.values():
        job.cancel()
    for proc in list(_running):
        proc.kill()


def _run(command: Command) -> subprocess.CompletedProcess[str]:
    """subprocess.run with captured text output, its process reachable by `stop`."""
    with subprocess.Popen(command.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=command.env) as proc:
        _running.append(proc)
        try:
            out, err = proc.communicate(timeout=command.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        finally:
            _running.remove(proc)
    return subprocess.CompletedProcess(command.argv, proc.returncode, out, err)

"""The session's long subprocess builds, started in the background as soon as the session knows it
needs them: the Swift package, the Swift fuzz targets and the Kotlin kit jar (tests/conftest.py),
and the session bundles whose checkpoints need no fixture (MiniLM's, ModernBERT's) or once their
checkpoint is made (e5's).

They are mostly one-core subprocesses that nothing waits on until their first test, minutes later:
run one at a time on a thread beside the Python tests (the one first needed first), they come off
the session's critical path. The fixture that needs a build takes its finished process from
`result`, or runs the commands itself when they have not started (a job still queued runs at once,
ahead of the others). The commands, their folders and caches are the same either way, so what is
built and what the tests check do not change.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Command:
    """One subprocess: its argv, its environment (None: this process's), subprocess.run's timeout
    and its working directory (None: this process's)."""

    argv: list[str]
    env: dict[str, str] | None = None
    timeout: float | None = None
    cwd: str | None = None


@dataclass(order=True)
class _Job:
    first: int  # the index of the first collected test that needs it
    seq: int
    name: str = field(compare=False)
    commands: list[Command] = field(compare=False)
    future: Future[subprocess.CompletedProcess[str]] = field(compare=False, default_factory=Future)


_lock = threading.Condition()
_queue: list[_Job] = []  # not started, kept sorted
_jobs: dict[str, _Job] = {}
_running: list[subprocess.Popen[str]] = []
_first: dict[str, int] = {}  # fixture name -> the index of the first test that uses it
_folders: dict[str, Path] = {}
_after: dict[str, dict[str, Callable[[Any, Any], list[Command]]]] = {}
_stopped = False


def start(items: Iterable[object], builds: dict[str, Callable[[], list[Command] | None]]) -> None:
    """Notes where each fixture is first needed, then queues each of `builds` some collected test
    uses (directly or not); a build whose factory gives None (its tool is missing) is left to its
    fixture."""
    for index, item in enumerate(items):
        for name in getattr(item, "fixturenames", ()):
            _first.setdefault(name, index)
    for name, make in builds.items():
        if name in _first and (commands := make()):
            queue(name, commands)


def folder(factory: object, name: str) -> Path:
    """One temporary folder per name (pytest's TempPathFactory.mktemp), the same for the job that
    builds into it and the fixture that reads it."""
    if name not in _folders:
        _folders[name] = factory.mktemp(name)  # type: ignore[attr-defined]
    return _folders[name]


def after(fixture: str, name: str, make: Callable[[Any, Any], list[Command]]) -> None:
    """Job `name` is `make(value, tmp_path_factory)`, queued by `made` once the session fixture
    `fixture` has its value (when a collected test uses `name`): a test module's own build on a
    session checkpoint starts minutes before the module does."""
    _after.setdefault(fixture, {})[name] = make


def made(fixture: str, value: Any, factory: Any) -> None:
    """Queues the jobs waiting for `fixture` (see `after`); its fixture calls this with its value."""
    for name, make in _after.get(fixture, {}).items():
        if needed(name):
            queue(name, make(value, factory))


def needed(name: str) -> bool:
    """Whether a collected test uses the fixture `name` (and no job of that name exists yet)."""
    return name in _first and name not in _jobs


def started(name: str) -> bool:
    """Whether a job of that name was queued (it may have finished, or still wait its turn)."""
    return name in _jobs


def queue(name: str, commands: list[Command]) -> None:
    """Runs `commands` (one after another, stopping at a failure) in the background, ahead of the
    jobs whose tests come later."""
    with _lock:
        if name in _jobs or _stopped:
            return
        job = _Job(_first.get(name, 1 << 30), len(_jobs), name, commands)
        _jobs[name] = job
        _queue.append(job)
        _queue.sort()
        if len(_jobs) == 1:
            threading.Thread(target=_worker, name="prebuild", daemon=True).start()
        _lock.notify()


def result(name: str, commands: list[Command]) -> subprocess.CompletedProcess[str]:
    """What `subprocess.run(c, capture_output=True, text=True)` gives for the last of `commands`
    (or the first that failed): from the background job of that name when it started (waiting
    for it), else run here."""
    with _lock:
        job = _jobs.get(name)
        if job is not None and job in _queue:
            _queue.remove(job)
            job = None
    return job.future.result() if job is not None else _run_all(commands)


def stop() -> None:
    """Drops the queued jobs and ends the running one (a session that stops early: -x, Ctrl-C)."""
    global _stopped
    with _lock:
        _stopped = True
        for job in _queue:
            job.future.cancel()
        _queue.clear()
        for proc in list(_running):  # the build's own children too (swift-frontend, export workers)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        _lock.notify()


def _worker() -> None:
    while True:
        with _lock:
            while not _queue and not _stopped:
                _lock.wait()
            if _stopped:
                return
            job = _queue.pop(0)
        try:
            job.future.set_result(_run_all(job.commands))
        except BaseException as exc:  # the fixture that waits raises it
            job.future.set_exception(exc)


def _run_all(commands: list[Command]) -> subprocess.CompletedProcess[str]:
    for command in commands:
        proc = _run(command)
        if proc.returncode != 0:
            break
    return proc


def _run(command: Command) -> subprocess.CompletedProcess[str]:
    """subprocess.run with captured text output, its process reachable by `stop`."""
    with subprocess.Popen(command.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=command.env, cwd=command.cwd, start_new_session=True) as proc:
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

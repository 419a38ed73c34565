"""Child processes, one way: every heavy or runtime-specific step runs in a `python -m` child.

Why children: a converter's or quantizer's memory goes back to the OS when the child ends;
each runtime's peak RSS is then an honest per-process figure; and tflite-runtime cannot share
a process with TensorFlow (its interpreter fails with std::bad_alloc once TF is loaded).

One wire format for every child: `python -m MODULE STEP JOB.json`, the job one JSON object in
a file (`run_jobs`), the result one JSON object on the child's last stdout line (`job_main`;
bulky results go to files the job names). Output goes to files, not pipes, so a chatty child
(progress bars) never blocks on a full pipe. A child reports a user error as one
`edge-m3: error: ...` line on stderr (see `child_main`).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_m3.errors import EdgeM3Error, disk_full

ERROR_PREFIX = "edge-m3: error: "


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment, with TF's and tokenizers' noise turned down."""
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    for key, value in (extra or {}).items():
        env.setdefault(key, value)
    return env


@dataclass
class Finished:
    """What one child left behind."""

    what: str
    returncode: int
    stdout: str
    stderr: str

    def tail(self, n: int) -> list[str]:
        lines = [ln for ln in (self.stderr or self.stdout).splitlines() if ln.strip()]
        return lines[-n:]

    def result(self) -> dict[str, Any]:
        """The JSON object the child printed last (`job_main`)."""
        return json.loads(self.stdout.strip().splitlines()[-1])

    def _lines(self) -> list[str]:
        return [ln for ln in (self.stdout + "\n" + self.stderr).splitlines() if ln.strip()]

    @property
    def reported(self) -> bool:
        """Whether the child failed with its own one-line error (`child_main`): the user's."""
        return self.returncode != 0 and any(ln.startswith(ERROR_PREFIX) for ln in self._lines())

    @property
    def error(self) -> str | None:
        """None on success, else one line: the child's own error line, or its last words."""
        if self.returncode == 0:
            return None
        lines = self._lines()
        mine = [ln for ln in lines if ln.startswith(ERROR_PREFIX)]
        if mine:
            return f"{self.what}: {mine[-1].removeprefix(ERROR_PREFIX)}"
        why = lines[-1].strip()[-300:] if lines else ""
        if self.returncode < 0:
            why = f"killed by signal {-self.returncode}" + (f" ({why})" if why else "")
        return f"{self.what} failed: {why or f'exit {self.returncode}'}"


def run_children(jobs: Sequence[tuple[Sequence[str], str]], parallel: bool = False,
                 env: Mapping[str, str] | None = None) -> list[Finished]:
    """Run `python ARGS` per (ARGS, what) job; `parallel` starts them together (only for jobs
    whose timings do not matter)."""
    full_env = child_env(env)

    def start(args: Sequence[str]) -> tuple[subprocess.Popen, Any, Any]:
        out = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        err = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        return subprocess.Popen([sys.executable, *args], env=full_env, stdout=out, stderr=err), out, err

    def finish(started: tuple[subprocess.Popen, Any, Any], what: str) -> Finished:
        proc, out, err = started
        with out, err:
            proc.wait()
            out.seek(0)
            err.seek(0)
            return Finished(what, proc.returncode, out.read(), err.read())

    if parallel:
        procs = [(start(args), what) for args, what in jobs]
        return [finish(p, what) for p, what in procs]
    return [finish(start(args), what) for args, what in jobs]


@dataclass(frozen=True)
class Job:
    """One step a child runs: `python -m MODULE STEP JOB.json`, with `data` as JOB.json."""

    module: str
    step: str
    data: Mapping[str, Any]
    what: str  # what the step is, for its error line


def run_jobs(jobs: Sequence[Job], parallel: bool = False,
             env: Mapping[str, str] | None = None) -> list[Finished]:
    """Run each job in a child of its own (see `run_children` for `parallel`)."""
    with tempfile.TemporaryDirectory(prefix="edge-m3-job-") as tmp:
        args = []
        for i, job in enumerate(jobs):
            path = Path(tmp) / f"job{i}.json"
            path.write_text(json.dumps(job.data), encoding="utf-8")
            args.append((["-m", job.module, job.step, str(path)], job.what))
        return run_children(args, parallel, env)


def run_json(job: Job, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One job's result. A failure the child reported as the user's (`child_main`: bad input, a
    full disk) is an EdgeM3Error with its line; any other is the builder's: RuntimeError with
    the child's last words."""
    done = run_jobs([job], env=env)[0]
    if done.reported:
        raise EdgeM3Error(done.error or job.what)
    if done.returncode != 0:
        raise RuntimeError(f"{job.what} failed: " + " | ".join(done.tail(5)))
    return done.result()


def child_main(main: Callable[[list[str]], int]) -> None:
    """A child's `__main__`: run it, and turn a user error into the one line the parent shows."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        raise SystemExit(main(sys.argv[1:]))
    except EdgeM3Error as exc:
        sys.stderr.write(ERROR_PREFIX + " ".join(str(exc).split()) + "\n")
        raise SystemExit(2) from None
    except Exception as exc:  # re-raised unless a full disk's (errors.disk_full)
        full = disk_full(exc)
        if full is None:
            raise
        sys.stderr.write(ERROR_PREFIX + str(full) + "\n")
        raise SystemExit(2) from None


def job_main(steps: Mapping[str, Callable[[dict[str, Any]], Mapping[str, Any] | None]]) -> None:
    """A child's `__main__` for `STEP JOB.json`: run the step on the job and print its result
    (an empty object when it returns None) as JSON on the last stdout line."""

    def main(argv: list[str]) -> int:
        step, job_file = argv
        if step not in steps:
            raise SystemExit(f"unknown step {step} (have {', '.join(steps)})")
        result = steps[step](json.loads(Path(job_file).read_text(encoding="utf-8")))
        sys.stdout.write("\n" + json.dumps(dict(result or {})) + "\n")
        return 0

    child_main(main)


def peak_rss() -> int:
    """Peak resident set size of this program, bytes.

    Linux: VmHWM, which starts afresh at exec; ru_maxrss would carry over the parent's peak
    (a child spawned from a 600 MB pytest process reports 600 MB). macOS: ru_maxrss, in bytes.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return peak if sys.platform == "darwin" else peak * 1024


def reset_peak_rss() -> bool:
    """Start the peak afresh from the current RSS, so that a peak read later belongs to the
    step that follows (opening and running a model), not to an earlier one (imports, the
    tokenizer). Linux only (`5` to /proc/self/clear_refs); False where it cannot."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def rss_now() -> int:
    """Current resident set size, bytes (psutil: portable across Linux and macOS)."""
    import psutil

    return int(psutil.Process().memory_info().rss)

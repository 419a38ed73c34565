"""CI from a clean clone, timed: the venv from the lock, then `bash .ci/run`; a row appended.

    python -m tools.bench.ci_run [--source /work/main] [--warm-caches] \\
        [--results docs/results/ci_runs.json]

Why: how long CI takes, and what a fresh machine needs, is a figure people plan by; runs are
history, so each run appends a row to the result file (the last KEEP kept) instead of
replacing the table. `git clone SOURCE` (its committed HEAD) into a temp dir, then in the clone
with CI=true: `make .venv/.dev` (the venv from the lock, timed alone), then `bash .ci/run`
(Debian packages and pytest; the venv is up to date by then), whose pytest summary line gives
the pytest time and the counts. Cold by default: pip's and uv's caches off and
$EDGE_M3_CACHE a new empty folder, so the run makes everything itself (the user's own caches
are not touched); `--warm-caches` keeps them. Tens of minutes: a tool, not a test.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tools.bench import results

KEEP = 6
COLUMNS = ["run", "commit", "venv from the lock", "pytest", "whole `.ci/run`", "result", "machine state"]
# pytest's last line: `== 1 failed, 1,504 passed in 2323.01s (0:38:43) ==`, without the rules under -q
SUMMARY = re.compile(r"^(?:=+ )?(?P<counts>\d[^=\n]*?) in (?P<secs>[\d.]+)s(?: \([\d:]+\))?(?: =+)?\s*$", re.M)


def minutes(secs: float) -> str:
    """'12 min 5 s' (or '45 s')."""
    m, s = divmod(round(secs), 60)
    return f"{m} min {s} s" if m else f"{s} s"


def pytest_summary(output: str) -> tuple[str, float | None]:
    """pytest's last summary line: its counts ('1,406 passed, 2 skipped') and seconds."""
    found = list(SUMMARY.finditer(output))
    if not found:
        return "no pytest summary", None
    m = found[-1]
    counts = re.sub(r"\d{4,}", lambda x: f"{int(x[0]):,}", m["counts"].strip())
    return counts, float(m["secs"])


def next_row(old_rows: Sequence[Sequence[Any]], commit: str, date: str, venv_s: float | None,
             output: str, whole_s: float, rc: int, state: str) -> list[str]:
    """This run's row: numbered after the file's last one."""
    last = max((int(r[0]) for r in old_rows if str(r[0]).isdigit()), default=0)
    counts, secs = pytest_summary(output)
    return [str(last + 1), f"`{commit}` ({date})", "kept" if venv_s is None else f"about {minutes(venv_s)}",
            "" if secs is None else f"{secs:.2f} s ({minutes(secs)})", minutes(whole_s),
            counts if rc == 0 else f"FAILED (exit {rc}): {counts}", state]


def timed(cmd: Sequence[str], cwd: Path, env: dict[str, str]) -> tuple[int, float, str]:
    """Run, echoing the output, and return exit code, seconds and the output."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.write(line)
        lines.append(line)
    return proc.wait(), time.monotonic() - t0, "".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", default=str(results.ROOT), help="the repository to clone (default this one)")
    p.add_argument("--warm-caches", action="store_true",
                   help="keep pip's, uv's and edge-m3's caches (default: a cold run)")
    p.add_argument("--keep", type=int, default=KEEP, help="rows kept in the result file (the latest)")
    results.add_option(p, "ci_runs.json: a row appended")
    a = p.parse_args(argv)
    load = results.Load()
    with tempfile.TemporaryDirectory(prefix="edge-m3-ci-") as tmp_s:
        tmp = Path(tmp_s)
        clone = tmp / "clone"
        subprocess.run(["git", "clone", "-q", a.source, str(clone)], check=True)
        commit, date = subprocess.run(["git", "log", "-1", "--format=%h %cs"], cwd=clone, check=True,
                                      capture_output=True, text=True).stdout.split()
        env = {**os.environ, "CI": "true"}
        if not a.warm_caches:
            (tmp / "cache").mkdir()
            env |= {"PIP_NO_CACHE_DIR": "1", "UV_NO_CACHE": "1", "EDGE_M3_CACHE": str(tmp / "cache")}
        t0 = time.monotonic()
        rc, venv_s, out = timed(["make", ".venv/.dev"], clone, env)
        if rc == 0:
            rc, _, out = timed(["bash", ".ci/run"], clone, env)
        whole_s = time.monotonic() - t0
    state = load.note()
    old = results.read_result(a.results) if a.results and a.results.is_file() else None
    row = next_row(old["rows"] if old else [], commit, date, venv_s, out, whole_s, rc, state)
    print("| " + " | ".join(COLUMNS) + " |\n| " + " | ".join(row) + " |")
    if a.results:
        rows = [*(old["rows"] if old else []), row][-a.keep:]
        results.write_result(
            a.results, title=(old or {}).get("title") or "CI from a clean clone (`bash .ci/run`)",
            module="tools.bench.ci_run", columns=COLUMNS, rows=rows,
            notes=results.existing_notes(a.results) or [
                f"A fresh `git clone` of main, CI=true; {'warm caches' if a.warm_caches else 'cold caches'}. "
                "Each row's machine state is the load average around it; the machine above is the "
                "latest run's."])
    return rc


if __name__ == "__main__":
    raise SystemExit(main())

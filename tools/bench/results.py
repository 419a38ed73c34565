"""The result files behind docs/benchmarks.md: one JSON file per table under docs/results/.

Why: the page is generated (tools.bench.render_page) so that a rerun of a benchmark updates it,
and every table says on which machine, on which date and by which command it was measured.
Each tool in tools/bench writes its table through `write_result` (option `--results FILE`),
which records the machine itself and the load average before and after the run.

Schema, defined here once (`validate`):

    {"title": str, "command": str, "date": "YYYY-MM-DD",
     "machine": {"cpu": str, "flags": str, "cores": int | str, "ram": str},
     "columns": [str, ...], "rows": [[cell, ...], ...], "notes": [str, ...],
     "series": {label: {x: y}}, "plot": {"x": str, "y": str}}   # the last two optional

A cell is a string (shown as is) or a number; every row is as long as `columns`. `series`
holds what a plot draws (x: tokens, y: ms per call), `plot` its axis labels.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = ROOT / "docs" / "results"
KEYS = ("title", "command", "date", "machine", "columns", "rows", "notes")
OPTIONAL_KEYS = ("series", "plot")
MACHINE_KEYS = ("cpu", "flags", "cores", "ram")
# The CPU features the runtimes' kernels choose by: int8 dot products (VNNI), bf16, AMX, Arm's dot
# product and i8mm. The full flag list is on the machine; these decide the figures.
FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx_vnni",
         "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16", "asimd", "asimddp",
         "i8mm", "sve")


def machine() -> dict[str, Any]:
    """This machine as a result records it: CPU model and architecture, the relevant flags, cores, RAM."""
    cpu, flags = platform.processor() or "unknown", ""
    try:
        info = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        info = ""
    have: set[str] = set()
    for line in info.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Model", "CPU part") and cpu in ("unknown", "", platform.machine()):
            cpu = value.strip()
        elif key in ("flags", "Features"):
            have |= set(value.split())
    flags = " ".join(f for f in FLAGS if f in have)
    ram = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                ram = f"{int(line.split()[1]) / 2**20:.0f} GiB"
    except OSError:
        pass
    return {"cpu": f"{cpu} ({platform.machine()})", "flags": flags or "none of " + " ".join(FLAGS[:4]),
            "cores": os.cpu_count() or 0, "ram": ram}


def command_line(module: str, argv: Sequence[str] | None = None, before: Sequence[str] = ()) -> str:
    """The command that reproduces a result: `python -m MODULE ARGS`, as run, after the commands
    that made its input (`before`, e.g. the `edge-m3 bench` whose report it reads), joined by &&."""
    args = list(sys.argv[1:] if argv is None else argv)
    return " && ".join([*before, " ".join(["python", "-m", module, *(shlex.quote(a) for a in args)])])


def markdown_table(lines: Iterable[str]) -> tuple[list[str], list[list[str]]]:
    """The columns and rows of a markdown table a tool printed (its `| a | b |` lines; the
    `| --- |` rule and any other line skipped): what it prints is what its result file holds."""
    cells = [[c.strip() for c in line.strip()[1:-1].split(" | ")] for line in lines
             if line.strip().startswith("|") and line.strip().endswith("|")
             and not set(line.replace("|", "").split()) <= {"---"}]
    if not cells:
        raise ValueError("no markdown table in the output")
    return cells[0], cells[1:]


def existing_notes(path: Path) -> list[str]:
    """A result file's notes without its load note: the prose a rewrite may keep (`--keep-notes`)."""
    try:
        notes = read_result(path)["notes"]
    except (OSError, ValueError):
        return []
    return [n for n in notes if not n.startswith("load average (1 min)")]


class Load:
    """The load average before and after a run (the machine may be shared): a result's note."""

    def __init__(self) -> None:
        self.before = os.getloadavg()[0]
        self.after: float | None = None

    def note(self) -> str:
        self.after = os.getloadavg()[0] if self.after is None else self.after
        return (f"load average (1 min) {self.before:.1f} before the run, {self.after:.1f} after it, "
                f"on {os.cpu_count()} cores")


def add_option(parser: argparse.ArgumentParser, feeds: str) -> None:
    """`--results FILE`: the tool also writes its table there (docs/results/NAME.json)."""
    parser.add_argument("--results", type=Path, default=None, metavar="FILE",
                        help=f"also write the table as a result file for docs/benchmarks.md ({feeds})")


def validate(data: Any, where: str = "result") -> dict[str, Any]:
    """The schema above, or ValueError naming what is wrong."""
    def bad(what: str) -> ValueError:
        return ValueError(f"{where}: {what}")

    if not isinstance(data, dict):
        raise bad("not a JSON object")
    missing = [k for k in KEYS if k not in data]
    extra = [k for k in data if k not in KEYS + OPTIONAL_KEYS]
    if missing or extra:
        raise bad(f"keys missing {missing}, unknown {extra}")
    for k in ("title", "command", "date"):
        if not isinstance(data[k], str) or not data[k].strip():
            raise bad(f"{k} must be a non-empty string")
    try:
        datetime.date.fromisoformat(data["date"])
    except ValueError:
        raise bad(f"date {data['date']!r} is not YYYY-MM-DD") from None
    m = data["machine"]
    if not isinstance(m, dict) or sorted(m) != sorted(MACHINE_KEYS):
        raise bad(f"machine must hold exactly {MACHINE_KEYS}")
    cols = data["columns"]
    if not (isinstance(cols, list) and cols and all(isinstance(c, str) for c in cols)):
        raise bad("columns must be a list of strings")
    if not isinstance(data["rows"], list) or not data["rows"]:
        raise bad("rows must be a non-empty list")
    for i, row in enumerate(data["rows"]):
        if not isinstance(row, list) or len(row) != len(cols):
            raise bad(f"row {i} must be a list of {len(cols)} cells")
        if not all(isinstance(c, str | int | float) and not isinstance(c, bool) for c in row):
            raise bad(f"row {i}: a cell is a string or a number")
    if not (isinstance(data["notes"], list) and all(isinstance(n, str) for n in data["notes"])):
        raise bad("notes must be a list of strings")
    series = data.get("series")
    if series is not None and not (isinstance(series, dict) and all(
            isinstance(v, dict) and all(isinstance(y, int | float) for y in v.values())
            for v in series.values())):
        raise bad("series must map a label to {x: number}")
    return data


def read_result(path: Path) -> dict[str, Any]:
    """One result file, checked against the schema."""
    return validate(json.loads(path.read_text(encoding="utf-8")), str(path))


def write_result(path: Path, *, title: str, module: str, columns: Sequence[str],
                 rows: Iterable[Sequence[Any]], notes: Iterable[str] = (), load: Load | None = None,
                 series: Mapping[str, Mapping[Any, float]] | None = None,
                 plot: Mapping[str, str] | None = None, argv: Sequence[str] | None = None,
                 before: Sequence[str] = ()) -> Path:
    """Write one table as a result file, atomically, with this machine, today's date, the command
    (`before`, then `module` and the arguments it ran with) and the load average; returns the path."""
    from edge_m3.common.files import write_atomic

    data: dict[str, Any] = {
        "title": title, "command": command_line(module, argv, before),
        "date": datetime.date.today().isoformat(), "machine": machine(),
        "columns": list(columns), "rows": [list(r) for r in rows],
        "notes": [*notes, *([load.note()] if load else [])]}
    if series:
        data["series"] = {label: {str(x): float(y) for x, y in pts.items()} for label, pts in series.items()}
    if plot:
        data["plot"] = dict(plot)
    validate(data, str(path))
    write_atomic(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n", "results")
    print(f"results: {path}", file=sys.stderr)
    return path

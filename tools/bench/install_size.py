"""The disk size of `pip install edge-m3` (the device side), per Python and platform.

    python -m tools.bench.install_size [--pythons python3.11,python3.13] [--aarch64 3.11,3.13] \\
        [--build] [--results docs/results/install_size.json]

Why: the device side has a size target (150 MB), and the dependencies decide it. Builds this
checkout's wheel (`pip wheel --no-deps .`), then for each Python found: a fresh venv in a temp
dir, `pip install WHEEL` held to the runtime lock (requirements/runtime.txt) from the package
index; and for each aarch64 Python the packages only, as tools/run/arm64_rig.py resolves them
(`pip install --target DIR --platform manylinux_*_aarch64 --only-binary=:all:`, held to
requirements/aarch64-pyNNN.txt). Each size twice: as installed, and without the bytecode
(`__pycache__`, what `--no-compile` leaves out). `--build` adds the `[build]` venv for
comparison (~1.9 GB). Needs PyPI; minutes per install: a tool, not a test.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tools.bench import results

ROOT = results.ROOT
ARCH = {"x86_64": "x86-64", "arm64": "aarch64"}.get(platform.machine(), platform.machine())
WHEELS = Path("/opt/wheels")  # torch's CPU build, as the Makefile finds it (the [build] row only)


def sizes(folder: Path) -> tuple[int, int]:
    """Bytes of every file under `folder`, and of those outside `__pycache__` folders."""
    total = no_pyc = 0
    for f in folder.rglob("*"):
        if f.is_file() and not f.is_symlink():
            n = f.stat().st_size
            total += n
            no_pyc += 0 if "__pycache__" in f.parts else n
    return total, no_pyc


def mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB"


def _run(cmd: Sequence[object]) -> str:
    done = subprocess.run(list(map(str, cmd)), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"install_size: {' '.join(map(str, cmd[:4]))} ... failed: "
                         f"{(done.stderr or done.stdout).strip()[-400:]}")
    return done.stdout.strip()


def venv_size(python: str, spec: str, constraints: Path, where: Path) -> tuple[str, int, int]:
    """A fresh venv of `python` with `spec` installed: its Python version and sizes."""
    venv = where / f"venv-{Path(python).name}"
    _run([python, "-m", "venv", venv])
    links = ["--find-links", WHEELS] if WHEELS.is_dir() else []
    _run([venv / "bin/python", "-m", "pip", "install", "-q", "--disable-pip-version-check", *links,
          "-c", constraints, spec])
    version = _run([venv / "bin/python", "-c", "import platform; print(platform.python_version())"])
    return (version, *sizes(venv))


def aarch64_size(wheel: Path, py: str, where: Path, extras: str = "") -> tuple[int, int]:
    """The aarch64 packages of `wheel` for Python `py`, as the arm64 rig installs them."""
    from tools.run.arm64_rig import pip_target

    target = where / f"aarch64-{py}{extras}"
    pip_target(target, f"{wheel}[{extras}]" if extras else str(wheel), py)
    return sizes(target)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pythons", default="python3.11,python3.13",
                   help="interpreters for the venv rows (those not found are skipped)")
    p.add_argument("--aarch64", default="3.11,3.13", help="Python versions of the aarch64 rows ('' for none)")
    p.add_argument("--tflite-runtime", action="store_true",
                   help="also the `[tflite-runtime]` aarch64 packages (Python 3.11)")
    p.add_argument("--build", action="store_true", help="also the `[build]` venv (for comparison)")
    results.add_option(p, "install_size.json")
    a = p.parse_args(argv)
    load = results.Load()
    from tools.run.arm64_rig import build_wheel

    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="edge-m3-install-size-") as tmp_s:
        tmp = Path(tmp_s)
        wheel = build_wheel(tmp / "wheel")
        for python in [x for x in a.pythons.split(",") if x]:
            if shutil.which(python) is None:
                print(f"install_size: {python} not found, skipped", file=sys.stderr)
                continue
            version, total, no_pyc = venv_size(python, str(wheel), ROOT / "requirements/runtime.txt", tmp)
            rows.append([f"venv, {ARCH}", version, mb(total), mb(no_pyc)])
            shutil.rmtree(tmp / f"venv-{Path(python).name}")
        for py in [x for x in a.aarch64.split(",") if x]:
            rows.append(["packages, aarch64", py, *map(mb, aarch64_size(wheel, py, tmp))])
        if a.tflite_runtime:
            total, _ = aarch64_size(wheel, "3.11", tmp, "tflite-runtime")
            rows.append(["`[tflite-runtime]` packages, aarch64", "3.11", mb(total), ""])
        if a.build:
            version, total, _ = venv_size(a.pythons.split(",")[0], f"{wheel}[build]",
                                          ROOT / "requirements/build.txt", tmp)
            rows.append([f"`[build]` venv, {ARCH} (for comparison)", version, mb(total), ""])
    columns = ["install", "Python", "size", "without bytecode (`--no-compile`)"]
    print("| " + " | ".join(columns) + " |")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    if a.results:
        results.write_result(
            a.results, title="Size of `pip install edge-m3` (the device side)",
            module="tools.bench.install_size", columns=columns, rows=rows, load=load,
            notes=[f"The wheel of the checkout ({wheel.name}, `pip wheel --no-deps .`) with its declared "
                   "dependencies held to the lock; aarch64: packages only, as tools/run/arm64_rig.py "
                   "resolves them (a venv adds 13-17 MB of pip). MB = 10^6 bytes of file contents."])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

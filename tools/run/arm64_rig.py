"""edge-m3's runtime-only install on an emulated aarch64 Debian, as a Raspberry Pi would run it.

    python -m tools.run.arm64_rig [--suite bookworm|trixie] [--extras tflite-runtime] -- check BUNDLE
    python -m tools.run.arm64_rig --results docs/results/fidelity_devices.json -- check BUNDLE

`--results FILE` (with `check`): the run's golden replay figures become this machine's rows of
that table (tools/bench/from_report.py's `check` layout), the other machines' rows kept.

Made with Debian's own tools, no downloaded images: `debootstrap --foreign` fetches the arm64
packages of the suite (bookworm: Python 3.11, trixie: Python 3.13, what Raspberry Pi OS ships
now) and `dpkg -x` unpacks them (the second stage cannot run without binfmt_misc, and the
root only needs a Python). `qemu-user-static` runs that Python; the launcher keeps argv[0] on
itself (`qemu -0`), so the children edge-m3 starts (`sys.executable`) come back through it.
The host's pip installs the project's wheel with its declared runtime dependencies from the
package index's aarch64 wheels (`--platform manylinux_*_aarch64 --only-binary=:all:`), held to
the locked versions (requirements/aarch64-py311.txt, -py313.txt), so the run proves that
`pip install edge-m3` alone is enough there.

The root sees a Raspberry Pi 4's /proc/cpuinfo (Cortex-A72, emulated with `-cpu cortex-a72`):
qemu 7.2 passes the host's x86 /proc/cpuinfo through, and LiteRT >= 2.2's CPU detection
crashes on it (2.1 and older do not); on a real board the file is the board's own.

Roots and dependency sets are cached under $EDGE_M3_CACHE/arm64 (default ~/.cache/edge-m3),
keyed by their inputs; the first run needs deb.debian.org and PyPI, later runs only re-install
the project's own wheel. Needs root (debootstrap), debootstrap and qemu-user-static
(`apt-get install debootstrap qemu-user-static`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from edge_m3.common.files import atomic_dir
from edge_m3.lab.references import default_cache_dir

ROOT = Path(__file__).resolve().parents[2]

MIRROR = "http://deb.debian.org/debian"
# Debian suite -> its Python; bookworm is Raspberry Pi OS's previous release, trixie its current.
SUITES = {"bookworm": "3.11", "trixie": "3.13"}
CPU = "cortex-a72"  # Raspberry Pi 4
# manylinux tags up to trixie's glibc 2.41 (pip takes only the platform tags it is given).
PLATFORMS = ["manylinux2014_aarch64", *(f"manylinux_2_{n}_aarch64" for n in range(17, 42))]
LAUNCHER = "usr/bin/python-arm64"
FORMAT = 1  # bump when the way a root or a dependency set is made changes


class RigError(RuntimeError):
    """A step of making the rig failed (no network, no root, a missing tool)."""


def missing_tools() -> list[str]:
    """What this machine lacks to make a rig (empty: it can)."""
    out = [t for t in ("debootstrap", "dpkg", "qemu-aarch64-static") if shutil.which(t) is None]
    if os.geteuid() != 0:
        out.append("root (debootstrap)")
    return out


def cache_dir() -> Path:
    return default_cache_dir() / "arm64"


def _key(*parts: object) -> str:
    return hashlib.sha256(json.dumps([FORMAT, *map(str, parts)]).encode()).hexdigest()[:16]


def _run(cmd: Sequence[object], what: str) -> None:
    done = subprocess.run(list(map(str, cmd)), capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RigError(f"{what} failed (exit {done.returncode}): {' | '.join(tail)}")


def pi_cpuinfo(cpus: int) -> str:
    """A Raspberry Pi 4's /proc/cpuinfo, one block per host CPU (the host's sysfs lists them)."""
    block = ("processor\t: {i}\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm crc32 cpuid\n"
             "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd08\n"
             "CPU revision\t: 3\n")
    return ("\n".join(block.format(i=i) for i in range(cpus))
            + "\nHardware\t: BCM2835\nModel\t\t: Raspberry Pi 4 Model B (emulated)\n")


def make_root(suite: str, cache: Path | None = None) -> Path:
    """The unpacked arm64 root of `suite` with its Python and the launcher (cached)."""
    if suite not in SUITES:
        raise RigError(f"suite {suite}: choose from {', '.join(SUITES)}")
    py = SUITES[suite]
    cache = cache or cache_dir()
    cpuinfo = pi_cpuinfo(os.cpu_count() or 1)
    root = cache / f"root-{suite}-{_key(suite, py, MIRROR, CPU, cpuinfo)}"
    if not (root / ".complete").is_file():
        with atomic_dir(root) as tmp:
            _fill_root(tmp, root, suite, py, cpuinfo)
        (root / ".complete").touch()
    return root


def _fill_root(tmp: Path, root: Path, suite: str, py: str, cpuinfo: str) -> None:
    _run(["debootstrap", "--foreign", "--arch=arm64", "--variant=minbase", f"--include=python{py}",
          suite, tmp, MIRROR], f"debootstrap {suite} arm64")
    debs = sorted((tmp / "var/cache/apt/archives").glob("*.deb"))
    if not any(d.name.startswith(f"python{py}_") for d in debs):
        raise RigError(f"debootstrap {suite}: no python{py} package was fetched")
    for deb in debs:  # the second stage needs binfmt_misc; unpacking is all a Python needs
        _run(["dpkg", "-x", deb, tmp], f"dpkg -x {deb.name}")
        deb.unlink()
    (tmp / "proc").mkdir(exist_ok=True)
    (tmp / "proc/cpuinfo").write_text(cpuinfo)
    launcher = tmp / LAUNCHER
    launcher.write_text(
        "#!/bin/sh\n# The arm64 Python under qemu-user; argv[0] stays this script, so the "
        "children edge-m3 starts come back through here.\n"
        f'exec {shutil.which("qemu-aarch64-static")} -cpu {CPU} -0 "$0" -L {root} '
        f'{root}/usr/bin/python{py} "$@"\n')
    launcher.chmod(0o755)


def build_wheel(out: Path) -> Path:
    """This checkout as a wheel (pure Python: the same file for every platform). Built with
    this environment's setuptools (offline); with an isolated one when that is too old."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, ROOT]
    try:
        _run([*cmd, "--no-build-isolation"], "pip wheel .")
    except RigError:
        _run(cmd, "pip wheel . (isolated build)")
    (wheel,) = sorted(out.glob("edge_m3-*.whl"))
    return wheel


def _requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    return [ln for ln in lines if ln.startswith("Requires-Dist:")]


def lock_file(py: str) -> Path:
    """The locked aarch64 runtime set for this Python (`make lock`): the index's newest release
    changes nothing here until the lock is refreshed on purpose."""
    return ROOT / "requirements" / f"aarch64-py{py.replace('.', '')}.txt"


def pip_target(target: Path, spec: str, py: str, no_deps: bool = False) -> None:
    """pip install `spec` into `target` as aarch64 wheels for Python `py` (the lock's
    constraints unless `no_deps`)."""
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
           "--target", target, "--only-binary=:all:", "--implementation", "cp",
           "--python-version", py, *[a for p in PLATFORMS for a in ("--platform", p)]]
    deps = ["--no-deps"] if no_deps else ["-c", str(lock_file(py))]
    _run([*cmd, *deps, spec], f"pip install {spec} (aarch64, {py})")


def install(wheel: Path, suite: str, extras: Sequence[str] = (), cache: Path | None = None) -> list[Path]:
    """PYTHONPATH entries: the wheel itself, then its dependencies as the index resolves them
    for aarch64 (cached by the wheel's declared requirements, so only those changes refetch)."""
    py = SUITES[suite]
    cache = cache or cache_dir()
    spec = f"{wheel}[{','.join(extras)}]" if extras else str(wheel)
    key = _key(py, sorted(extras), _requires(wheel), PLATFORMS, lock_file(py).read_text())
    deps = cache / f"site-{suite}-{key}"
    if not (deps / ".complete").is_file():
        with atomic_dir(deps) as tmp:
            pip_target(tmp, spec, py)
        (deps / ".complete").touch()
    own = Path(tempfile.mkdtemp(prefix="edge-m3-arm64-pkg-"))
    pip_target(own, str(wheel), py, no_deps=True)  # this checkout, over the cached one
    return [own, deps]


def environment(paths: Sequence[Path], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The emulated Python's environment: `paths` as its only site, none of the host's."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return full | {"PYTHONPATH": os.pathsep.join(map(str, paths)), "PYTHONNOUSERSITE": "1",
                   "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}


def run(root: Path, paths: Sequence[Path], args: Sequence[str], cwd: Path | None = None,
        timeout: float | None = None) -> subprocess.CompletedProcess:
    """`python ARGS` on the emulated aarch64 Python with `paths` as its site (output captured)."""
    return subprocess.run([str(root / LAUNCHER), *args], cwd=cwd, env=environment(paths),
                          capture_output=True, text=True, timeout=timeout)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", default="bookworm", choices=sorted(SUITES))
    p.add_argument("--extras", default="", help="comma list of edge-m3 extras (e.g. tflite-runtime)")
    p.add_argument("--results", type=Path, default=None, metavar="FILE",
                   help="with check: write its figures as this machine's rows of a result file for "
                        "docs/benchmarks.md (fidelity_devices.json), the other rows kept")
    p.add_argument("args", nargs=argparse.REMAINDER,
                   help="after --: edge-m3 arguments (e.g. check BUNDLE)")
    a = p.parse_args(argv)
    missing = missing_tools()
    if missing:
        print(f"arm64_rig: missing {', '.join(missing)} (apt-get install debootstrap "
              "qemu-user-static)", file=sys.stderr)
        return 2
    args = [x for x in a.args if x != "--"] or ["--help"]
    if a.results and (args[0] != "check" or "--report" in args):
        p.error("--results needs `-- check BUNDLE ...` without --report (the rig reads its own)")
    try:
        root = make_root(a.suite)
        with tempfile.TemporaryDirectory(prefix="edge-m3-arm64-wheel-") as tmp:
            paths = install(build_wheel(Path(tmp)), a.suite, [e for e in a.extras.split(",") if e])
    except RigError as exc:
        print(f"arm64_rig: {exc}", file=sys.stderr)
        return 2
    report = Path(tempfile.mkdtemp(prefix="edge-m3-arm64-report-")) / "check"
    try:
        rc = subprocess.run([str(root / LAUNCHER), "-m", "edge_m3.cli", *args,
                             *(["--report", str(report)] if a.results else [])],
                            env=environment(paths)).returncode
        if a.results and (report / "report.json").is_file():
            write_results(report, a.results, sys.argv[1:] if argv is None else argv)
        return rc
    finally:
        shutil.rmtree(paths[0], ignore_errors=True)
        shutil.rmtree(report.parent, ignore_errors=True)


def write_results(report: Path, results: Path, argv: Sequence[str]) -> Path:
    """The check's figures as this machine's rows of `results` (the other machines' kept)."""
    from tools.bench.from_report import convert

    return convert("check", [report], results, merge=True, argv=argv, module="tools.run.arm64_rig",
                   before=[])


if __name__ == "__main__":
    raise SystemExit(main())

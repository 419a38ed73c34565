"""The lock (requirements/*.txt): complete for its install set, the sets agree with each other,
and the environment the suite runs in is the locked one (so a green CI proves the lock)."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements"
# Lock file -> the extras of pyproject.toml it installs (beside the base dependencies).
SETS = {"runtime": (), "tflite-runtime": ("tflite-runtime",), "onnx": ("onnx",),
        "parquet": ("parquet",), "ray": ("ray",), "build": ("build",), "dev": ("dev",)}
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)")


def pins(name: str) -> dict[str, str]:
    """A lock file's `name==version` lines, by canonical name."""
    out = {}
    for line in (LOCK / f"{name}.txt").read_text().splitlines():
        m = PIN.match(line)
        if m:
            out[canonicalize_name(m[1])] = m[2]
    return out


def direct(extras: tuple[str, ...]) -> list[Requirement]:
    """pyproject's requirements for an install set, self-references (edge-m3[x]) expanded."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for r in map(Requirement, project["optional-dependencies"][extra]):
            if canonicalize_name(r.name) == "edge-m3":
                todo += sorted(r.extras)
            else:
                reqs.append(r)
    return reqs


@pytest.mark.parametrize("lock", sorted(SETS))
def test_lock_pins_every_requirement_within_its_range(lock: str) -> None:
    got = pins(lock)
    env = {"python_version": "3.11", "python_full_version": "3.11.7", "platform_system": "Linux",
           "platform_machine": "x86_64", "sys_platform": "linux", "extra": ""}
    for req in direct(SETS[lock]):
        if req.marker and not req.marker.evaluate(env):
            continue
        name = canonicalize_name(req.name)
        assert name in got, f"requirements/{lock}.txt lacks {req} (run make lock)"
        assert req.specifier.contains(got[name], prereleases=True), \
            f"requirements/{lock}.txt pins {name}=={got[name]}, outside {req} (run make lock)"


@pytest.mark.parametrize(("lock", "python", "extras"), [("aarch64-py311", "3.11", ("tflite-runtime",)),
                                                   ("aarch64-py313", "3.13", ())])
def test_aarch64_locks_pin_the_runtime_set(lock: str, python: str, extras: tuple[str, ...]) -> None:
    """The emulated Raspberry Pi's sets (tools/run/arm64_rig.py installs with them as constraints)."""
    got = pins(lock)
    env = {"python_version": python, "python_full_version": python + ".0", "platform_system": "Linux",
           "platform_machine": "aarch64", "sys_platform": "linux", "extra": ""}
    for req in direct(extras):
        if req.marker and not req.marker.evaluate(env):
            continue
        name = canonicalize_name(req.name)
        assert name in got and req.specifier.contains(got[name], prereleases=True), (lock, str(req))


def test_every_set_agrees_with_dev() -> None:
    """One version of each package across the sets: each is resolved against dev's pins."""
    dev = pins("dev")
    for lock in [*SETS, "bootstrap"]:
        for name, version in pins(lock).items():
            if name in dev:
                assert dev[name] == version, f"requirements/{lock}.txt: {name} {version} != dev {dev[name]}"


def test_torch_is_the_cpu_build() -> None:
    """PyPI's torch is the CUDA build (several GB, and its triton crashed pytest here)."""
    dev = pins("dev")
    assert dev["torch"].endswith("+cpu")
    assert not [n for n in dev if n.startswith(("nvidia-", "cuda-")) or n == "triton"]


def test_this_environment_is_the_lock() -> None:
    """The suite runs in what `make test` installed: every locked package at its locked version."""
    wrong = []
    for name, version in pins("dev").items():
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            have = None
        if have != version:
            wrong.append(f"{name} {have} (locked {version})")
    assert not wrong, "not the locked environment (make test rebuilds it): " + ", ".join(wrong)

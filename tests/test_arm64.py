"""`edge-m3 check` on aarch64, from `pip install edge-m3` alone, as a Raspberry Pi runs it.

An arm64 Debian root made with Debian's own tools (debootstrap + dpkg; no downloaded images),
run by qemu-user-static as a Raspberry Pi 4 (Cortex-A72); edge-m3's wheel installed there with
its declared dependencies from the package index's aarch64 wheels (tools/run/arm64_rig.py). Then
`edge-m3 check` replays tiny bundles built here on x86-64: bookworm (Python 3.11) with LiteRT
and tflite-runtime 2.14 (the [tflite-runtime] extra), trixie (Python 3.13, Raspberry Pi OS's
current base) with LiteRT. ARM's XNNPACK kernels differ from x86's, so this is the proof that
a bundle gives the same answers there, within the variant's device tolerance. LiteRT runs
through its Interpreter (`check --weight-cache off`): its CompiledModel API, which the XNNPACK
weight cache needs, dies with SIGILL under qemu-user 7.2 (not known on real hardware).

CI cost (2-core x86-64 VM, measured 2026-11-23): cold cache about 2.5 min (two debootstraps
~20 s each, unpacking, three aarch64 dependency sets ~15 s each, the shared tiny bundles
~40 s, three emulated checks ~10 s each); warm cache about 45 s (each run re-installs only
edge-m3's own wheel). The roots and dependency sets are cached under $EDGE_M3_CACHE/arm64
(default ~/.cache/edge-m3/arm64, ~0.9 GB) keyed by their inputs; only a cold cache touches
the network (deb.debian.org, PyPI). Needs root, debootstrap and qemu-user-static (.ci/run
installs them); skipped without them, or offline, unless EDGE_M3_REQUIRE_ARM64=1.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tools.run import arm64_rig as rig

pytestmark = [pytest.mark.models, pytest.mark.slow]
REQUIRED = os.environ.get("EDGE_M3_REQUIRE_ARM64") == "1"


def _unavailable(why: str) -> None:
    if REQUIRED:
        pytest.fail(f"EDGE_M3_REQUIRE_ARM64=1 but {why}")
    pytest.skip(why)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = rig.missing_tools()
    if missing:
        _unavailable(f"missing {', '.join(missing)} (apt-get install debootstrap qemu-user-static)")
    return rig.build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.mark.parametrize(("suite", "extras", "quant", "runtimes"), [
    ("bookworm", ["tflite-runtime"], "fp32", ["tflite-runtime", "litert"]),
    ("bookworm", ["tflite-runtime"], "int8-tflite214", ["tflite-runtime", "litert"]),
    ("trixie", [], "int8", ["litert"]),
])
def test_check_on_emulated_aarch64(wheel: Path, tiny_bundles: dict[str, Path], tmp_path: Path,
                                   suite: str, extras: list[str], quant: str,
                                   runtimes: list[str]) -> None:
    try:
        root = rig.make_root(suite)
        paths = rig.install(wheel, suite, extras)
    except rig.RigError as exc:
        _unavailable(str(exc))
    try:
        for module in ("tensorflow", "sentencepiece", "torch", "onnx", "matplotlib"):
            assert not (paths[1] / module).exists(), f"{module} came with the runtime install"
        # --weight-cache off: LiteRT's CompiledModel (the weight-cache path) dies with SIGILL
        # under qemu-user here; its Interpreter runs. Real Arm hardware is not covered by this.
        done = rig.run(root, paths, ["-m", "edge_m3.cli", "check", str(tiny_bundles[quant]),
                                     "--report", str(tmp_path / "r"), "--repeats", "2",
                                     "--warmup", "1", "--weight-cache", "off"],
                       cwd=tmp_path, timeout=900)
    finally:
        shutil.rmtree(paths[0], ignore_errors=True)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["passed"] and report["runtimes_checked"] == runtimes
    assert report["device"]["machine"] == "aarch64"
    assert report["device"]["python"].startswith(rig.SUITES[suite] + ".")
    for rt in runtimes:
        assert report["runtimes"][rt]["golden"]["cases"] == 12

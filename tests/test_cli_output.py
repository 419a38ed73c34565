"""What the command line writes while it works (issue 55 item 3): results on stdout, progress on a
terminal's stderr only (not with -q), and the runtimes' native log lines only with -v."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from edge_m3.runtime.native_logs import quiet_native, retell

BAR = "━"  # rich's bar; in no result or error line


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "edge_m3.cli", *args]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("EDGE_M3_QUIET", "EDGE_M3_VERBOSE", "TTY_INTERACTIVE", "TTY_COMPATIBLE")}
    return {**env, "TERM": "xterm-256color", "COLUMNS": "100"}


def _on_a_terminal(argv: list[str], stdout: Path) -> str:
    """Run with stderr on a pseudo-terminal (stdout to a file); what the terminal got."""
    master, slave = pty.openpty()
    with stdout.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=slave, env=_env())
    os.close(slave)
    got = b""
    while True:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            got += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=120)
    os.close(master)
    assert proc.returncode == 0, got.decode(errors="replace")
    return got.decode("utf-8", errors="replace")


@pytest.fixture(scope="module")
def fp32(tiny_bundles: dict[str, Path]) -> Path:
    return tiny_bundles["fp32"]


def test_embed_prints_its_json_line_and_nothing_else(fp32: Path) -> None:
    """LiteRT's INFO lines (RegisterAccelerator ...) no longer precede the JSON line."""
    proc = subprocess.run(_cli("embed", str(fp32), "hello world"), capture_output=True, text=True,
                          env=_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 and "dense_vecs" in json.loads(lines[0])


@pytest.mark.parametrize("runtime", ["litert", "tflite-runtime"])
def test_each_runtime_is_quiet(fp32: Path, runtime: str) -> None:
    proc = subprocess.run(_cli("embed", str(fp32), "hello", "--runtime", runtime), capture_output=True,
                          text=True, env=_env())
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_check_workers_are_quiet(fp32: Path, tmp_path: Path) -> None:
    """check loads each runtime in a worker process of its own: no native line from those either."""
    proc = subprocess.run(_cli("check", str(fp32), "--repeats", "1", "--warmup", "0", "--report",
                               str(tmp_path / "report")), capture_output=True, text=True, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert "INFO" not in proc.stdout + proc.stderr and "RegisterAccelerator" not in proc.stdout + proc.stderr


def test_verbose_lets_the_native_lines_through(fp32: Path) -> None:
    for argv in (["-v", "embed", str(fp32), "hello"], ["embed", str(fp32), "hello", "--verbose"]):
        proc = subprocess.run(_cli(*argv), capture_output=True, text=True, env=_env())
        assert proc.returncode == 0, proc.stderr
        assert "INFO: " in proc.stderr  # LiteRT's own (RegisterAccelerator, XNNPACK delegate)
        assert len(proc.stdout.splitlines()) == 1


def test_progress_only_on_a_terminal(fp32: Path, tmp_path: Path) -> None:
    """A bar on a terminal's stderr; none in a pipe (only the throughput line); none with -q."""
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"text number {i}\n" for i in range(6)), encoding="utf-8")
    argv = _cli("embed", str(fp32), "--texts", str(texts))
    piped = subprocess.run(argv, capture_output=True, text=True, env=_env())
    assert piped.returncode == 0, piped.stderr
    assert len(piped.stdout.splitlines()) == 6
    assert [line.split(" in ")[0] for line in piped.stderr.splitlines()] == ["6 text(s)"]

    shown = _on_a_terminal(argv, tmp_path / "out1")
    assert BAR in shown and "embed" in shown
    assert "INFO" not in shown
    assert len((tmp_path / "out1").read_text(encoding="utf-8").splitlines()) == 6

    for quiet in (["-q", *argv[3:]], [*argv[3:], "--quiet"]):
        hidden = _on_a_terminal(_cli(*quiet), tmp_path / "out2")
        assert BAR not in hidden
        assert len((tmp_path / "out2").read_text(encoding="utf-8").splitlines()) == 6


def test_index_progress_on_a_terminal_only(fp32: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"passage {i}\n" for i in range(5)), encoding="utf-8")
    shown = _on_a_terminal(_cli("index", str(fp32), str(corpus), "--out", str(tmp_path / "ix1")),
                           tmp_path / "out")
    assert BAR in shown and "index" in shown
    piped = subprocess.run(_cli("index", str(fp32), str(corpus), "--out", str(tmp_path / "ix2")),
                           capture_output=True, text=True, env=_env())
    assert piped.returncode == 0 and BAR not in piped.stderr and "INFO" not in piped.stderr
    assert piped.stderr.splitlines()[-1].startswith("5 passage(s) in ")


def test_native_lines_are_retold_in_our_words() -> None:
    """INFO and the absent NPU are dropped; a delegate refused or an error is one line of ours."""
    log = "\n".join([
        "INFO: [accelerator_registry.cc:54] RegisterAccelerator: ptr=0x1, name=NpuAccelerator",
        "WARNING: [npu_registry.cc:34] NPU accelerator could not be loaded and registered: "
        "kLiteRtStatusErrorNotFound.",
        "INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",
        "ERROR: Failed to apply XNNPACK delegate.",
        "ERROR: Failed to apply XNNPACK delegate.",
        "WARNING: [model.cc:3] something new",
    ])
    told = retell("litert", log)
    assert len(told) == 2
    assert told[0].startswith("edge-m3: litert error: the XNNPACK delegate was not applied")
    assert told[1] == "edge-m3: litert warning: something new"


def test_quiet_native_catches_fd2_and_restores_it(capfd: pytest.CaptureFixture[str]) -> None:
    with quiet_native("litert"):
        os.write(2, b"INFO: [environment.cc:36] Creating LiteRT environment with options\n")
        os.write(2, b"ERROR: [compiled_model.cc:1] could not open model\n")
    os.write(2, b"after\n")
    err = capfd.readouterr().err
    assert err == "edge-m3: litert error: could not open model\nafter\n"

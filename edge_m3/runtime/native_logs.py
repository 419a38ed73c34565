"""The runtimes' own native logs, kept off the user's terminal unless `-v`.

LiteRT (ai-edge-litert 2.x) writes a dozen INFO lines from C++ (`INFO: [accelerator_registry.cc:54]
RegisterAccelerator ...`, about NPU and GPU accelerators a CPU run never uses) straight to file
descriptor 2 whenever it creates an environment, loads a model, makes its first buffers and
frees them. No switch reaches them from Python: the C API's minimum severity
(LiteRtSetMinLoggerSeverity, or the environment option kLiteRtEnvOptionTagMinLoggerSeverity) is
not in the wheel's EnvironmentOptions, the wheel's Python extension links its own private copy of
the logger (setting the one in libLiteRt.so through ctypes leaves these lines as they are), and
TF_CPP_MIN_LOG_LEVEL is TensorFlow's switch, not LiteRT's. So `quiet_native` points fd 2 at a
scratch file while a runtime loads, first runs or releases a model, then says what mattered in
edge-m3's words (`retell`) and drops the rest. onnxruntime has its own switch
(SessionOptions.log_severity_level, `ort_log_level`); tflite-runtime 2.14 says nothing on a CPU run.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator

from edge_m3.common.progress import verbose

# `SEVERITY: [file.cc:N] message` (LiteRT) or `SEVERITY: message` (TF Lite's minimal logger).
_LINE = re.compile(r"^(VERBOSE|DEBUG|INFO|WARNING|ERROR|FATAL): (?:\[[^\]]*\] )?(.*)$")
# WARNING lines that say nothing to a CPU run: edge-m3 asks LiteRT for the CPU only, and points its
# plugin folders away from the NPU libraries (runners.LiteRTRunner), so the NPU is never there.
_NOISE = (re.compile(r"NPU accelerator could not be loaded"),)
# What a user should hear, in edge-m3's words: the pattern, and the sentence (`{0}`: LiteRT's own).
_TOLD = (
    (re.compile(r"(?i)fail\w* to (apply|create|prepare).*delegate|delegate.*(fail|not applied|refus)"),
     "the XNNPACK delegate was not applied, so this model runs on the slower reference kernels "
     "({0})"),
    (re.compile(r"(?i)fall(ing)? ?back"), "fell back: {0}"),
)

_lock = threading.RLock()  # fd 2 is one per process: one redirection at a time, nested ones joined
_depth = 0
_hushed = False


def retell(runtime: str, text: str) -> list[str]:
    """The lines of a runtime's captured log a user should see, as edge-m3's own: INFO and finer
    dropped, known noise dropped, a warning or error said once as `edge-m3: RUNTIME: ...`."""
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _LINE.match(line)
        if m is not None:
            severity, message = m.groups()
            if severity in ("VERBOSE", "DEBUG", "INFO") or any(p.search(message) for p in _NOISE):
                continue
        else:
            severity, message = "", line
        said = next((t.format(message) for p, t in _TOLD if p.search(message)), message)
        kind = "error" if severity in ("ERROR", "FATAL") else "warning"
        text_line = f"edge-m3: {runtime} {kind}: {said}"
        if text_line not in out:
            out.append(text_line)
    return out


@contextlib.contextmanager
def quiet_native(runtime: str) -> Iterator[None]:
    """Within the block, what native code writes to fd 2 is caught and `retell`-ed afterwards
    (with -v, EDGE_M3_VERBOSE=1, nothing is caught). Python's own stderr writes in the block are
    caught too, so keep blocks to loading and releasing a model."""
    global _depth
    if verbose():
        yield
        return
    with _lock:
        _hush_at_exit()
        if _depth:  # already caught by an outer block
            _depth += 1
            try:
                yield
            finally:
                _depth -= 1
            return
        try:
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed or broken stderr: nothing to keep clean
            pass
        caught = tempfile.TemporaryFile()
        saved = os.dup(2)
        os.dup2(caught.fileno(), 2)
        _depth = 1
        try:
            yield
        finally:
            _depth = 0
            try:
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            lines = retell(runtime, caught.read().decode("utf-8", errors="replace"))
            caught.close()
            for line in lines:
                try:
                    sys.stderr.write(line + "\n")
                except (OSError, ValueError):
                    break


def _hush_at_exit() -> None:
    """LiteRT frees its process-wide environment after Python's exit handlers, with more INFO
    lines: once a runtime was loaded quietly, fd 2 goes to /dev/null as the process ends (edge-m3
    itself has said everything by then)."""
    global _hushed
    if _hushed:
        return
    _hushed = True

    def hush() -> None:
        if verbose():
            return
        try:
            sys.stderr.flush()
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 2)
            os.close(null)
        except (OSError, ValueError):
            pass

    atexit.register(hush)


def ort_log_level() -> int:
    """onnxruntime's SessionOptions.log_severity_level: errors only (3), or info (1) with -v."""
    return 1 if verbose() else 3

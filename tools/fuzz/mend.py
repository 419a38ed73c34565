"""A mend of atheris 3.0.0 for long runs: its comparison hook leaks every object a comparison
makes (`mend_trace_cmp`)."""

from __future__ import annotations

import ctypes
import sys
import weakref
from collections.abc import Callable

import atheris

_decref = ctypes.pythonapi.Py_DecRef
_decref.argtypes, _decref.restype = [ctypes.py_object], None
_LE = 1 << (0 if sys.version_info < (3, 12) else 4 if sys.version_info < (3, 13) else 5)  # COMPARE_OP's Py_LE
_traced_cmp: Callable[..., object] | None = None  # atheris's hook, wrapped by _trace_cmp
_sound: object = None  # a hook found not to leak, left as it is


def _trace_cmp(left: object, right: object, opid: int, idx: int, left_is_const: bool) -> object:
    """atheris's hook without its leak: see mend_trace_cmp."""
    ret = _traced_cmp(left, right, opid, idx, left_is_const)
    if ret.__class__ is not bool:  # a bool's extra references free nothing
        _decref(ret)
    return ret


class _Made:
    """What _Probe's comparison returns: a new object a weak reference can watch."""


class _Probe:
    def __le__(self, other: object) -> _Made:
        return _Made()


def leaks(hook: Callable[..., object]) -> bool:
    """Does `hook` keep what a comparison returned? (freed here when it does)"""
    made = hook(_Probe(), 0, _LE, 0, False)
    watch = weakref.ref(made)
    del made
    kept = watch()
    if kept is not None:
        _decref(kept)
    return kept is not None


def mend_trace_cmp() -> None:
    """atheris 3.0.0's comparison hook (core.cc `_trace_cmp`, which instrumented code calls for
    every comparison) returns its result with one reference too many: a py::handle to the new
    reference PyObject_RichCompare made, which pybind11 increments again. So no object that a
    comparison makes is ever freed: numpy's elementwise comparisons in the index readers, ~117
    bytes each, grew the `writable` target by ~400 bytes an execution until the address-space
    limit stopped it near 3.2 million (tests/test_fuzz.py::test_atheris_comparisons_do_not_leak).
    Instrumented code looks the hook up on the module at each call, and atheris.Fuzz() swaps its
    own in just before the first input, so the test function calls this: it wraps the hook once,
    and only a hook that leaks (a fixed atheris is left alone)."""
    global _traced_cmp, _sound
    hook = atheris._trace_cmp
    if hook is _trace_cmp or hook is _sound:
        return
    if leaks(hook):
        _traced_cmp = hook
        atheris._trace_cmp = _trace_cmp
    else:
        _sound = hook

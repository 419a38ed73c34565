"""tools/ is not a package: its scripts are loaded as modules by the tests that use them."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parents[2] / "tools"


@functools.cache
def load_tool(name: str) -> ModuleType:
    """tools/<name>.py as module `name` (registered in sys.modules, for its dataclasses)."""
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod

"""The package's layers: no module of edge_m3 imports from a layer above its own.

The order is docs/architecture.md's package table, lowest row first (its one definition); every
import counts, those inside functions too, since a lazy import is still an arrow up.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "edge_m3"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
TOP = "__init__.py"  # edge_m3/__init__.py: `__version__` alone, readable from every layer


def layer_order(text: str) -> list[str]:
    """The first column of the `| package | owns | reads |` table: `errors.py`, `spec/`, ..."""
    lines = text.splitlines()
    start = lines.index("| package | owns | reads |") + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        m = re.fullmatch(r"`([a-z_]+(?:\.py|/))`", line.split("|")[1].strip())
        assert m, f"docs/architecture.md: a layer row names one module or folder: {line[:60]!r}"
        rows.append(m.group(1))
    return rows


def layer_of(module: str) -> str | None:
    """The row of a dotted module of edge_m3 (`edge_m3.bulk.job` -> `bulk/`); None for edge_m3 itself."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    return f"{parts[1]}/" if (PACKAGE / parts[1]).is_dir() else f"{parts[1]}.py"


def imported(rel: Path, source: str) -> list[tuple[int, str]]:
    """(line, dotted module) of every edge_m3 module the file `rel` (under edge_m3/) imports,
    anywhere in it: at the top, in functions, under `if TYPE_CHECKING`."""
    package = ["edge_m3", *rel.parts[:-1]]
    out = []
    for node in ast.walk(ast.parse(source, str(rel))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: the file's own package, then up one per extra dot
                base = ".".join([*package[:len(package) - node.level + 1], *filter(None, [base])])
            out.append((node.lineno, base))
            if base == "edge_m3":  # `from edge_m3 import bulk` names a module, not an attribute
                out += [(node.lineno, f"edge_m3.{a.name}") for a in node.names
                        if (PACKAGE / a.name).is_dir() or (PACKAGE / f"{a.name}.py").is_file()]
    return [(line, m) for line, m in out if m == "edge_m3" or m.startswith("edge_m3.")]


def package_files() -> dict[Path, str]:
    """Every module of edge_m3, by its path under edge_m3/."""
    return {p.relative_to(PACKAGE): p.read_text("utf-8") for p in sorted(PACKAGE.rglob("*.py"))}


def upward_imports(order: list[str], files: dict[Path, str]) -> list[str]:
    """Every import of edge_m3 that goes to a later row than its importer's, as `file:line -> module`."""
    rank = {name: i for i, name in enumerate(order)}
    found = []
    for rel, source in files.items():
        if rel.as_posix() == TOP:
            own, name = -1, "edge_m3/__init__.py"  # the package's own __init__ reads nothing of it
        else:
            name = f"{rel.parts[0]}/" if len(rel.parts) > 1 else rel.parts[0]
            own = rank[name]
        for line, module in imported(rel, source):
            target = layer_of(module)
            if target is not None and rank[target] > own:
                found.append(f"edge_m3/{rel.as_posix()}:{line} -> {module} ({target} is above {name})")
    return found


def test_every_module_has_a_layer() -> None:
    """A new subpackage or top-level module needs its row, or the order says nothing about it."""
    order = layer_order(ARCHITECTURE.read_text("utf-8"))
    assert len(set(order)) == len(order), order
    present = {f"{p.name}/" for p in PACKAGE.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    present |= {p.name for p in PACKAGE.glob("*.py") if p.name != TOP}
    assert present == set(order), f"rows missing: {sorted(present - set(order))}; " \
                                  f"rows of nothing: {sorted(set(order) - present)}"


def test_no_module_imports_upward() -> None:
    order = layer_order(ARCHITECTURE.read_text("utf-8"))
    assert upward_imports(order, package_files()) == []


@pytest.mark.parametrize("source", [
    "from edge_m3.harness.inputs import retrieval_set\n",
    "def rows():\n    from edge_m3 import harness\n    return harness\n",
    "def rows():\n    from ..harness import inputs\n    return inputs\n",
])
def test_an_upward_import_is_found(source: str) -> None:
    """The check bites: bulk importing the harness, at the top or lazily, absolutely or
    relatively, is an arrow up."""
    order = layer_order(ARCHITECTURE.read_text("utf-8"))
    found = upward_imports(order, {Path("bulk/upward.py"): source})
    assert len(found) == 1 and found[0].startswith("edge_m3/bulk/upward.py:"), found
    assert "(harness/ is above bulk/)" in found[0], found

"""The size budget issue 59 set, kept: a function that grows past it fails here, not in a review.

Complexity is radon's cyclomatic complexity (the measure of the review that set the budget):
no function of edge_m3/ above MAX_COMPLEXITY, at most MAX_ABOVE_SOFT of them above SOFT_COMPLEXITY.
The writable index, written once per language, keeps every source file at most MAX_INDEX_LINES.
"""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parent.parent
MAX_COMPLEXITY = 30
SOFT_COMPLEXITY = 20
MAX_ABOVE_SOFT = 5
MAX_INDEX_LINES = 500
# The writable index's hand-written sources in each language (its store, segments, compaction
# and the read-only index they build on); generated tables are outside the budget.
INDEX_SOURCES = {
    "Python": ("edge_m3/retrieval", ("*.py",)),
    "Kotlin": ("android_assets/src/main/java/dev/edgem3",
               ("*Index*.kt", "StoredPassage.kt", "PassageId.kt", "Ranking.kt", "PyJson.kt")),
    "Swift": ("ios_assets/Sources/EdgeM3", ("*Index*.swift", "StoredPassage.swift")),
}


def complexities() -> dict[str, int]:
    """Every function and method of edge_m3/ (generated code included) -> its complexity."""
    out = {}
    for path in sorted((ROOT / "edge_m3").rglob("*.py")):
        for block in cc_visit(path.read_text(encoding="utf-8")):
            for item in [block, *getattr(block, "methods", [])]:
                if type(item).__name__ == "Function":
                    name = f"{item.classname}.{item.name}" if item.classname else item.name
                    out[f"{path.relative_to(ROOT)}:{item.lineno} {name}"] = item.complexity
    return out


def test_no_function_above_the_budget() -> None:
    scores = complexities()
    assert len(scores) > 500, "radon found too few functions: the walk is broken"
    over = {k: v for k, v in scores.items() if v > MAX_COMPLEXITY}
    assert not over, f"complexity above {MAX_COMPLEXITY}: {over}"
    soft = {k: v for k, v in scores.items() if v > SOFT_COMPLEXITY}
    assert len(soft) <= MAX_ABOVE_SOFT, f"{len(soft)} functions above {SOFT_COMPLEXITY}: {soft}"


def test_the_walk_sees_methods_and_nested_functions() -> None:
    """The budget counts methods (a class's complexity alone would hide one big method)."""
    code = "class A:\n    def m(self, x):\n" + "".join(f"        if x == {i}:\n            return {i}\n"
                                                      for i in range(25)) + "        return -1\n"
    blocks = cc_visit(code)
    assert [m.complexity for b in blocks for m in getattr(b, "methods", [])] == [26]


def test_writable_index_files_stay_small() -> None:
    for language, (folder, patterns) in INDEX_SOURCES.items():
        files = sorted({f for p in patterns for f in (ROOT / folder).glob(p)})
        assert len(files) >= 4, f"{language}: the index sources under {folder} are not where the budget looks"
        big = {str(f.relative_to(ROOT)): n for f in files
               if (n := len(f.read_text(encoding="utf-8").splitlines())) > MAX_INDEX_LINES}
        assert not big, f"{language}: index files above {MAX_INDEX_LINES} lines: {big}"

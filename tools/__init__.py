"""Developer scripts, sorted by kind: see docs/architecture.md, "tools/".

Run them from the repository root as modules, `python -m tools.<kind>.<name>`, so that they import
this checkout's edge_m3, each other and tests.support with no change to the import path.
"""

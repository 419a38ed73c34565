"""One module per fuzz target, each with `run(data: bytes) -> None` (see tools/fuzz/harness.py)."""

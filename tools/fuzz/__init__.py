"""Coverage-guided fuzzing of the readers of untrusted files (issue 38, the Python side).

Each target (tools/fuzz/targets/) feeds bytes to one reader through its public entry point and
the shared harness (tools/fuzz/harness.py) checks the contract: accepted and valid, or refused
with one line of EdgeM3Error; never another exception, a hang or an unbounded allocation.
`python -m tools.fuzz.run TARGET` fuzzes one with atheris; tests/test_fuzz.py replays the
committed seeds (tools/fuzz/seeds/) and every crash found (tools/fuzz/regressions/).
"""

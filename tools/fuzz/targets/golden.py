"""golden.json (harness.check.read_golden, golden_entry, replay_exact) in an otherwise intact
bundle: the committed tiny bundle seed with this input as its golden.json."""

from __future__ import annotations

from functools import cache

from edge_m3.contract import GOLDEN
from tools.fuzz.targets.bundle import base, exercise, open_bundle

BASE = "tiny-trimmed"


@cache
def _files() -> dict[str, bytes]:
    return base(BASE)


def run(data: bytes) -> None:
    exercise(open_bundle(_files() | {GOLDEN: data}))

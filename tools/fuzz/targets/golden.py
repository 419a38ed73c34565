"""golden.json (harness.check.read_golden, golden_entry, replay_exact) of an otherwise intact
bundle: the committed tiny trimmed bundle seed, verified and its tokenizer read once, with this
input as its golden.json (in a scratch folder of its own: the base is never written to). The
other files never change, so each input goes through golden.json's readers alone; every file of
a folder at once is the `bundle` target's."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from edge_m3.bundle.bundle import Bundle
from edge_m3.harness.check import golden_entry, read_golden, replay_exact
from edge_m3.spec import GOLDEN
from tools.fuzz.harness import scratch_file
from tools.fuzz.targets.bundle import opened_base

BASE = "tiny-trimmed"


@dataclass
class _Opened(Bundle):
    """The verified base bundle, whose tokenizer (read once) every replay reuses."""

    opened: Any = None

    def tokenizer(self) -> Any:
        return self.opened


@cache
def _bundle() -> _Opened:
    bundle = opened_base(BASE)
    return _Opened(bundle.path, bundle.manifest, bundle.tokenizer())


def run(data: bytes) -> None:
    bundle = replace(_bundle(), path=scratch_file(GOLDEN, data).parent)  # the base stays intact
    golden = read_golden(bundle)
    golden_entry(bundle, golden)
    assert all(isinstance(p, str) for p in replay_exact(bundle, golden))

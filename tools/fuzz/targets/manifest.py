"""A bundle's manifest.json (spec.Manifest, TokenizerSpec.from_manifest). What is accepted
must survive its own round trip: the builder writes what the reader reads."""

from __future__ import annotations

import json

from edge_m3.spec import Manifest
from tools.fuzz.harness import scratch_file


def run(data: bytes) -> None:
    m = Manifest.read(scratch_file("manifest.json", data))
    out = m.to_json()
    again = Manifest.from_json(json.loads(json.dumps(out)))
    assert again.to_json() == out

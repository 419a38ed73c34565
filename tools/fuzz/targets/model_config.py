"""A checkpoint's config.json (checkpoint.loader.ModelConfig.from_json): an accepted config
must give the shapes the loader checks the weights against, within the bounds."""

from __future__ import annotations

from edge_m3.checkpoint.loader import ModelConfig, expected_shapes
from tools.fuzz.harness import scratch_file


def run(data: bytes) -> None:
    config = ModelConfig.from_json(scratch_file("config.json", data))
    assert config.max_seq_len >= 1, config
    assert all(all(d > 0 for d in s) for s in expected_shapes(config).values())

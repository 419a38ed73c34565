"""Step 1: a hub id or local snapshot, resolved and loaded safely (no torch, no unpickling)."""

from edge_m3.checkpoint.loader import (
    Checkpoint,
    ModelConfig,
    expected_shapes,
    load_checkpoint,
    resolve_checkpoint,
)

__all__ = ["Checkpoint", "ModelConfig", "expected_shapes", "load_checkpoint", "resolve_checkpoint"]

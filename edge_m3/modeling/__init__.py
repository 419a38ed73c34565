"""Step 2: BGE-M3 re-implemented in Keras from config.json and the checkpoint's tensors."""

from edge_m3.modeling.keras_model import BGEM3Encoder, build_model, position_rows, trimmed_checkpoint

__all__ = ["BGEM3Encoder", "build_model", "position_rows", "trimmed_checkpoint"]

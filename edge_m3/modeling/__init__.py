"""Step 2: the families' encoders (BGE-M3 / XLM-R, BERT, ModernBERT) re-implemented in Keras
from config.json and the checkpoint's tensors."""

from edge_m3.modeling.build import build_model
from edge_m3.modeling.keras_model import BGEM3Encoder, position_rows, trimmed_checkpoint
from edge_m3.modeling.modernbert import ModernBertEncoder

__all__ = ["BGEM3Encoder", "ModernBertEncoder", "build_model", "position_rows", "trimmed_checkpoint"]

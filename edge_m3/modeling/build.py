"""The Keras model of a checkpoint, by its family's encoder (edge_m3.families: Family.encoder)."""

from __future__ import annotations

from typing import Any

import keras

from edge_m3.families import M3, MODERNBERT
from edge_m3.modeling.keras_model import BGEM3Encoder
from edge_m3.modeling.modernbert import ModernBertEncoder


def build_model(checkpoint: Any) -> keras.Model:
    """The checkpoint's encoder and heads in Keras with its weights (fp32): the family's
    encoder (edge_m3.families: Family.encoder)."""
    m3 = checkpoint.outputs is M3
    if checkpoint.family.encoder == MODERNBERT:
        return ModernBertEncoder(checkpoint.config, tensors=checkpoint.tensors, pooling=checkpoint.pooling,
                                 name=checkpoint.family.keras_name)
    return BGEM3Encoder(checkpoint.config, colbert_dim=checkpoint.colbert_dim or None,
                        tensors=checkpoint.tensors, pooling=checkpoint.pooling, m3_heads=m3,
                        name=checkpoint.family.keras_name)

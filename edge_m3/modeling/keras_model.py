"""BGE-M3 and the other families' encoders re-implemented in Keras from Dense and
LayerNormalization layers.

Built from `config.json` alone (its family's position scheme from edge_m3.families), so a
2-layer test model, the 24-layer BGE-M3 and a 6-layer MiniLM share one code path. Every op
is chosen to convert cleanly to TFLite (ops that tflite-runtime 2.14 knows) and to ONNX (GELU
is written with `tf.math.erf`: `tf.nn.gelu` becomes `Erfc`, which onnxruntime rejects).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from edge_m3.families import AFTER_PADDING, M3_POOLING, Pooling
from edge_m3.spec import COLBERT_VECS, DENSE_VECS, HEADS, SPARSE_WEIGHTS

# Large enough that exp() underflows to 0 next to real scores (exp(-100) is 4e-44, below
# float32's resolution next to the row's largest term, 1), small enough to stay finite in
# float16, and small enough for a statically quantized graph (`int16x8`): the attention scores
# and the mask share one scale there, so -10000 left a step of 0.3 between int16 scores.
MASK_VALUE = -100.0


@tf.function(experimental_implements="embedding_matmul")
def _embedding_lookup(table: tf.Tensor, ids: tf.Tensor) -> tf.Tensor:
    """Rows of `table` for 1-D `ids`; the TFLite converter turns this function (by its
    `implements` name) into one EMBEDDING_LOOKUP op, which ai-edge-quantizer can quantize to
    4 bits (it leaves GATHER alone)."""
    return tf.gather(table, ids)


def _lookup(layer: keras.layers.Embedding, ids: tf.Tensor) -> tf.Tensor:
    """`layer(ids)` for `[B, L]` ids as one EMBEDDING_LOOKUP over the flattened ids."""
    shape = tf.shape(ids)
    rows = _embedding_lookup(tf.convert_to_tensor(layer.embeddings), tf.reshape(ids, [-1]))
    return tf.reshape(rows, tf.concat([shape, [layer.output_dim]], 0))


def _gelu_erf(x: tf.Tensor) -> tf.Tensor:
    """Exact GELU as XLM-R uses it, spelled with erf so ONNX export keeps a supported op."""
    return 0.5 * x * (1.0 + tf.math.erf(x * (1.0 / math.sqrt(2.0))))


class _Preset(keras.initializers.Initializer):
    """A variable's initial value, read from the checkpoint as the variable is created.

    Creating variables from zeros and assigning later holds two copies of a 1 GB table at
    once; this way each tensor is read, handed to TF, and dropped.
    """

    def __init__(self, tensors: Mapping[str, np.ndarray] | None, name: str,
                 transpose: bool = False, add_row0: str | None = None) -> None:
        self.tensors, self.name, self.transpose, self.add_row0 = tensors, name, transpose, add_row0

    def __call__(self, shape: Any, dtype: Any = None) -> np.ndarray:
        if self.tensors is None:
            return np.zeros(shape, np.float32)
        value = np.asarray(self.tensors[self.name], dtype=np.float32)
        if self.transpose:  # torch Linear stores [out, in]; Keras Dense wants [in, out]
            value = np.ascontiguousarray(value.T)
        if self.add_row0:
            value = value + np.asarray(self.tensors[self.add_row0], dtype=np.float32)[0]
        if tuple(value.shape) != tuple(shape):
            raise ValueError(f"{self.name}: shape {value.shape}, layer expects {tuple(shape)}")
        return value


def _dense(units: int, tensors: Mapping[str, np.ndarray] | None, prefix: str,
           name: str, bias: bool = True) -> keras.layers.Dense:
    if not bias:
        return keras.layers.Dense(units, name=name, use_bias=False,
                                  kernel_initializer=_Preset(tensors, prefix + ".weight", True))
    return keras.layers.Dense(units, name=name,
                              kernel_initializer=_Preset(tensors, prefix + ".weight", True),
                              bias_initializer=_Preset(tensors, prefix + ".bias"))


def _norm(eps: float, tensors: Mapping[str, np.ndarray] | None, prefix: str,
          name: str, bias: bool = True) -> keras.layers.LayerNormalization:
    if not bias:  # ModernBERT's bias-free LayerNorm
        return keras.layers.LayerNormalization(epsilon=eps, name=name, center=False,
                                               gamma_initializer=_Preset(tensors, prefix + ".weight"))
    return keras.layers.LayerNormalization(
        epsilon=eps, name=name, gamma_initializer=_Preset(tensors, prefix + ".weight"),
        beta_initializer=_Preset(tensors, prefix + ".bias"))


class TransformerBlock(keras.layers.Layer):
    """One post-LayerNorm XLM-R encoder layer (self-attention + GELU feed-forward)."""

    def __init__(self, hidden: int, heads: int, ffn: int, eps: float,
                 tensors: Mapping[str, np.ndarray] | None = None, prefix: str = "",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hidden, self.heads, self.head_dim = hidden, heads, hidden // heads
        t, p = tensors, prefix
        self.query = _dense(hidden, t, p + "attention.self.query", "query")
        self.key = _dense(hidden, t, p + "attention.self.key", "key")
        self.value = _dense(hidden, t, p + "attention.self.value", "value")
        self.attn_out = _dense(hidden, t, p + "attention.output.dense", "attn_out")
        self.attn_norm = _norm(eps, t, p + "attention.output.LayerNorm", "attn_norm")
        self.ffn_in = _dense(ffn, t, p + "intermediate.dense", "ffn_in")
        self.ffn_out = _dense(hidden, t, p + "output.dense", "ffn_out")
        self.ffn_norm = _norm(eps, t, p + "output.LayerNorm", "ffn_norm")

    def build(self, input_shape: Any) -> None:
        h = (None, None, self.hidden)
        for layer in (self.query, self.key, self.value, self.attn_out, self.ffn_in):
            layer.build(h)
        self.ffn_out.build((None, None, self.ffn_in.units))
        self.attn_norm.build(h)
        self.ffn_norm.build(h)
        super().build(input_shape)

    def _split(self, x: tf.Tensor, batch: tf.Tensor, length: tf.Tensor) -> tf.Tensor:
        x = tf.reshape(x, tf.stack([batch, length, self.heads, self.head_dim]))
        return tf.transpose(x, [0, 2, 1, 3])

    def call(self, x: tf.Tensor, mask_add: tf.Tensor) -> tf.Tensor:
        shape = tf.shape(x)
        batch, length = shape[0], shape[1]
        scale = 1.0 / math.sqrt(self.head_dim)
        q = self._split(self.query(x) * scale, batch, length)
        k = self._split(self.key(x), batch, length)
        v = self._split(self.value(x), batch, length)
        scores = tf.matmul(q, k, transpose_b=True) + mask_add
        probs = tf.nn.softmax(scores, axis=-1)
        ctx = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])
        ctx = tf.reshape(ctx, tf.stack([batch, length, self.hidden]))
        x = self.attn_norm(x + self.attn_out(ctx))
        return self.ffn_norm(x + self.ffn_out(_gelu_erf(self.ffn_in(x))))


# torch's normalize floors the norm at 1e-12; that constant flushes to 0 in a float16 graph
# and turns padding rows into 0/0. 1e-6 is a float16 subnormal and far below any real norm.
NORM_EPS = 1e-6


def _l2_normalize(x: tf.Tensor) -> tf.Tensor:
    """torch.nn.functional.normalize: x / max(||x||, eps), so zero (padding) rows stay 0."""
    norm = tf.sqrt(tf.reduce_sum(tf.square(x), axis=-1, keepdims=True))
    return x / tf.maximum(norm, NORM_EPS)


def pool(x: tf.Tensor, mask_f: tf.Tensor, pooling: Pooling) -> tf.Tensor:
    """The dense vector: sentence-transformers' Pooling (+ Normalize), or BGE-M3's CLS."""
    if pooling.mode == "cls":
        pooled = x[:, 0]
    else:  # "mean": the sum over real tokens over their count (clamped as in ST, 1e-9)
        summed = tf.reduce_sum(x * mask_f[:, :, None], axis=1)
        pooled = summed / tf.maximum(tf.reduce_sum(mask_f, axis=1, keepdims=True), 1e-9)
    return _l2_normalize(pooled) if pooling.normalize else pooled


class BGEM3Encoder(keras.Model):
    """A post-LayerNorm encoder of any family (edge_m3.families) plus its output heads.

    `call(input_ids, attention_mask)` (int32, [B, L]) returns a dict with
    `last_hidden_state [B, L, H]` and, for the heads asked for, `dense_vecs [B, H]` (the
    checkpoint's pooling: BGE-M3's normalised CLS, or a sentence-transformers mean or CLS,
    normalised or not), and with BGE-M3's heads `sparse_weights [B, L]` (relu(sparse_linear),
    0 on padding) and `colbert_vecs [B, L-1, D]` (colbert_linear on tokens after `<s>`,
    masked, normalised).
    """

    def __init__(self, config: Any, colbert_dim: int | None = None,
                 tensors: Mapping[str, np.ndarray] | None = None, pooling: Pooling = M3_POOLING,
                 m3_heads: bool = True, **kwargs: Any) -> None:
        """`tensors` (HF names, torch layout) fill the variables as they are created; None
        leaves them zero. `m3_heads=False`: no sparse or ColBERT layer (dense only)."""
        super().__init__(**kwargs)
        self.config = config
        h, t = config.hidden_size, tensors
        self.pad_id = int(config.pad_token_id)
        self.positions, self.pooling = config.family.positions, pooling
        self.heads = HEADS if m3_heads else ("dense",)  # what call() computes unless told
        self.word = keras.layers.Embedding(
            config.vocab_size, h, name="word_embeddings",
            embeddings_initializer=_Preset(t, "embeddings.word_embeddings.weight"))
        # Token-type 0 is folded into this table: every family here only ever uses type 0.
        self.position = keras.layers.Embedding(
            config.max_position_embeddings, h, name="position_embeddings",
            embeddings_initializer=_Preset(t, "embeddings.position_embeddings.weight",
                                           add_row0="embeddings.token_type_embeddings.weight"))
        self.emb_norm = _norm(config.layer_norm_eps, t, "embeddings.LayerNorm", "emb_norm")
        self.blocks = [
            TransformerBlock(h, config.num_attention_heads, config.intermediate_size,
                             config.layer_norm_eps, t, f"encoder.layer.{i}.", name=f"layer_{i}")
            for i in range(config.num_hidden_layers)
        ]
        if m3_heads:  # BGE-M3's sparse and ColBERT heads
            self.colbert = _dense(colbert_dim or h, t, "colbert_linear", "colbert_linear")
            self.sparse = _dense(1, t, "sparse_linear", "sparse_linear")
        self.word.build((None, None))
        self.position.build((None, None))
        self.emb_norm.build((None, None, h))
        for block in self.blocks:
            block.build((None, None, h))
        if m3_heads:
            self.colbert.build((None, None, h))
            self.sparse.build((None, None, h))
        self.built = True

    def encode_hidden(self, input_ids: tf.Tensor, attention_mask: tf.Tensor,
                      lookup: bool = False) -> tf.Tensor:
        """The encoder's last_hidden_state, as XLMRobertaModel / BertModel computes it.

        `lookup` spells both embedding tables as EMBEDDING_LOOKUP instead of GATHER (same
        values; see `_embedding_lookup`)."""
        mask = tf.cast(attention_mask, tf.int32)
        ids = tf.cast(input_ids, tf.int32)
        # XLM-R position ids (create_position_ids_from_input_ids): a cumsum over the tokens that
        # are not <pad>, counted from padding_idx, and padding_idx for <pad>. They follow the ids,
        # not the mask: a literal "<pad>" in a text (Dutch for "path", in dpkg's messages) is
        # <pad>'s id with mask 1, attended to but given no position, as in the reference. A
        # trimmed table keeps <pad> at its row (kept ids are sorted and hold <s> and <pad>).
        if self.positions == AFTER_PADDING:
            real = tf.cast(tf.not_equal(ids, self.pad_id), tf.int32)
            positions = tf.math.cumsum(real, axis=1) * real + self.pad_id
        else:  # ABSOLUTE: BERT's rows 0..L-1, whatever the ids and the mask
            positions = tf.zeros_like(ids) + tf.range(tf.shape(ids)[1], dtype=tf.int32)[None, :]
        if lookup:
            x = _lookup(self.word, ids) + _lookup(self.position, positions)
        else:
            x = self.word(ids) + self.position(positions)
        x = self.emb_norm(x)
        mask_f = tf.cast(mask, x.dtype)
        mask_add = ((1.0 - mask_f) * MASK_VALUE)[:, None, None, :]
        for block in self.blocks:
            x = block(x, mask_add)
        return x

    def call(  # type: ignore[override]
        self,
        input_ids: tf.Tensor,
        attention_mask: tf.Tensor,
        heads: Sequence[str] | None = None,
        hidden: bool = True,
        lookup: bool = False,
    ) -> dict[str, tf.Tensor]:
        heads = self.heads if heads is None else heads
        x = self.encode_hidden(input_ids, attention_mask, lookup)
        mask_f = tf.cast(attention_mask, x.dtype)
        out: dict[str, tf.Tensor] = {"last_hidden_state": x} if hidden else {}
        if "dense" in heads:
            out[DENSE_VECS] = self._pool(x, mask_f)
        if "sparse" in heads:
            # the whole head under one name (`sparse_linear/`): the full-integer recipes keep it
            # in float by that name (aeq.STATIC_FLOAT_TAIL), its last slice and mask included
            with tf.name_scope("sparse_linear"):
                out[SPARSE_WEIGHTS] = tf.nn.relu(self.sparse(x))[..., 0] * mask_f
        if "colbert" in heads:
            col = self.colbert(x[:, 1:]) * mask_f[:, 1:, None]
            out[COLBERT_VECS] = _l2_normalize(col)
        return out

    def _pool(self, x: tf.Tensor, mask_f: tf.Tensor) -> tf.Tensor:
        return pool(x, mask_f, self.pooling)

    def parameter_count(self) -> int:
        """Weights held by the model: used to check that exports really carry them."""
        return int(sum(int(np.prod(v.shape)) for v in self.weights))


class _TrimmedTensors(Mapping[str, np.ndarray]):
    """The checkpoint's tensors with the word-embedding table cut to the kept rows (None: all)
    and the position table to its first `positions` rows (None: all)."""

    def __init__(self, tensors: Mapping[str, np.ndarray], kept_ids: Sequence[int] | None,
                 positions: int | None = None) -> None:
        self._tensors, self._positions = tensors, positions
        self._kept = None if kept_ids is None else np.asarray(kept_ids, dtype=np.int64)
        self.kept_ids = None if kept_ids is None else [int(i) for i in kept_ids]

    def __getitem__(self, name: str) -> np.ndarray:
        value = self._tensors[name]
        if name == "embeddings.word_embeddings.weight" and self._kept is not None:
            return value[self._kept]
        if name == "embeddings.position_embeddings.weight" and self._positions is not None:
            return value[:self._positions]
        return value

    def __iter__(self) -> Any:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)


def trimmed_checkpoint(checkpoint: Any, kept_ids: Sequence[int] | None,
                       positions: int | None = None) -> Any:
    """A view of `checkpoint` whose vocabulary is `kept_ids` (row i = original id kept_ids[i];
    None keeps every row) and whose position table keeps its first `positions` rows."""
    import dataclasses

    config = checkpoint.config
    if kept_ids is not None:
        config = dataclasses.replace(config, vocab_size=len(kept_ids))
    if positions is not None:
        config = dataclasses.replace(config, max_position_embeddings=int(positions))
    return dataclasses.replace(checkpoint, config=config,
                               tensors=_TrimmedTensors(checkpoint.tensors, kept_ids, positions))


def position_rows(config: Any, seq_lens: Sequence[int]) -> int:
    """Position rows the fixed lengths can reach (edge_m3.families: Family.position_rows)."""
    return config.family.position_rows(config, seq_lens)

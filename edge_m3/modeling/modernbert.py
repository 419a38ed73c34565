"""ModernBERT re-implemented in Keras from config.json (transformers' ModernBertModel).

What differs from BERT, each where a port can go wrong: pre-LayerNorm layers (none before the
first layer's attention, one after the last layer), LayerNorm and Linear layers without biases
unless the config says otherwise, one fused Wqkv, rotary position embeddings with a base per
layer type (`rope_theta`: 160,000 for global layers, 10,000 for local ones), GeGLU feed-forward
(Wi gives 2 x intermediate: gelu(first half) * second half), and attention that sees only
`local_attention / 2` tokens either side in the sliding layers (every layer but each
`global_attn_every_n_layers`-th) on top of the padding mask, which every layer applies.
Positions are 0..L-1 as in the reference with right padding, so a padded signature gives the
real tokens the outputs the reference gives them unpadded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from edge_m3.families import M3_POOLING, SLIDING_ATTENTION, Pooling
from edge_m3.modeling.keras_model import MASK_VALUE, _dense, _gelu_erf, _lookup, _norm, _Preset, pool
from edge_m3.spec import DENSE_VECS


def rope_inv_freq(theta: float, head_dim: int) -> np.ndarray:
    """1 / theta^(2i/d), in float32 as transformers computes it."""
    exponents = np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)
    return (1.0 / (np.float32(theta) ** exponents)).astype(np.float32)


def _rotate_half(x: tf.Tensor) -> tf.Tensor:
    half = x.shape[-1] // 2
    return tf.concat([-x[..., half:], x[..., :half]], axis=-1)


def sliding_band(block: int) -> np.ndarray:
    """`[s, 3s]` float32 for block size s = local_attention // 2: 1 where a query at row a of a
    block may see key c of the three blocks around it, i.e. |(c - s) - a| <= s (transformers'
    bidirectional sliding window, `sliding_window = local_attention // 2`, inclusive)."""
    a = np.arange(block)[:, None]
    c = np.arange(3 * block)[None, :]
    return (np.abs(c - block - a) <= block).astype(np.float32)


def _blocks(x: tf.Tensor, nb: int, block: int) -> tf.Tensor:
    """`[..., (nb + 2) * s, d]` -> `[..., nb, 3s, d]`: for each block, itself and both neighbours."""
    lead = tf.shape(x)[:-2]
    d = x.shape[-1]
    x = tf.reshape(x, tf.concat([lead, [nb + 2, block, d]], 0))
    return tf.concat([x[..., 0:nb, :, :], x[..., 1:nb + 1, :, :], x[..., 2:nb + 2, :, :]], axis=-2)


class ModernBertLayer(keras.layers.Layer):
    """One pre-norm ModernBERT layer: x + Wo(attn(norm(x))), then x + Wo(GeGLU(norm(x)))."""

    def __init__(self, config: Any, index: int, tensors: Mapping[str, np.ndarray] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        x, h = config.extra, config.hidden_size
        self.hidden, self.heads, self.head_dim = h, config.num_attention_heads, h // config.num_attention_heads
        self.ffn, self.kind = config.intermediate_size, x["layer_types"][index]
        self.block = int(x["local_attention"]) // 2  # the sliding window's reach either side
        t, p, eps = tensors, f"layers.{index}.", config.layer_norm_eps
        self.attn_norm = _norm(eps, t, p + "attn_norm", "attn_norm", x["norm_bias"]) if index else None
        self.wqkv = _dense(3 * h, t, p + "attn.Wqkv", "wqkv", x["attention_bias"])
        self.attn_out = _dense(h, t, p + "attn.Wo", "attn_out", x["attention_bias"])
        self.mlp_norm = _norm(eps, t, p + "mlp_norm", "mlp_norm", x["norm_bias"])
        self.ffn_in = _dense(2 * self.ffn, t, p + "mlp.Wi", "ffn_in", x["mlp_bias"])
        self.ffn_out = _dense(h, t, p + "mlp.Wo", "ffn_out", x["mlp_bias"])

    def build(self, input_shape: Any) -> None:
        shape = (None, None, self.hidden)
        for layer in (self.wqkv, self.attn_out, self.ffn_in, self.mlp_norm,
                      *([self.attn_norm] if self.attn_norm else [])):
            layer.build(shape)
        self.ffn_out.build((None, None, self.ffn))
        super().build(input_shape)

    def _banded(self, q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, mask_add: tf.Tensor,
                length: tf.Tensor) -> tf.Tensor:
        """Sliding-window attention in blocks of s = window / 2 tokens, each block's queries
        against its own and its two neighbours' keys: scores of L x 3s instead of L x L (memory
        and file size linear in L; the same values as the full masked product, whose masked
        terms are exactly 0 after the softmax). `mask_add`: `[B, 1, 1, L]` padding."""
        s = self.block
        nb = -(-int(q.shape[2]) // s) if q.shape[2] is not None else None
        if nb is None:  # a dynamic length (the ONNX trace): blocks from the runtime length
            nb = (length + s - 1) // s
        pad_end = nb * s - length
        q = tf.pad(q, [[0, 0], [0, 0], [0, pad_end], [0, 0]])
        k = tf.pad(k, [[0, 0], [0, 0], [s, pad_end + s], [0, 0]])
        v = tf.pad(v, [[0, 0], [0, 0], [s, pad_end + s], [0, 0]])
        keys_add = tf.pad(mask_add[:, :, 0, :], [[0, 0], [0, 0], [s, pad_end + s]],
                          constant_values=MASK_VALUE)[..., None]  # [B, 1, (nb + 2) s, 1]
        qb = tf.reshape(q, tf.stack([tf.shape(q)[0], self.heads, nb, s, self.head_dim]))
        kb, vb = _blocks(k, nb, s), _blocks(v, nb, s)  # [B, heads, nb, 3s, d]
        keys = _blocks(keys_add, nb, s)[..., 0][:, :, :, None, :]  # [B, 1, nb, 1, 3s]
        band = tf.constant((1.0 - sliding_band(s)) * MASK_VALUE)  # [s, 3s]
        scores = tf.matmul(qb, kb, transpose_b=True) + keys + band
        ctx = tf.matmul(tf.nn.softmax(scores, axis=-1), vb)  # [B, heads, nb, s, d]
        ctx = tf.reshape(ctx, tf.stack([tf.shape(q)[0], self.heads, nb * s, self.head_dim]))
        return ctx[:, :, :length, :]

    def call(self, x: tf.Tensor, mask_add: tf.Tensor, cos: tf.Tensor, sin: tf.Tensor) -> tf.Tensor:
        shape = tf.shape(x)
        batch, length = shape[0], shape[1]
        y = self.attn_norm(x) if self.attn_norm is not None else x
        qkv = tf.reshape(self.wqkv(y), tf.stack([batch, length, 3, self.heads, self.head_dim]))
        qkv = tf.transpose(qkv, [2, 0, 3, 1, 4])  # [3, B, heads, L, head_dim]
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        q = q * (1.0 / math.sqrt(self.head_dim))
        if self.kind == SLIDING_ATTENTION:
            ctx = self._banded(q, k, v, mask_add, length)
        else:
            scores = tf.matmul(q, k, transpose_b=True) + mask_add
            ctx = tf.matmul(tf.nn.softmax(scores, axis=-1), v)
        ctx = tf.transpose(ctx, [0, 2, 1, 3])
        x = x + self.attn_out(tf.reshape(ctx, tf.stack([batch, length, self.hidden])))
        inp, gate = tf.split(self.ffn_in(self.mlp_norm(x)), 2, axis=-1)
        return x + self.ffn_out(_gelu_erf(inp) * gate)


class ModernBertEncoder(keras.Model):
    """ModernBERT's encoder plus a pooled dense head; the call signature is BGEM3Encoder's, so
    the trace, the exporters and the references take either."""

    def __init__(self, config: Any, tensors: Mapping[str, np.ndarray] | None = None,
                 pooling: Pooling = M3_POOLING, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config, self.pooling, self.heads = config, pooling, ("dense",)
        x, h, t = config.extra, config.hidden_size, tensors
        self.word = keras.layers.Embedding(
            config.vocab_size, h, name="word_embeddings",
            embeddings_initializer=_Preset(t, "embeddings.tok_embeddings.weight"))
        self.emb_norm = _norm(config.layer_norm_eps, t, "embeddings.norm", "emb_norm", x["norm_bias"])
        self.blocks = [ModernBertLayer(config, i, t, name=f"layer_{i}")
                       for i in range(config.num_hidden_layers)]
        self.final_norm = _norm(config.layer_norm_eps, t, "final_norm", "final_norm", x["norm_bias"])
        head_dim = h // config.num_attention_heads
        self.inv_freq = {kind: rope_inv_freq(theta, head_dim) for kind, theta in x["rope_theta"].items()}
        self.word.build((None, None))
        for layer in (self.emb_norm, self.final_norm, *self.blocks):
            layer.build((None, None, h))
        self.built = True

    def encode_hidden(self, input_ids: tf.Tensor, attention_mask: tf.Tensor,
                      lookup: bool = False) -> tf.Tensor:
        """The last hidden state, as ModernBertModel computes it (after the final norm)."""
        ids = tf.cast(input_ids, tf.int32)
        x = _lookup(self.word, ids) if lookup else self.word(ids)
        x = self.emb_norm(x)
        length = tf.shape(ids)[1]
        mask_f = tf.cast(attention_mask, x.dtype)
        pad_add = ((1.0 - mask_f) * MASK_VALUE)[:, None, None, :]  # every layer: the padding
        positions = tf.cast(tf.range(length), tf.float32)
        rot = {}
        for kind, inv_freq in self.inv_freq.items():
            freqs = positions[:, None] * tf.constant(inv_freq)[None, :]
            emb = tf.concat([freqs, freqs], axis=-1)
            rot[kind] = (tf.cos(emb)[None, None], tf.sin(emb)[None, None])
        for block in self.blocks:
            cos, sin = rot[block.kind]
            x = block(x, pad_add, cos, sin)
        return self.final_norm(x)

    def call(  # type: ignore[override]
        self,
        input_ids: tf.Tensor,
        attention_mask: tf.Tensor,
        heads: Sequence[str] | None = None,
        hidden: bool = True,
        lookup: bool = False,
    ) -> dict[str, tf.Tensor]:
        x = self.encode_hidden(input_ids, attention_mask, lookup)
        out: dict[str, tf.Tensor] = {"last_hidden_state": x} if hidden else {}
        if "dense" in (self.heads if heads is None else heads):
            out[DENSE_VECS] = pool(x, tf.cast(attention_mask, x.dtype), self.pooling)
        return out

    def parameter_count(self) -> int:
        return int(sum(int(np.prod(v.shape)) for v in self.weights))

"""Keras BGE-M3 vs transformers' XLMRobertaModel and FlagEmbedding's BGEM3FlagModel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edge_m3.checkpoint import load_checkpoint
from edge_m3.modeling import build_model
from edge_m3.runtime.postprocess import postprocess

pytestmark = pytest.mark.models  # builds Keras models, bundles or references

TEXTS = [
    "Hello world",
    "안녕하세요, 세계. 오늘 날씨가 좋네요. 한국어 문장도 잘 처리해야 합니다.",
    "The quick brown fox jumps over the lazy dog. " * 3,
    "こんにちは世界",
    "",
    "Привет, мир! Γειά σου κόσμε. مرحبا بالعالم",
]


@pytest.fixture(scope="module")
def keras_model(tiny_ckpt: Path):
    return build_model(load_checkpoint(tiny_ckpt))


@pytest.fixture(scope="module")
def flag_model(tiny_ckpt: Path, flag_model_class: type):
    return flag_model_class(str(tiny_ckpt), use_fp16=False, devices="cpu")


def _padded_batch(tokenizer, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    enc = tokenizer(texts, padding=True, truncation=True, max_length=512, return_tensors="np")
    return enc["input_ids"].astype(np.int32), enc["attention_mask"].astype(np.int32)


def test_hidden_state_matches_transformers(tiny_ckpt: Path, keras_model, flag_model) -> None:
    import torch
    from transformers import XLMRobertaModel

    ref = XLMRobertaModel.from_pretrained(str(tiny_ckpt)).eval()
    ids, mask = _padded_batch(flag_model.tokenizer, TEXTS)
    assert mask.sum(1).min() < mask.shape[1]  # mixed lengths, real padding
    with torch.no_grad():
        want = ref(input_ids=torch.from_numpy(ids).long(),
                   attention_mask=torch.from_numpy(mask).long()).last_hidden_state.numpy()
    got = keras_model(ids, mask)["last_hidden_state"].numpy()
    diff = np.abs(got - want)[mask.astype(bool)]
    assert diff.max() <= 1e-5, diff.max()


def test_heads_match_flagembedding(keras_model, flag_model) -> None:
    ref = flag_model.encode(TEXTS, return_dense=True, return_sparse=True,
                            return_colbert_vecs=True, max_length=512)
    specials = {"bos": 0, "pad": 1, "eos": 2, "unk": 3}
    ids_b, mask_b = _padded_batch(flag_model.tokenizer, TEXTS)
    out = keras_model(ids_b, mask_b)
    for i, _text in enumerate(TEXTS):
        n = int(mask_b[i].sum())
        ids = [int(t) for t in ids_b[i, :n]]
        raw = {k: v.numpy()[i : i + 1] for k, v in out.items()}
        got = postprocess(raw, ids, specials)
        dense = ref["dense_vecs"][i]
        cos = float(np.dot(got["dense_vecs"], dense)
                    / (np.linalg.norm(got["dense_vecs"]) * np.linalg.norm(dense)))
        assert cos >= 0.99999, (i, cos)
        want_lex = {k: float(v) for k, v in ref["lexical_weights"][i].items()}
        assert set(got["lexical_weights"]) == set(want_lex), i
        for k, v in want_lex.items():
            assert abs(got["lexical_weights"][k] - v) <= 1e-5, (i, k)
        want_col = np.asarray(ref["colbert_vecs"][i])
        assert got["colbert_vecs"].shape == want_col.shape, i
        assert np.abs(got["colbert_vecs"] - want_col).max() <= 1e-5, i


def test_single_and_batched_agree(keras_model, flag_model) -> None:
    """Padding must not leak into real tokens: batch-of-one equals the padded batch row."""
    ids_b, mask_b = _padded_batch(flag_model.tokenizer, TEXTS)
    batch = keras_model(ids_b, mask_b)
    for i in range(len(TEXTS)):
        n = int(mask_b[i].sum())
        one = keras_model(ids_b[i : i + 1, :n], mask_b[i : i + 1, :n])
        assert np.abs(one["dense_vecs"].numpy()[0] - batch["dense_vecs"].numpy()[i]).max() < 1e-5
        np.testing.assert_allclose(one["sparse_weights"].numpy()[0],
                                   batch["sparse_weights"].numpy()[i, :n], atol=1e-5)


def test_dimensions_come_from_config(tmp_path: Path) -> None:
    """A differently shaped model (3 layers, 6 heads, hidden 48) builds with no code change."""
    from tests.support.synthetic import make_checkpoint

    ckpt = make_checkpoint(tmp_path / "odd", seed=3, hidden_size=48, num_hidden_layers=3,
                           num_attention_heads=6, intermediate_size=96)
    model = build_model(load_checkpoint(ckpt))
    ids = np.array([[0, 5, 6, 2]], np.int32)
    out = model(ids, np.ones_like(ids))
    assert out["dense_vecs"].shape == (1, 48)
    assert out["colbert_vecs"].shape == (1, 3, 48)
    assert len(model.blocks) == 3

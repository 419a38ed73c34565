"""The model-family registry (edge_m3.families) and the BERT family's Keras encoder against
sentence-transformers: on random weights with both poolings, and on the real all-MiniLM-L6-v2
over the fidelity sample's texts (ids from the `tokenizers` library, so the model is judged
apart from the WordPiece tokenizer, which tests/test_wordpiece.py judges)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from edge_m3.checkpoint import ModelConfig, load_checkpoint
from edge_m3.cli import main
from edge_m3.errors import EdgeM3Error
from edge_m3.families import ABSOLUTE, AFTER_PADDING, FAMILIES, M3, SENTENCE_TRANSFORMERS, family_for
from tests.support.bert import make_bert_checkpoint, minilm_dir

MINILM_CONFIG = {"vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6,
                 "num_attention_heads": 12, "intermediate_size": 1536, "max_position_embeddings": 512,
                 "type_vocab_size": 2, "layer_norm_eps": 1e-12, "pad_token_id": 0, "hidden_act": "gelu",
                 "model_type": "bert"}


def test_registry_keys_and_schemes() -> None:
    assert {f.name for f in FAMILIES.values()} == {"xlm-roberta", "bert", "modernbert"}
    assert family_for("xlm-roberta", "x").positions == AFTER_PADDING
    assert family_for("bert", "x").positions == ABSOLUTE
    with pytest.raises(EdgeM3Error, match="^cfg: 'model_type' 'gpt2' is not a family edge-m3 builds "
                                          r"\(known: bert, modernbert, xlm-roberta\)$"):
        family_for("gpt2", "cfg")


def test_bert_config_positions(tmp_path: Path) -> None:
    """BERT's positions are rows 0..511 (XLM-R's start after the padding id)."""
    (tmp_path / "config.json").write_text(json.dumps(MINILM_CONFIG))
    cfg = ModelConfig.from_json(tmp_path / "config.json")
    assert cfg.family.name == "bert" and cfg.max_seq_len == 512
    assert cfg.family.position_rows(cfg, [16, 256]) == 256


@pytest.mark.parametrize("change, needle", [
    ({"model_type": "t5"}, "'model_type' 't5' is not a family edge-m3 builds"),
    ({"model_type": None}, "missing key 'model_type'"),
    ({"hidden_act": "relu"}, "'hidden_act' 'relu' unsupported (bert here implements 'gelu')"),
])
def test_bert_config_errors(tmp_path: Path, change: dict, needle: str) -> None:
    cfg = {k: v for k, v in {**MINILM_CONFIG, **change}.items() if v is not None}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(EdgeM3Error, match="^" + str(path) + ": ") as info:
        ModelConfig.from_json(path)
    assert needle in str(info.value)


def test_minilm_checkpoint_layout() -> None:
    ckpt = load_checkpoint(minilm_dir())
    assert ckpt.family.name == "bert" and ckpt.outputs is SENTENCE_TRANSFORMERS
    assert (ckpt.pooling.mode, ckpt.pooling.normalize, ckpt.max_seq_length) == ("mean", True, 256)
    assert ckpt.colbert_dim == 0 and ckpt.default_max_length == 256
    assert ckpt.tokenizer_path.name == "tokenizer.json"
    assert "pooler.dense.weight" not in ckpt.tensors  # the pooler is not part of the embedding


def test_m3_checkpoint_layout(tiny_ckpt: Path) -> None:
    ckpt = load_checkpoint(tiny_ckpt)
    assert ckpt.family.name == "xlm-roberta" and ckpt.outputs is M3
    assert (ckpt.pooling.mode, ckpt.pooling.normalize) == ("cls", True)


@pytest.fixture()
def bert_copy(tmp_path: Path) -> Path:
    """A small random BERT checkpoint that a test may damage."""
    return make_bert_checkpoint(tmp_path / "bert", pooling="cls")


@pytest.mark.parametrize("damage, needle", [
    ("no_tokenizer", "tokenizer.json: missing (the bert tokenizer the bundle ships: tokenizer.json or "
                     "vocab.txt)"),
    ("max_pooling", "pooling ['pooling_mode_max_tokens'] unsupported"),
    ("no_pooling", "pooling none unsupported"),
    ("dense_module", "unsupported (edge-m3 reproduces Transformer, Pooling and an optional Normalize)"),
    ("no_modules", "modules.json: missing"),
    ("bad_max_len", "'max_seq_length' must be an integer of at least 2"),
    ("type_ids", "post_processor.single gives token types [1, 1, 1]; edge-m3's models take token type 0"),
])
def test_bert_layout_errors_are_one_line(bert_copy: Path, damage: str, needle: str, capsys) -> None:
    """Each bad BERT checkpoint is one line naming the file, exit 2, before any conversion."""
    pool = bert_copy / "1_Pooling" / "config.json"
    if damage == "no_tokenizer":
        for name in ("vocab.txt", "tokenizer.json"):
            (bert_copy / name).unlink()
    elif damage in ("max_pooling", "no_pooling"):
        cfg = json.loads(pool.read_text())
        cfg["pooling_mode_cls_token"] = False
        cfg["pooling_mode_max_tokens"] = damage == "max_pooling"
        pool.write_text(json.dumps(cfg))
    elif damage == "dense_module":
        modules = json.loads((bert_copy / "modules.json").read_text())
        modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense",
                           "type": "sentence_transformers.models.Dense"})
        (bert_copy / "modules.json").write_text(json.dumps(modules))
    elif damage == "no_modules":
        (bert_copy / "modules.json").unlink()
    elif damage == "bad_max_len":
        (bert_copy / "sentence_bert_config.json").write_text('{"max_seq_length": 1}')
    elif damage == "type_ids":
        tok = json.loads((bert_copy / "tokenizer.json").read_text())
        for piece in tok["post_processor"]["single"]:
            next(iter(piece.values()))["type_id"] = 1
        (bert_copy / "tokenizer.json").write_text(json.dumps(tok))
    assert main(["build", "--checkpoint", str(bert_copy), "--out", str(bert_copy.parent / "out"),
                 "--kits", "none", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and needle in err and str(bert_copy) in err


def test_bert_heads_and_lengths_options(bert_copy: Path, capsys) -> None:
    """A sentence-transformers checkpoint has the dense head only; its default lengths end at
    its max_seq_length."""
    from edge_m3.builder.options import BuildOptions, default_seq_lens, for_checkpoint

    ckpt = load_checkpoint(bert_copy)
    opts = for_checkpoint(BuildOptions(), ckpt)
    assert opts.heads == ("dense",) and tuple(opts.seq_lens) == (16, 32, 64, 128)
    assert default_seq_lens(256) == (16, 32, 64, 128, 256) and default_seq_lens(8192)[-1] == 512
    assert default_seq_lens(100) == (16, 32, 64, 100)
    assert main(["build", "--checkpoint", str(bert_copy), "--heads", "dense,sparse", "--out",
                 str(bert_copy.parent / "out"), "--kits", "none", "-q"]) == 2
    assert "--heads sparse: this checkpoint has no sparse head" in capsys.readouterr().err


def _st_reference(folder: Path, texts: list[str], max_length: int) -> tuple[list[list[int]], np.ndarray]:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    model.max_seq_length = max_length
    dense = model.encode(texts, batch_size=16, convert_to_numpy=True, show_progress_bar=False)
    ids = [model.tokenizer(t, truncation=True, max_length=max_length)["input_ids"] for t in texts]
    return ids, np.asarray(dense, np.float32)


def _keras_dense(folder: Path, ids: list[list[int]], pad_to: int | None = None) -> np.ndarray:
    """The Keras encoder's dense output, one text at a time (padded to `pad_to` when given)."""
    from edge_m3.modeling import build_model

    ckpt = load_checkpoint(folder)
    model = build_model(ckpt)
    out = []
    for row in ids:
        n = pad_to or len(row)
        arr = np.full((1, n), ckpt.config.pad_token_id, np.int32)
        arr[0, :len(row)] = row
        mask = np.zeros((1, n), np.int32)
        mask[0, :len(row)] = 1
        out.append(model(arr, mask, heads=("dense",), hidden=False)["dense_vecs"].numpy()[0])
    return np.asarray(out)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


TEXTS = ["The quick brown fox jumps over the lazy dog.", "Héllo WORLD, naïve café!", "短い日本語の文",
         "[CLS] literal specials [SEP] in text", "a " * 300, "x"]


@pytest.mark.models
@pytest.mark.parametrize("pooling, normalize", [("cls", True), ("mean", False), ("cls", False)])
def test_keras_bert_equals_sentence_transformers_random(tmp_path: Path, pooling: str, normalize: bool) -> None:
    """Both pooling paths, normalised or not, padded or not: cosine >= 0.99999 and the
    normalised vectors' values within 1e-5 of sentence-transformers'."""
    ckpt = make_bert_checkpoint(tmp_path / "b", pooling=pooling, normalize=normalize, seed=3)
    ids, ref = _st_reference(ckpt, TEXTS, 128)
    for pad_to in (None, 128):
        ours = _keras_dense(ckpt, ids, pad_to)
        assert _cosines(ours, ref).min() >= 0.99999
        assert np.abs(ours - ref).max() <= 1e-4 * max(1.0, float(np.abs(ref).max()))
    if normalize:
        assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


@pytest.mark.models
def test_keras_minilm_equals_sentence_transformers_on_the_fidelity_sample() -> None:
    """The real all-MiniLM-L6-v2 over every text of the committed fidelity sample (24
    languages), truncated at its 256 tokens as sentence-transformers truncates: cosine >= 0.99999."""
    from edge_m3.lab.fidelity import read_corpus

    sample = Path(__file__).resolve().parents[1] / "edge_m3" / "data" / "fidelity_sample.jsonl"
    texts = [r["text"] for r in read_corpus(sample, "texts").records]
    ids, ref = _st_reference(minilm_dir(), texts, 256)
    ours = _keras_dense(minilm_dir(), ids)
    cos = _cosines(ours, ref)
    assert len(texts) > 150 and cos.min() >= 0.99999, (cos.min(), texts[int(cos.argmin())][:60])


def test_copy_of_minilm_without_modules_is_refused(tmp_path: Path, capsys) -> None:
    """A BERT snapshot with no output layout (no modules.json) is one line, exit 2."""
    dst = tmp_path / "m"
    shutil.copytree(minilm_dir(), dst)
    (dst / "modules.json").unlink()
    assert main(["build", "--checkpoint", str(dst), "--out", str(tmp_path / "o"), "--kits", "none",
                 "-q"]) == 2
    assert "modules.json: missing" in capsys.readouterr().err

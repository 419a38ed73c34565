"""Small (or full-size) random checkpoints in the exact BAAI/bge-m3 snapshot layout.

Tests and benchmarks need real files in the real layout without the hub: a random
`transformers` XLMRobertaModel, random ColBERT/sparse heads saved with `torch.save`, and a
SentencePiece model trained on the spot. Needs the dev extra (torch, transformers).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

TRAIN_TEXT = [
    "Hello world, this is a small test of the tokenizer.",
    "The quick brown fox jumps over the lazy dog.",
    "BGE-M3 produces dense, sparse and ColBERT vectors.",
    "안녕하세요, 세계. 오늘 날씨가 좋네요.",
    "한국어 문장도 잘 처리해야 합니다.",
    "こんにちは世界。今日はいい天気ですね。",
    "你好，世界。今天天气很好。",
    "สวัสดีชาวโลก วันนี้อากาศดี",
    "مرحبا بالعالم، الطقس جميل اليوم.",
    "שלום עולם, מזג האוויר יפה היום.",
    "नमस्ते दुनिया, आज मौसम अच्छा है।",
    "Привет, мир! Сегодня хорошая погода.",
    "Γειά σου κόσμε, σήμερα έχει ωραίο καιρό.",
    "Bonjour le monde, ça va? Très bien, merci.",
    "Grüße aus München, schöne Straße.",
    "¿Dónde está la biblioteca? Aquí está.",
    "Numbers 0123456789 and symbols !?@#%&*()[]{}",
]

# Defaults give a model that runs in well under a second but keeps every structural feature.
TINY_CONFIG = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=514 + 2,
    type_vocab_size=1,
    layer_norm_eps=1e-5,
    hidden_act="gelu",
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1,
    initializer_range=0.02,
)

# BAAI/bge-m3's config.json, minus the vocabulary which follows the SentencePiece model.
BGE_M3_CONFIG = dict(
    hidden_size=1024,
    num_hidden_layers=24,
    num_attention_heads=16,
    intermediate_size=4096,
    max_position_embeddings=8194,
    type_vocab_size=1,
    layer_norm_eps=1e-5,
    hidden_act="gelu",
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1,
    initializer_range=0.02,
)


def train_sentencepiece(path: Path, vocab_size: int = 400, extra_text: list[str] | None = None) -> Path:
    """Train a unigram model with XLM-R's piece order (<unk>=0, <s>=1, </s>=2) and nmt_nfkc."""
    import sentencepiece as spm

    text = (TRAIN_TEXT + list(extra_text or [])) * 20
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text),
        model_writer=buf,
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=1.0,
        hard_vocab_limit=False,
        normalization_rule_name="nmt_nfkc",
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        minloglevel=2,
    )
    path.write_bytes(buf.getvalue())
    return path


def make_checkpoint(
    out_dir: Path | str,
    seed: int = 0,
    sp_vocab_size: int = 400,
    weights: str = "safetensors",
    full_size: bool = False,
    vocab_size: int | None = None,
    **config_overrides,
) -> Path:
    """Write a random BGE-M3-layout snapshot into out_dir and return it.

    `weights` is "safetensors" (model.safetensors) or "bin" (pytorch_model.bin, zip pickle).
    `vocab_size` overrides the embedding rows (full-size benchmarks use 250002 with a small
    SentencePiece model: ids past the SentencePiece range are simply never produced).
    """
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sp_path = train_sentencepiece(out / "sentencepiece.bpe.model", sp_vocab_size)
    tok = XLMRobertaTokenizer.from_pretrained(str(out))
    tok.model_max_length = 8192
    tok.save_pretrained(str(out))
    import sentencepiece as spm

    sp_size = spm.SentencePieceProcessor(model_file=str(sp_path)).get_piece_size()
    cfg_dict = dict(BGE_M3_CONFIG if full_size else TINY_CONFIG)
    cfg_dict.update(config_overrides)
    cfg = XLMRobertaConfig(
        vocab_size=vocab_size or sp_size + 2,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        **cfg_dict,
    )
    torch.manual_seed(seed)
    model = XLMRobertaModel(cfg, add_pooling_layer=True).eval()
    if not full_size:
        # Larger-than-default weights so tiny-model parity tests see non-trivial activations.
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() >= 2:
                    p.normal_(0.0, 0.2)
    model.save_pretrained(str(out))
    if weights == "bin":  # transformers 5 only writes safetensors: write the legacy file by hand
        from safetensors.torch import load_file

        st = out / "model.safetensors"
        torch.save(load_file(str(st)), out / "pytorch_model.bin")
        st.unlink()
    cfg_json = json.loads((out / "config.json").read_text())
    cfg_json["architectures"] = ["XLMRobertaModel"]
    (out / "config.json").write_text(json.dumps(cfg_json, indent=2))
    h = cfg.hidden_size
    gen = torch.Generator().manual_seed(seed + 1)
    colbert = {
        "weight": torch.randn(h, h, generator=gen) / h**0.5,
        "bias": torch.randn(h, generator=gen) * 0.02,
    }
    sparse = {
        "weight": torch.randn(1, h, generator=gen) / h**0.5,
        "bias": torch.full((1,), 0.05),
    }
    torch.save(colbert, out / "colbert_linear.pt")
    torch.save(sparse, out / "sparse_linear.pt")
    del model
    return out

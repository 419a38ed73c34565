"""Random-weight ModernBERT checkpoints in sentence-transformers' layout (no trained ModernBERT
ships on PyPI): transformers' own ModernBertModel, seeded, saved as a hub snapshot would be,
with a byte-level BPE tokenizer.json trained here by the `tokenizers` library (ModernBERT's
algorithm and special tokens) on the committed corpora."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.bert import st_modules

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 96,
         "local_attention": 16, "global_attn_every_n_layers": 3}
SPECIALS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]


def train_tokenizer(out: Path, vocab_size: int = 3000) -> Path:
    """A byte-level BPE tokenizer.json as ModernBERT's is built: ByteLevel pre-tokenizer (GPT-2
    regex, no prefix space), BPE, `[CLS] $A [SEP]`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    texts = (ROOT / "edge_m3" / "data" / "corpus_multilingual.txt").read_text(encoding="utf-8").splitlines()
    texts += [json.loads(line)["text"] for line in
              (ROOT / "edge_m3" / "data" / "fidelity_sample.jsonl").read_text(encoding="utf-8").splitlines()]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    path = out / "tokenizer.json"
    tok.save(str(path))
    return path


def make_modernbert_checkpoint(out_dir: Path | str, pooling: str = "mean", normalize: bool = True,
                               seed: int = 0, max_seq_length: int = 8192, scale: float | None = 0.2,
                               **config) -> Path:
    """A random ModernBERT (SMALL unless `config` says otherwise; `config={}` with `small=False`
    keeps transformers' defaults: ModernBERT-base's sizes) with a trained BPE tokenizer."""
    import torch
    from transformers import ModernBertConfig, ModernBertModel

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok_path = train_tokenizer(out)
    vocab = len(json.loads(tok_path.read_text(encoding="utf-8"))["model"]["vocab"])
    ids = {t: json.loads(tok_path.read_text(encoding="utf-8"))["model"]["vocab"][t] for t in SPECIALS}
    small = config.pop("small", True)
    cfg = ModernBertConfig(vocab_size=vocab, pad_token_id=ids["[PAD]"], bos_token_id=ids["[CLS]"],
                           eos_token_id=ids["[SEP]"], cls_token_id=ids["[CLS]"], sep_token_id=ids["[SEP]"],
                           **({**SMALL, **config} if small else config))
    torch.manual_seed(seed)
    model = ModernBertModel(cfg).eval()
    if scale:  # larger-than-default weights: non-trivial activations in a small random model
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() >= 2:
                    p.normal_(0.0, scale)
    model.save_pretrained(str(out))
    st_modules(out, pooling, normalize, cfg.hidden_size, max_seq_length)
    return out

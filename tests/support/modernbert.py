"""Random-weight ModernBERT checkpoints in sentence-transformers' layout (no trained ModernBERT
ships on PyPI): transformers' own ModernBertModel, seeded, saved as a hub snapshot would be,
with the byte-level BPE tokenizer.json that tests/support/bpe.py trains with the `tokenizers`
library (ModernBERT's algorithm, normalizer, added and special tokens) on the committed corpora."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.bert import st_modules

SMALL = {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 96,
         "local_attention": 16, "global_attn_every_n_layers": 3}


def make_modernbert_checkpoint(out_dir: Path | str, pooling: str = "mean", normalize: bool = True,
                               seed: int = 0, max_seq_length: int = 8192, scale: float | None = 0.2,
                               masked_lm: bool = False, **config) -> Path:
    """A random ModernBERT (SMALL unless `config` says otherwise; `config={}` with `small=False`
    keeps transformers' defaults: ModernBERT-base's sizes) with a trained BPE tokenizer.
    `masked_lm`: laid out as the hub holds ModernBERT-base itself: ModernBertForMaskedLM's
    weights (`model.` prefixes, the MLM head beside them) and no sentence-transformers modules
    (`pooling`, `normalize` and `max_seq_length` are then unused; config's classifier_pooling rules)."""
    import torch
    from transformers import ModernBertConfig, ModernBertForMaskedLM, ModernBertModel

    from tests.support.bpe import write_checkpoint

    out = write_checkpoint(Path(out_dir))
    tok = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    ids = {a["content"]: a["id"] for a in tok["added_tokens"]}
    vocab = max([*tok["model"]["vocab"].values(), *ids.values()]) + 1
    small = config.pop("small", True)
    cfg = ModernBertConfig(vocab_size=vocab, pad_token_id=ids["[PAD]"], bos_token_id=ids["[CLS]"],
                           eos_token_id=ids["[SEP]"], cls_token_id=ids["[CLS]"], sep_token_id=ids["[SEP]"],
                           **({**SMALL, **config} if small else config))
    torch.manual_seed(seed)
    model = (ModernBertForMaskedLM if masked_lm else ModernBertModel)(cfg).eval()
    if scale:  # larger-than-default weights: non-trivial activations in a small random model
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() >= 2:
                    p.normal_(0.0, scale)
    model.save_pretrained(str(out))
    if not masked_lm:
        st_modules(out, pooling, normalize, cfg.hidden_size, max_seq_length)
    return out


if __name__ == "__main__":  # python -m tests.support.modernbert OUT OPTIONS_JSON (tests/conftest.py)
    import json
    import sys

    make_modernbert_checkpoint(sys.argv[1], **json.loads(sys.argv[2]))

"""A ModernBERT-like byte-level BPE tokenizer.json, trained here with `tokenizers` (no real
ModernBERT vocabulary ships on PyPI).

Its layout follows answerdotai/ModernBERT-base's tokenizer.json: NFC normalizer, ByteLevel
(add_prefix_space false, use_regex true), BPE without dropout, unk or byte fallback,
TemplateProcessing `[CLS] $A [SEP]`, and added tokens of every kind it has: `|||IP_ADDRESS|||`
and `<|padding|>` inside the model vocabulary, whitespace runs and PII placeholders (normalized,
not special), `<|endoftext|>`, the five BERT specials with `[MASK]` lstrip, `[unused]` ones;
plus an rstrip, an lstrip+rstrip and a non-NFC normalized token that ModernBERT lacks.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from tests.support.texts import corpora

VOCAB_SIZE = 3000
IN_VOCAB = ["|||IP_ADDRESS|||", "<|padding|>"]
# content, special, normalized, lstrip, rstrip (tokenizers' defaults for everything else)
ADDED = [
    ("|||IP_ADDRESS|||", False, True, False, False),
    ("<|padding|>", True, False, False, False),
    ("  ", False, True, False, False),
    ("   ", False, True, False, False),
    ("    ", False, True, False, False),
    ("|||EMAIL_ADDRESS|||", False, True, False, False),
    ("|||PHONE_NUMBER|||", False, True, False, False),
    ("<|endoftext|>", True, False, False, False),
    ("[UNK]", True, False, False, False),
    ("[CLS]", True, False, False, False),
    ("[SEP]", True, False, False, False),
    ("[PAD]", True, False, False, False),
    ("[MASK]", True, False, True, False),
    ("[unused0]", True, False, False, False),
    ("<r>", False, False, False, True),
    ("<lr>", True, False, True, True),
    ("Cafe\u0301!", False, True, False, False),  # matched as NFC's "Café!" after normalization
    ("<n>", False, True, True, True),
]
CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast", "cls_token": "[CLS]", "sep_token": "[SEP]",
          "pad_token": "[PAD]", "unk_token": "[UNK]", "mask_token": "[MASK]", "model_max_length": 8192}


@functools.cache
def trained() -> str:
    """tokenizer.json (as text) of a BPE trained on the committed corpora, ModernBERT's layout."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=IN_VOCAB, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpora(), trainer=trainer)
    d: dict[str, Any] = json.loads(tok.to_str())
    vocab = d["model"]["vocab"]
    next_id = len(vocab)
    added = []
    for content, special, normalized, lstrip, rstrip in ADDED:
        tid = vocab.get(content)
        if tid is None:
            tid, next_id = next_id, next_id + 1
        added.append({"id": tid, "content": content, "single_word": False, "lstrip": lstrip,
                      "rstrip": rstrip, "normalized": normalized, "special": special})
    d["added_tokens"] = added
    ids = {a["content"]: a["id"] for a in added}
    d["post_processor"] = json.loads(processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])]).__getstate__())
    d["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    return json.dumps(d, ensure_ascii=False)


def write_checkpoint(out: Path, edit: Any = None) -> Path:
    """A checkpoint folder with the trained tokenizer.json (after `edit(dict)`, if given) and
    ModernBERT's tokenizer_config.json."""
    out.mkdir(parents=True, exist_ok=True)
    d = json.loads(trained())
    if edit is not None:
        edit(d)
    (out / "tokenizer.json").write_text(json.dumps(d, ensure_ascii=False), encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps(CONFIG), encoding="utf-8")
    return out

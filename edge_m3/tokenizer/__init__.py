"""The device tokenizers (ids equal to the reference's for any text) and vocabulary trimming.

One tokenizer class per kind (the manifest's `tokenizer.kind`, edge_m3.spec.TOKENIZER_KINDS):
tokenizer (`xlmr-sentencepiece`: special-token split, normalisation (normalizer, graphemes),
unigram Viterbi (unigram), XLM-R id mapping, padding) and wordpiece (`wordpiece`: BERT's
normaliser, pre-tokenizer and WordPiece) and bpe (`byte-level-bpe`: GPT-2-style added tokens,
byte-level pre-tokenizer and BPE merges). `open_tokenizer` is the one place a kind is mapped to
its class; `bundle_tokenizer` writes a checkpoint's tokenizer into a bundle. vocab: trimming
plans and the trimmed-row map (SentencePiece bundles).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edge_m3.spec import BYTE_LEVEL_BPE, WORDPIECE, XLMR_SENTENCEPIECE, TokenizerSpec, choose_length
from edge_m3.tokenizer.tokenizer import (
    InvalidTextError,
    Tokenizer,
    check_text,
    pad_ids,
    spec_for_sentencepiece,
)


def open_tokenizer(path: Path, spec: TokenizerSpec) -> Any:
    """The tokenizer of `spec.kind` over its file `path` (a bundle's `tokenizer.file`)."""
    if spec.kind == XLMR_SENTENCEPIECE:
        return Tokenizer(path, spec)
    if spec.kind == BYTE_LEVEL_BPE:
        from edge_m3.tokenizer.bpe import ByteLevelBPETokenizer

        return ByteLevelBPETokenizer(path, spec)
    from edge_m3.tokenizer.wordpiece import WordPieceTokenizer

    assert spec.kind == WORDPIECE  # TokenizerSpec refuses any other kind
    return WordPieceTokenizer(path, spec)


def bundle_tokenizer(checkpoint: Any, out_dir: Path) -> TokenizerSpec:
    """Write the checkpoint's tokenizer file into the bundle folder `out_dir`; its spec."""
    kind = checkpoint.family.tokenizer_kind
    if kind == XLMR_SENTENCEPIECE:
        dest = out_dir / checkpoint.tokenizer_path.name
        dest.write_bytes(checkpoint.tokenizer_path.read_bytes())
        return spec_for_sentencepiece(dest)
    if kind == BYTE_LEVEL_BPE:
        from edge_m3.tokenizer.bpe import bpe_spec, write_bpe

        spec, data = bpe_spec(checkpoint.path)
        write_bpe(data, out_dir / spec.file)
        return spec
    from edge_m3.tokenizer.wordpiece import wordpiece_spec, write_vocab

    spec, vocab = wordpiece_spec(checkpoint.path)
    write_vocab(vocab, out_dir / spec.file)
    return spec


def checkpoint_tokenizer(checkpoint: Any) -> Any:
    """The device tokenizer straight from a checkpoint (the Keras reference, trimming plans)."""
    if checkpoint.family.tokenizer_kind == XLMR_SENTENCEPIECE:
        return Tokenizer(checkpoint.tokenizer_path)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="edge-m3-tokenizer-") as tmp:
        spec = bundle_tokenizer(checkpoint, Path(tmp))  # the vocabulary as a bundle holds it
        return open_tokenizer(Path(tmp) / spec.file, spec)


__all__ = ["InvalidTextError", "Tokenizer", "TokenizerSpec", "bundle_tokenizer", "check_text",
           "checkpoint_tokenizer", "choose_length", "open_tokenizer", "pad_ids", "spec_for_sentencepiece"]

"""The device tokenizer (ids equal to FlagEmbedding's for any text) and vocabulary trimming.

tokenizer: special-token split, normalisation (normalizer, graphemes), unigram Viterbi
(unigram), XLM-R id mapping, padding; vocab: trimming plans and the trimmed-row map.
"""

from edge_m3.contract import TokenizerSpec, choose_length
from edge_m3.tokenizer.tokenizer import (
    InvalidTextError,
    Tokenizer,
    check_text,
    pad_ids,
    spec_for_sentencepiece,
)

__all__ = ["InvalidTextError", "Tokenizer", "TokenizerSpec", "check_text", "choose_length", "pad_ids",
           "spec_for_sentencepiece"]

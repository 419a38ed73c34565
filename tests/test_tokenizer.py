"""The device tokenizer (SentencePiece + XLM-R mapping) vs transformers' XLMRobertaTokenizer."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_m3.errors import EdgeM3Error
from edge_m3.pipeline import choose_length
from edge_m3.tokenizer import InvalidTextError, Tokenizer, TokenizerSpec

MAX_LENGTHS = [None, 8192, 512, 128, 32, 8, 3]


def corpus() -> list[str]:
    text = resources.files("edge_m3").joinpath("data/corpus_multilingual.txt").read_text("utf-8")
    return text.split("\n")[:-1]


@pytest.fixture(scope="module", params=["tiny", "rich"])
def pair(request, tiny_ckpt: Path, tmp_path_factory: pytest.TempPathFactory):
    """(ours, reference) over the same sentencepiece.bpe.model."""
    from transformers import XLMRobertaTokenizer

    from edge_m3.synthetic import train_sentencepiece

    if request.param == "tiny":
        d = tiny_ckpt
    else:  # thousands of real pieces across every script of the corpus
        d = tmp_path_factory.mktemp("rich_spm")
        train_sentencepiece(d / "sentencepiece.bpe.model", vocab_size=6000,
                            extra_text=[line for line in corpus() if len(line) < 2000])
    ref = XLMRobertaTokenizer.from_pretrained(str(d))
    return Tokenizer(d / "sentencepiece.bpe.model"), ref


def _ref_ids(ref, text: str, max_length: int | None) -> list[int]:
    if max_length is None:
        return ref(text, truncation=False)["input_ids"]
    return ref(text, truncation=True, max_length=max_length)["input_ids"]


def test_corpus_shape() -> None:
    lines = corpus()
    assert len(lines) >= 300
    assert "" in lines and any(line.strip() == "" and line for line in lines)
    assert max(len(line) for line in lines) >= 50000


@pytest.mark.parametrize("max_length", MAX_LENGTHS)
def test_corpus_ids_identical(pair, max_length: int | None) -> None:
    ours, ref = pair
    mismatches = [(i, line[:40]) for i, line in enumerate(corpus())
                  if ours.encode(line, max_length) != _ref_ids(ref, line, max_length)]
    assert mismatches == []


def test_long_lines_pass_8192_and_keep_eos(pair) -> None:
    ours, _ = pair
    longest = max(corpus(), key=len)
    assert len(ours.encode(longest)) > 8192 or ours.sp.get_piece_size() < 1000
    ids = ours.encode(longest, 8192)
    assert len(ids) == 8192 and ids[0] == 0 and ids[-1] == 2


TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)
MIXED = st.lists(st.sampled_from(["a", "é", "e\u0301", " ", "  ", "\t", "\n", "\u200b", "\u200d",
                                  "한", "漢", "ｱ", "Ａ", "🏽", "👩", "\u0301", "\x00", "\u3000",
                                  "ﬁ", "①", "ß", "İ", "\u00a0", "ا", "क्ष"]),
                 max_size=30).map("".join)


TRICKY = ["0111", "1111 0000 1010", "\u2581", "a\u2581b", "\u2581\u2581x", " \u2581 ", "aaaa",
          "ΣΑΣ ΑΣΑ", "e\u0301\u0301\u0301", "\u1100\u1161\u11a8", "<s> </s> <pad>"[:0] + "x<y>z"]


@pytest.mark.parametrize("text", TRICKY)
def test_ties_and_pretokenizer_edges(pair, text: str) -> None:
    ours, ref = pair
    assert ours.encode(text) == _ref_ids(ref, text, None)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(TEXT, MIXED), max_length=st.sampled_from(MAX_LENGTHS))
def test_random_unicode_ids_identical(pair, text: str, max_length: int | None) -> None:
    ours, ref = pair
    assert ours.encode(text, max_length) == _ref_ids(ref, text, max_length)


def test_empty_string_and_specials(tiny_ckpt: Path) -> None:
    tok = Tokenizer(tiny_ckpt / "sentencepiece.bpe.model")
    assert tok.encode("") == [0, 2]
    spec = tok.spec
    assert dict(spec.special_ids) == {"bos": 0, "pad": 1, "eos": 2, "unk": 3,
                                      "mask": tok.sp.get_piece_size() + 1}
    assert spec.vocab_size == tok.sp.get_piece_size() + 2
    assert TokenizerSpec.from_manifest(spec.to_manifest()) == spec


@pytest.mark.parametrize("bad", [None, b"bytes", 42, ["list"], "lone \ud800 surrogate"])
def test_invalid_text_is_a_clear_error(tiny_ckpt: Path, bad) -> None:
    tok = Tokenizer(tiny_ckpt / "sentencepiece.bpe.model")
    with pytest.raises(InvalidTextError) as info:
        tok.encode(bad)
    assert "surrogate" in str(info.value) or "must be a str" in str(info.value)
    assert isinstance(info.value, EdgeM3Error)


def test_mapping_comes_from_the_manifest(tiny_ckpt: Path) -> None:
    """A manifest with other special ids drives the mapping (no constants in code)."""
    base = Tokenizer(tiny_ckpt / "sentencepiece.bpe.model")
    spec = TokenizerSpec(special_ids={"bos": 10, "pad": 11, "eos": 12, "unk": 13, "mask": 99},
                         sp_unk_id=0, id_offset=20, vocab_size=500)
    tok = Tokenizer(tiny_ckpt / "sentencepiece.bpe.model", spec)
    pieces = base.encode("Hello world")[1:-1]
    assert tok.encode("Hello world") == [10, *[p - 1 + 20 for p in pieces], 12]


def test_padding_and_batches(tiny_ckpt: Path) -> None:
    tok = Tokenizer(tiny_ckpt / "sentencepiece.bpe.model")
    ids, mask = tok.pad([0, 7, 2], 6)
    assert ids.dtype == np.int32 and ids.tolist() == [0, 7, 2, 1, 1, 1]
    assert mask.tolist() == [1, 1, 1, 0, 0, 0]
    with pytest.raises(EdgeM3Error):
        tok.pad([0] * 7, 6)
    b_ids, b_mask = tok.encode_padded_batch(["Hello world", "", "The quick brown fox " * 9], 16)
    assert b_ids.shape == b_mask.shape == (3, 16)
    assert b_ids[1, :2].tolist() == [0, 2] and b_mask[1].sum() == 2
    assert b_ids[2, -1] == 2 and b_mask[2].all()
    assert tok.encode_batch(["a", "b"]) == [tok.encode("a"), tok.encode("b")]


def test_choose_length() -> None:
    assert choose_length(2, [32, 128, 512]) == 32
    assert choose_length(32, [512, 32, 128]) == 32
    assert choose_length(33, [32, 128, 512]) == 128
    assert choose_length(9000, [32, 128, 512]) == 512

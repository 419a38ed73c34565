"""The byte-level BPE tokenizer (ModernBERT family) vs the reference: the `tokenizers` library
loading the same tokenizer.json. Ids must be identical for every text, no exceptions list.

No real ModernBERT (or GPT-2) tokenizer.json ships in any installed package, so the vocabulary is
trained here with `tokenizers` on the committed corpora in ModernBERT's layout (tests/support/bpe.py:
NFC, ByteLevel, TemplateProcessing, its kinds of added tokens with lstrip / rstrip / normalized
flags). Compared on: the corpora, tricky texts, Hypothesis strings, every code point in context,
NFC's compositions and mark orders, option variants (no normalizer, prefix space, no regex,
ignore_merges, unk with and without fusing, a vocabulary missing bytes, legacy merges); then
the checkpoint reader's and the bundle reader's refusals, one line each, and the generated
tables' freshness."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as Reference
from tokenizers import models, pre_tokenizers, trainers

from edge_m3.errors import EdgeM3Error
from edge_m3.spec import BPE_FILE, BYTE_LEVEL_BPE, TokenizerSpec
from edge_m3.tokenizer import InvalidTextError, bundle_tokenizer, open_tokenizer
from edge_m3.tokenizer.bpe import ByteLevelBPETokenizer, _tables, bpe_spec, write_bpe
from edge_m3.tokenizer.wordpiece import _tables as wordpiece_tables
from tests.support.bpe import ADDED, CONFIG, trained, write_checkpoint
from tests.support.texts import CODE_POINTS, PER_TEXT, check_ids, check_padded, corpora

MAX_LENGTH = 128


def reference(path: Path, max_length: int | None = None) -> Reference:
    """tokenizers on the file, without stored padding (and truncation unless asked)."""
    ref = Reference.from_file(str(path))
    ref.no_padding()
    ref.no_truncation()
    if max_length is not None:
        ref.enable_truncation(max_length)
    return ref


def ours_for(ckpt: Path) -> ByteLevelBPETokenizer:
    """What a bundle holds: the reader's spec through the manifest, and the bpe.json written."""
    spec, data = bpe_spec(ckpt)
    spec = TokenizerSpec.from_manifest(json.loads(json.dumps(spec.to_manifest())))
    out = ckpt / "bundle"
    out.mkdir(exist_ok=True)
    write_bpe(data, out / spec.file)
    tok = open_tokenizer(out / spec.file, spec)
    assert isinstance(tok, ByteLevelBPETokenizer)
    return tok


@pytest.fixture(scope="module")
def modernbert(tmp_path_factory: pytest.TempPathFactory) -> tuple[ByteLevelBPETokenizer, Reference, Reference]:
    ckpt = write_checkpoint(tmp_path_factory.mktemp("modernbert"))
    return ours_for(ckpt), reference(ckpt / "tokenizer.json"), reference(ckpt / "tokenizer.json", MAX_LENGTH)


ADDED_STRINGS = [a[0] for a in ADDED]
TRICKY = [
    "", " ", "  ", "\t\n", "\n\n\n", " \u00a0 \u3000x", "[CLS]", "a[CLS]b", "[CLS][SEP]", "[[MASK]]",
    "x [MASK]y", "x   [MASK]   y", "\n [MASK]", "[MASK][MASK]", " [MASK] [MASK] ", "[mask]", "[MASK ]",
    "<r>", "a<r>   b", "<r> <r>  <r>", "  <lr>  <lr>  ", "x<lr>y", "<n>", " \u3000<n>\u2028 ",
    "Café! Cafe\u0301! CAFE\u0301! Cafe\u0301\u0316!", "|||IP_ADDRESS||| at |||EMAIL_ADDRESS|||x",
    "a    b     c      d", "  leading", "trailing  ", "tab\t\tand\u00a0nbsp", "<|endoftext|><|padding|>",
    "don't I'll we've they're she'd it's 'S 'LL", "$5.00 3.14 1,000,000 ٣٤ ½ ²³ ①", "hello\u200bworld",
    "😀👍🏽 👩‍👩‍👧 🇰🇷 x", "中文字 test 漢字かな한국어", "\u1100\u1161\u11a8 \uac01",
    "e\u0308\u0323\u0301\u0334", "\u0915\u094d\u0937 \u0627\u0644\u0639 Ελληνικά Кириллица",
    "\x00\x01\x7f\x85\ufffd\ufeff", "\U0010ffff\ue000",
    "\U00011935\U00011930 \U00011938", "a" * 300, "ab " * 200,
]

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)
PIECES = st.sampled_from([
    *ADDED_STRINGS, "[", "]", "<", ">", "|", "MASK", "Cafe", "\u0301", "\u0316", "!", "é", "e", "E",
    " ", "  ", "   ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2028", "\u1680", "\x1c", "\x85", "\u200b",
    "'s", "'t", "'re", "'S", "'", "a", "the", "The", "hello", "world", "1", "23", "٣", "½", "Ⅻ",
    "中", "한", "\u1100\u1161", "\u11a8", "ㄱ", "😀", "🏽", "\u200d", "🇰", "\ufe0f", "ا", "क्ष", "\u0e31",
    "\U00011935", "\U00011930", "\u0344", "\u0f73", "\u2126", "\u212b", "Å", "A\u030a", "\u1e9b\u0323",
    "$", "%", "-", "_", ".", ",", "\x00", "\ufffd", "\U0010ffff", "\ue000", "\U0001d15e",
])
MIXED = st.lists(st.one_of(PIECES, TEXT), max_size=25).map("".join)

# Marks of several combining classes (230, 220, 1, 10, 9, 240): NFC's order and blocking.
ANCHOR_MARKS = "\u0301\u0316\u0334\u05b0\u094d\u0345"


def nfc_texts() -> list[str]:
    """Every composition the reference makes, with marks between and after its two parts, and the
    code points where Python's NFC may differ, next to marks and composable letters."""
    compose = _tables().compose
    items = [f"{a}{b} {a}{m}{b} {a}{b}{m} {c}{m} x{c}"
             for (a, b), c in compose.items() for m in ANCHOR_MARKS[:3]]
    marks = sorted(set(wordpiece_tables().combining))
    items += [f"a{c}{m}b e{m}{c}\u0301 {c}{m}{c}" for c in marks for m in ANCHOR_MARKS]
    unsafe = [c for c in CODE_POINTS if _tables().nfc_unsafe.match(c)]
    items += [f"{c}{d} {d}{c}" for c in unsafe for d in unsafe + ["\u0301", "\u0316", "a", "\u1100"]]
    return [" ".join(items[i:i + PER_TEXT]) for i in range(0, len(items), PER_TEXT)]


# --- the ModernBERT-like tokenizer.json ---------------------------------------------------------


def test_spec(modernbert) -> None:
    ours = modernbert[0]
    spec = ours.spec
    d = json.loads(trained())
    ids = {a["content"]: a["id"] for a in d["added_tokens"]}
    assert spec.kind == BYTE_LEVEL_BPE and spec.file == BPE_FILE
    assert spec.vocab_size == len(d["model"]["vocab"]) + len(set(ADDED_STRINGS) - set(d["model"]["vocab"]))
    names = {"bos": "cls", "pad": "pad", "eos": "sep", "unk": "unk", "mask": "mask"}
    assert spec.special_ids == {k: ids[CONFIG[f"{t}_token"]] for k, t in names.items()}
    assert spec.options == {"normalizer": "NFC", "add_prefix_space": False, "use_regex": True,
                            "ignore_merges": False, "fuse_unk": False, "unk_token": ""}
    assert (spec.sp_unk_id, spec.id_offset, spec.vocab_map) == (0, 0, None)


def test_corpora(modernbert) -> None:
    ours, ref, ref128 = modernbert
    texts = corpora() + TRICKY
    check_ids(ours, ref, texts)
    check_ids(ours, ref128, texts, MAX_LENGTH)
    assert any(len(ours.encode(t)) > MAX_LENGTH for t in texts)  # truncation is exercised


def test_nfc(modernbert) -> None:
    ours, ref, _ = modernbert
    check_ids(ours, ref, nfc_texts())


def test_the_files_own_settings(modernbert, tmp_path: Path) -> None:
    """tokenizer.json with its own truncation and padding (to 64) = encode(text, 64) padded."""
    ours = modernbert[0]
    ckpt = write_checkpoint(tmp_path)
    raw = Reference.from_file(str(ckpt / "tokenizer.json"))
    raw.enable_truncation(64)
    raw.enable_padding(length=64, pad_id=ours.pad_id, pad_token="[PAD]")
    check_padded(ours, raw, corpora()[:200] + TRICKY, 64)


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(TEXT, MIXED))
def test_random_strings(modernbert, text: str) -> None:
    ours, ref, ref128 = modernbert
    assert ours.encode(text) == ref.encode(text).ids
    assert ours.encode(text * 20, MAX_LENGTH) == ref128.encode(text * 20).ids


def every_code_point_texts() -> list[str]:
    """Each code point after a letter and before a digit (which class it is), doubled, after a
    space, after 'e' and before a mark (NFC), and on both sides of the lstrip / rstrip tokens."""
    return [" ".join(f"a{c}1{c}{c} e{c}\u0301{c}[MASK]{c}<r>{c}"
                     for c in CODE_POINTS[i:i + PER_TEXT]) for i in range(0, len(CODE_POINTS), PER_TEXT)]


@pytest.mark.slow  # ~150 s on a shared 2-core machine, about half of it the reference encoding
def test_every_code_point(modernbert) -> None:
    ours, ref, _ = modernbert
    check_ids(ours, ref, every_code_point_texts())


def test_interface(modernbert) -> None:
    ours = modernbert[0]
    cls, sep, pad = ours.bos, ours.eos, ours.pad_id
    hello = ours.encode("hello world")
    assert hello[0] == cls and hello[-1] == sep and len(hello) > 2
    assert ours.encode("hello world", 3) == [cls, hello[1], sep]
    assert ours.encode_batch(["hello world", ""]) == [hello, [cls, sep]]
    assert ours.to_model_ids(hello) == hello
    ids, mask = ours.encode_padded_batch(["hello world", ""], len(hello) + 2)
    assert ids.dtype == np.int32 and ids.tolist() == [[*hello, pad, pad], [cls, sep] + [pad] * len(hello)]
    assert mask.tolist() == [[1] * len(hello) + [0, 0], [1, 1] + [0] * len(hello)]
    for bad in (None, b"x", 3, "\ud800"):
        with pytest.raises(InvalidTextError):
            ours.encode(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidTextError):
        ours.encode_batch("hello")
    with pytest.raises(EdgeM3Error, match="max_length"):
        ours.encode("hello", 1)


def test_bundle_tokenizer(tmp_path: Path) -> None:
    """The one branch each in open_tokenizer / bundle_tokenizer: bpe.json written, read back."""
    ckpt = write_checkpoint(tmp_path / "ckpt")
    checkpoint = SimpleNamespace(family=SimpleNamespace(tokenizer_kind=BYTE_LEVEL_BPE), path=ckpt)
    (tmp_path / "bundle").mkdir()
    spec = bundle_tokenizer(checkpoint, tmp_path / "bundle")
    assert spec.file == BPE_FILE and (tmp_path / "bundle" / BPE_FILE).is_file()
    tok = open_tokenizer(tmp_path / "bundle" / BPE_FILE, spec)
    check_ids(tok, reference(ckpt / "tokenizer.json"), corpora()[:50] + TRICKY)


# --- option variants, edited into the same tokenizer.json ----------------------------------------


def _set(path: str, value: Any):
    def edit(d: dict[str, Any]) -> None:
        keys = path.split(".")
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value
    return edit


def _legacy_merges(d: dict[str, Any]) -> None:
    d["model"]["merges"] = [" ".join(m) for m in d["model"]["merges"]]


def _sequence_post(d: dict[str, Any]) -> None:
    d["post_processor"] = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        d["post_processor"]]}


def _unk(fuse: bool):
    def edit(d: dict[str, Any]) -> None:
        d["model"].update(unk_token="<|padding|>", fuse_unk=fuse)
    return edit


VARIANTS = {
    "no normalizer": _set("normalizer", None),
    "prefix space": _set("pre_tokenizer.add_prefix_space", True),
    "no regex": _set("pre_tokenizer.use_regex", False),
    "ignore merges": _set("model.ignore_merges", True),
    "legacy merges": _legacy_merges,
    "sequence post-processor": _sequence_post,
    "unk (alphabet complete)": _unk(True),
}


def _sample_texts() -> list[str]:
    some = CODE_POINTS[:0x800] + CODE_POINTS[0x800::251]
    inside = [" ".join(f"a{c}b {c}{c} {c}[MASK]{c}<r>{c}" for c in some[i:i + PER_TEXT])
              for i in range(0, len(some), PER_TEXT)]
    return corpora()[:150] + TRICKY + inside


@pytest.mark.parametrize("case", VARIANTS)
def test_variants(case: str, tmp_path: Path) -> None:
    ckpt = write_checkpoint(tmp_path, VARIANTS[case])
    check_ids(ours_for(ckpt), reference(ckpt / "tokenizer.json"), _sample_texts())


def missing_bytes(fuse: bool | None):
    """An edit: the model and pre-tokenizer of a vocabulary trained without the full byte alphabet
    (ignore_merges, prefix space), with unk "[UNK]" (fused or not) or, for None, without one."""
    tok = Reference(models.BPE(unk_token="[UNK]" if fuse is not None else None, fuse_unk=bool(fuse),
                               ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.train_from_iterator(corpora()[:100], trainer=trainers.BpeTrainer(
        vocab_size=600, special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"], show_progress=False))

    def edit(d: dict[str, Any]) -> None:
        d.update({k: v for k, v in json.loads(tok.to_str()).items() if k in ("model", "pre_tokenizer")})
        d["normalizer"] = None
        d["added_tokens"] = [dict(a, id=d["model"]["vocab"][a["content"]]) for a in d["added_tokens"]
                             if a["content"] in d["model"]["vocab"]]
        for name, entry in d["post_processor"]["special_tokens"].items():
            entry["ids"] = [d["model"]["vocab"][name]]
    return edit


@pytest.mark.parametrize("fuse", [False, True, None])
def test_missing_bytes(fuse: bool | None, tmp_path: Path) -> None:
    """A vocabulary trained without the full byte alphabet: characters of unseen bytes become the
    unk token (fused or not) or, without one, vanish."""
    edit = missing_bytes(fuse)
    ckpt = write_checkpoint(tmp_path, edit)
    ours = ours_for(ckpt)
    assert ours.options["unk_token"] == ("[UNK]" if fuse is not None else "")
    texts = _sample_texts()
    check_ids(ours, reference(ckpt / "tokenizer.json"), texts)
    assert any(ours.unk in ours.encode(t) for t in texts) or fuse is None


# --- bad input: one line naming the file and the field -------------------------------------------


def _drop_mask(d: dict[str, Any]) -> None:
    next(a for a in d["added_tokens"] if a["content"] == "[MASK]")["content"] = "[MASK2]"


def _added(**flags: Any):
    def edit(d: dict[str, Any]) -> None:
        d["added_tokens"][-1].update(flags)
    return edit


BAD_JSON = {
    "normalizer": (_set("normalizer", {"type": "NFKC"}), "normalizer.type"),
    "pre_tokenizer": (_set("pre_tokenizer", {"type": "Whitespace"}), "pre_tokenizer.type"),
    "sequence pre_tokenizer": (_set("pre_tokenizer", {"type": "Sequence", "pretokenizers": []}),
                               "pre_tokenizer.type"),
    "prefix space": (_set("pre_tokenizer.add_prefix_space", "yes"), "pre_tokenizer.add_prefix_space"),
    "model": (_set("model.type", "WordPiece"), "model.type"),
    "dropout": (_set("model.dropout", 0.1), "model.dropout"),
    "byte fallback": (_set("model.byte_fallback", True), "model.byte_fallback"),
    "prefix": (_set("model.continuing_subword_prefix", "##"), "model.continuing_subword_prefix"),
    "suffix": (_set("model.end_of_word_suffix", "</w>"), "model.end_of_word_suffix"),
    "unk": (_set("model.unk_token", "<nope>"), "model.unk_token"),
    "ignore merges": (_set("model.ignore_merges", 1), "model.ignore_merges"),
    "merge": (lambda d: d["model"]["merges"].append(["Ġ", "zzz"]), "model.merges[" ),
    "merge string": (lambda d: d["model"]["merges"].append("a b c"), "model.merges["),
    "vocab ids": (lambda d: d["model"]["vocab"].update({"zzz-gap": 99999}), "model.vocab"),
    "single_word": (_added(single_word=True), "single_word"),
    "lstrip flag": (_added(lstrip="yes"), "added_tokens["),
    "repeated": (lambda d: d["added_tokens"].append(dict(d["added_tokens"][-1])), "added_tokens["),
    "added id": (_added(id=5), "added_tokens["),
    "post_processor": (_set("post_processor", None), "post_processor"),
    "roberta": (_set("post_processor", {"type": "RobertaProcessing"}), "post_processor"),
    "template ids": (lambda d: d["post_processor"]["special_tokens"]["[CLS]"].update(ids=[7]),
                     "post_processor.special_tokens"),
    "missing special": (_drop_mask, "mask_token"),
}


@pytest.mark.parametrize("case", BAD_JSON)
def test_reader_refuses(case: str, tmp_path: Path) -> None:
    edit, field = BAD_JSON[case]
    write_checkpoint(tmp_path, edit)
    with pytest.raises(EdgeM3Error) as info:
        bpe_spec(tmp_path)
    message = str(info.value)
    assert "\n" not in message and str(tmp_path / "tokenizer.json") in message and field in message, message


def test_reader_needs_json(tmp_path: Path) -> None:
    with pytest.raises(EdgeM3Error, match="no tokenizer.json"):
        bpe_spec(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{", encoding="utf-8")
    with pytest.raises(EdgeM3Error, match="not valid JSON"):
        bpe_spec(tmp_path)


BAD_BUNDLE = {
    "missing file": (None, "missing byte-level BPE"),
    "vocab": (lambda d: d.update(vocab="x"), "vocab"),
    "duplicate vocab": (lambda d: d["vocab"].append(d["vocab"][0]), "distinct"),
    "merge": (lambda d: d["merges"].append(["x", "nope"]), "merge ['x', 'nope']"),
    "merge shape": (lambda d: d["merges"].append(["x"]), "merges must be"),
    "added flags": (lambda d: d["added_tokens"][0].pop("rstrip"), "added_tokens entry"),
    "added id": (lambda d: d["added_tokens"][-1].update(id=10**6), "added token"),
    "vocab size": (lambda d: d["added_tokens"].pop(), "vocab_size"),
}


@pytest.mark.parametrize("case", BAD_BUNDLE)
def test_bundle_file_refusals(case: str, tmp_path: Path) -> None:
    edit, expected = BAD_BUNDLE[case]
    spec, data = bpe_spec(write_checkpoint(tmp_path / "ckpt"))
    data = json.loads(json.dumps(data))
    if edit is not None:
        edit(data)
        write_bpe(data, tmp_path / BPE_FILE)
    with pytest.raises(EdgeM3Error) as info:
        ByteLevelBPETokenizer(tmp_path / BPE_FILE, spec)
    assert "\n" not in str(info.value) and expected in str(info.value), str(info.value)


def test_manifest_refusals(tmp_path: Path) -> None:
    spec, data = bpe_spec(write_checkpoint(tmp_path / "ckpt"))
    write_bpe(data, tmp_path / BPE_FILE)
    entry = spec.to_manifest()
    for options, expected in ((entry["options"] | {"normalizer": "NFKC"}, "options.normalizer"),
                              (entry["options"] | {"use_regex": "true"}, "options.use_regex"),
                              (entry["options"] | {"lowercase": True}, "options.lowercase unknown")):
        with pytest.raises(EdgeM3Error, match=expected):
            TokenizerSpec.from_manifest(entry | {"options": options})
    wrong = TokenizerSpec.from_manifest(entry | {"special_ids": dict(entry["special_ids"], mask=5)})
    with pytest.raises(EdgeM3Error, match="special token mask"):
        ByteLevelBPETokenizer(tmp_path / BPE_FILE, wrong)
    with pytest.raises(EdgeM3Error, match="vocab_map must be null"):
        trimmed = TokenizerSpec.from_manifest(entry | {"vocab_map": {"file": "x"}})
        ByteLevelBPETokenizer(tmp_path / BPE_FILE, trimmed)


# The generated tables are checked with every generator's: tests/test_generated.py.

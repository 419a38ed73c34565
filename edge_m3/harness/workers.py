"""The harness's child processes: the device pipeline under one runtime, the references
(FlagEmbedding, the Keras fp32 model) and the bench cells, each `python -m
edge_m3.harness.workers STEP JOB.json` (edge_m3.common.proc: why children, the wire format).

Results travel as files the job names (`out`): per-text outputs as `<out>.npz` + `<out>.json`
(save_outputs), a bench cell's figures as `<out>` (JSON).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.common.proc import Job, job_main, peak_rss, reset_peak_rss, rss_now, run_jobs
from edge_m3.errors import EdgeM3Error
from edge_m3.runtime.registry import RUNTIMES, Runtime, WeightCache
from edge_m3.spec import (
    ATTENTION_MASK,
    COLBERT_VECS,
    DENSE_VECS,
    INPUT_IDS,
    LEXICAL_WEIGHTS,
    RSS_ALLOWANCE,
    choose_length,
)

MODULE = "edge_m3.harness.workers"


def worker(step: str, job: Mapping[str, Any], what: str) -> Job:
    """One job for a harness child: `step` (a key of STEPS) on `job`; `what` names it in errors.

    Runtimes and weight caches travel as `runtime_job` and `WeightCache.to_json` spell them."""
    return Job(MODULE, step, dict(job), what)


def runtime_job(runtime: Runtime, weight_cache: WeightCache | None = None) -> dict[str, Any]:
    """How a job names its runtime and weight cache."""
    return {"runtime": runtime.name,
            "weight_cache": None if weight_cache is None else weight_cache.to_json()}


def _runtime(job: Mapping[str, Any]) -> tuple[Runtime, WeightCache | None]:
    cache = job.get("weight_cache")
    return RUNTIMES[job["runtime"]], None if cache is None else WeightCache.from_json(cache)


def run_workers(jobs: Sequence[Job], parallel: bool = False) -> list[str | None]:
    """Run each job in a child; None per success, else one line why.

    `parallel` starts them together (only for jobs whose timings do not matter).
    """
    return [d.error for d in run_jobs(jobs, parallel)]


def run_worker(job: Job) -> None:
    """One child that must succeed: its failure is a one-line user-facing error."""
    error = run_workers([job])[0]
    if error:
        raise EdgeM3Error(error)


def save_outputs(path: Path, outs: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> None:
    """Per-text outputs as `<path>.npz` (vectors) + `<path>.json` (ids, lexical weights, meta)."""
    arrays = {}
    for i, o in enumerate(outs):
        if DENSE_VECS in o:
            arrays[f"d{i}"] = np.asarray(o[DENSE_VECS], np.float32)
        if COLBERT_VECS in o:
            arrays[f"c{i}"] = np.asarray(o[COLBERT_VECS], np.float32)
    np.savez(path.with_suffix(".npz"), **arrays)
    texts = []
    for o in outs:
        t: dict[str, Any] = {"input_ids": [int(x) for x in o["input_ids"]]}
        if "signature" in o:
            t["signature"] = o["signature"]
        if LEXICAL_WEIGHTS in o:
            t[LEXICAL_WEIGHTS] = {str(k): float(v) for k, v in o[LEXICAL_WEIGHTS].items()}
        texts.append(t)
    path.with_suffix(".json").write_text(json.dumps({**meta, "texts": texts}))


def load_outputs(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """What `save_outputs` wrote: the per-text outputs and the meta data."""
    meta = json.loads(path.with_suffix(".json").read_text())
    outs = []
    with np.load(path.with_suffix(".npz")) as z:
        for i, t in enumerate(meta.pop("texts")):
            o = dict(t)
            for key, name in (("d", DENSE_VECS), ("c", COLBERT_VECS)):
                if f"{key}{i}" in z:
                    o[name] = z[f"{key}{i}"]
            outs.append(o)
    return outs, meta


def synthetic_inputs(n: int, rows: int, bos: int, eos: int) -> tuple[np.ndarray, np.ndarray]:
    """Exactly n real tokens: `<s>`, n-2 ordinary ids below `rows`, `</s>` (no padding)."""
    rng = np.random.default_rng(n)
    ids = np.concatenate([[bos], rng.integers(5, max(6, min(rows, 30000)), n - 2), [eos]])
    ids = ids.astype(np.int32)[None]
    return ids, np.ones_like(ids)


def describe_cache(weight_cache: WeightCache | None) -> str:
    """What held the packed weights, as reports name it: off, memory, file (or the cache file's
    path when it was never written), none (a runtime without the option)."""
    if weight_cache is None:
        return "none"
    if weight_cache.path is not None:
        return "file" if weight_cache.path.is_file() else str(weight_cache.path)
    return weight_cache.kind


def model_memory(rss0: int, model_bytes: int, weight_cache: WeightCache | None,
                 reset: bool) -> dict[str, Any]:
    """The model's memory: the process's peak RSS since just before the model was opened,
    over the RSS then (imports and tokenizer excluded), and its ratio to the model file (the
    runtime's fixed RSS_ALLOWANCE left out: edge_m3.spec)."""
    peak = peak_rss()
    over = max(peak - rss0, 0)
    ratio = max(over - RSS_ALLOWANCE, 0) / model_bytes if model_bytes else None
    path = weight_cache.path if weight_cache is not None else None
    on_disk = path is not None and path.is_file()
    return {"peak_rss": peak, "rss_before_load": rss0, "peak_reset": reset,
            "model_peak_rss": over, "model_bytes": model_bytes,
            "model_rss_ratio": ratio,
            "weight_cache": describe_cache(weight_cache),
            "weight_cache_bytes": path.stat().st_size if path is not None and on_disk else None}


def _worker_bundle(job: dict[str, Any]) -> None:
    """The device pipeline under one runtime (job: bundle, runtime, weight_cache, threads, texts,
    out): outputs, load time, latency, the model's memory."""
    from edge_m3.bundle import load_bundle
    from edge_m3.runtime.pipeline import DevicePipeline
    from edge_m3.runtime.runners import import_runtime

    runtime, weight_cache = _runtime(job)
    threads, texts, out = int(job["threads"]), list(job["texts"]), Path(job["out"])
    bundle = load_bundle(Path(job["bundle"]), verify=False)  # the parent checked every hash
    import_s = import_runtime(runtime)
    pipe = DevicePipeline(bundle, runtime, threads, weight_cache=weight_cache, open_model=False)
    rss0, reset = rss_now(), reset_peak_rss()  # the app's tokenizer is not the model's memory
    t0 = time.perf_counter()
    pipe.open()
    load_s = time.perf_counter() - t0
    tok = bundle.manifest.tokenizer
    first = {}
    for n in pipe.lengths:  # warm-up, every signature once: XNNPACK packs on first use
        t1 = time.perf_counter()
        pipe.runner.run(*synthetic_inputs(n, tok.model_rows, pipe.tokenizer.bos, pipe.tokenizer.eos))
        first[str(n)] = time.perf_counter() - t1
    # now, before the outputs the harness keeps for the texts below count as the model's
    memory = model_memory(rss0, bundle.manifest.model_bytes(pipe.entry),
                          pipe.runner.weight_cache, reset)
    outs, latency = [], {}
    for text in texts:  # the whole device step: tokenize, run, post-process
        t1 = time.perf_counter()
        res = pipe.embed(text)
        latency.setdefault(str(res["seq_len"]), []).append(time.perf_counter() - t1)
        outs.append(res)
    save_outputs(out, outs, {"load_s": load_s, "import_s": import_s,
                             "warmup_s": sum(first.values()), "first_call": first,
                             "latency": latency, **memory, "runtime": runtime.name,
                             "version": runtime.version(), "file": pipe.entry.file})


def _worker_flag(job: dict[str, Any]) -> None:
    """FlagEmbedding's BGEM3FlagModel itself (torch fp32, CPU): the primary reference (job:
    checkpoint, texts, max_length, out, pairs).

    With `pairs` (query and passage text indexes) it also scores them with FlagEmbedding's own
    `colbert_score` and `compute_lexical_matching_score`, so the harness's formulas are checked
    against FlagEmbedding's on every run.
    """
    from importlib import metadata

    checkpoint_dir, texts, max_length = job["checkpoint"], list(job["texts"]), int(job["max_length"])
    out, pairs = Path(job["out"]), job.get("pairs")

    from edge_m3.harness.flagref import import_flag_model

    BGEM3FlagModel = import_flag_model()  # noqa: N806 (a class)
    t0 = time.perf_counter()
    model = BGEM3FlagModel(checkpoint_dir, use_fp16=False, devices="cpu")
    load_s = time.perf_counter() - t0
    res = model.encode(texts, batch_size=16, max_length=max_length, return_dense=True,
                       return_sparse=True, return_colbert_vecs=True)
    ids = [model.tokenizer(t, truncation=True, max_length=max_length)["input_ids"] for t in texts]
    outs = [{"input_ids": ids[i], DENSE_VECS: res[DENSE_VECS][i],
             LEXICAL_WEIGHTS: dict(res[LEXICAL_WEIGHTS][i]),
             COLBERT_VECS: res[COLBERT_VECS][i]} for i in range(len(texts))]
    scores = None
    if pairs:
        qs, ps = pairs["queries"], pairs["passages"]
        lw, cv = res[LEXICAL_WEIGHTS], res[COLBERT_VECS]
        scores = {"sparse": [[float(model.compute_lexical_matching_score(lw[q], lw[p])) for p in ps]
                             for q in qs],
                  "colbert": [[float(model.colbert_score(cv[q], cv[p])) for p in ps] for q in qs]}
    save_outputs(out, outs, {"load_s": load_s, "peak_rss": peak_rss(), "scores": scores,
                             "runtime": "FlagEmbedding BGEM3FlagModel (torch fp32, CPU)",
                             "version": metadata.version("FlagEmbedding")})


def _worker_st(job: dict[str, Any]) -> None:
    """sentence-transformers' SentenceTransformer.encode (torch fp32, CPU): the primary
    reference of a sentence-transformers checkpoint (job: checkpoint, texts, max_length, out).
    Its own pipeline: the checkpoint's tokenizer (truncation at max_length, keeping [SEP]),
    Transformer, Pooling and Normalize modules."""
    from importlib import metadata

    from edge_m3.harness.flagref import import_sentence_transformer

    checkpoint_dir, texts, max_length = job["checkpoint"], list(job["texts"]), int(job["max_length"])
    out = Path(job["out"])
    SentenceTransformer = import_sentence_transformer()  # noqa: N806 (a class)
    t0 = time.perf_counter()
    model = SentenceTransformer(checkpoint_dir, device="cpu", local_files_only=True)
    model.max_seq_length = max_length
    load_s = time.perf_counter() - t0
    dense = model.encode(texts, batch_size=16, convert_to_numpy=True, show_progress_bar=False)
    ids = [model.tokenizer(t, truncation=True, max_length=max_length)["input_ids"] for t in texts]
    outs = [{"input_ids": ids[i], DENSE_VECS: np.asarray(dense[i], np.float32)} for i in range(len(texts))]
    save_outputs(out, outs, {"load_s": load_s, "peak_rss": peak_rss(), "scores": None,
                             "runtime": "sentence-transformers SentenceTransformer (torch fp32, CPU)",
                             "version": metadata.version("sentence-transformers")})


def _worker_hf(job: dict[str, Any]) -> None:
    """transformers' AutoModel (torch fp32, CPU, eager attention) for a plain transformers
    snapshot: the last hidden state of each unpadded text, pooled as config.json's
    `classifier_pooling` says (job: checkpoint, texts, max_length, out)."""
    from importlib import metadata

    import torch
    from transformers import AutoModel, AutoTokenizer

    from edge_m3.checkpoint import ModelConfig

    checkpoint_dir, texts, max_length = job["checkpoint"], list(job["texts"]), int(job["max_length"])
    out = Path(job["out"])
    mode = ModelConfig.from_json(Path(checkpoint_dir) / "config.json").extra["classifier_pooling"]
    t0 = time.perf_counter()
    model = AutoModel.from_pretrained(checkpoint_dir, attn_implementation="eager").float().eval()
    tokenizer = AutoTokenizer.from_pretrained(checkpoint_dir)
    load_s = time.perf_counter() - t0
    outs = []
    with torch.inference_mode():
        for text in texts:
            ids = tokenizer(text, truncation=True, max_length=max_length)["input_ids"]
            hidden = model(input_ids=torch.tensor([ids])).last_hidden_state[0]
            dense = hidden[0] if mode == "cls" else hidden.mean(0)
            outs.append({"input_ids": ids, DENSE_VECS: dense.numpy().astype(np.float32)})
    save_outputs(out, outs, {"load_s": load_s, "peak_rss": peak_rss(), "scores": None,
                             "runtime": f"transformers AutoModel, {mode} pooling (torch fp32, CPU)",
                             "version": metadata.version("transformers")})


def _worker_keras(job: dict[str, Any]) -> None:
    """The fp32 Keras model the bundle was converted from, one unpadded text at a time (job:
    checkpoint, texts, max_length, out)."""
    from edge_m3 import __version__
    from edge_m3.checkpoint import load_checkpoint
    from edge_m3.modeling import build_model
    from edge_m3.runtime.postprocess import postprocess
    from edge_m3.tokenizer import checkpoint_tokenizer

    checkpoint_dir, texts, max_length = job["checkpoint"], list(job["texts"]), int(job["max_length"])
    out = Path(job["out"])
    t0 = time.perf_counter()
    ckpt = load_checkpoint(checkpoint_dir)
    model, tok = build_model(ckpt), checkpoint_tokenizer(ckpt)
    load_s = time.perf_counter() - t0
    outs = []
    for text in texts:
        ids = tok.encode(text, max_length)
        arr = np.asarray([ids], np.int32)
        raw = {k: v.numpy() for k, v in model(arr, np.ones_like(arr), hidden=False).items()}
        outs.append({"input_ids": ids, **postprocess(raw, ids, tok.spec.special_ids)})
    save_outputs(out, outs, {"load_s": load_s, "peak_rss": peak_rss(),
                             "runtime": "edge-m3 Keras model (TF fp32, CPU)", "version": __version__})


def _timed_repeats(step: Any, warmup: int, repeats: int) -> tuple[float, list[float]]:
    """(the very first call, the timed calls after `warmup` untimed ones).

    The first call is what an app's first query pays (XNNPACK packs weights on first use).
    """
    times = []
    for _ in range(warmup + repeats):
        t1 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t1)
    return times[0], times[warmup:]


def time_lengths(runner: Any, seq_lens: Sequence[int], tok: Any, lengths: Sequence[int],
                 warmup: int, repeats: int) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Per length n: the first call and the timed calls on n real tokens, padded to the
    signature the device pipeline would pick (`tok`: the manifest's TokenizerSpec)."""
    latency, first = {}, {}
    for n in lengths:
        ids, mask = padded_inputs(n, seq_lens, tok)
        first[str(n)], latency[str(n)] = _timed_repeats(lambda i=ids, m=mask: runner.run(i, m),
                                                        warmup, repeats)
    return first, latency


def padded_inputs(n: int, seq_lens: Sequence[int], tok: Any) -> tuple[np.ndarray, np.ndarray]:
    """n real tokens, padded to the signature the device pipeline would pick."""
    from edge_m3.tokenizer import pad_ids

    special = tok.special_ids
    real = synthetic_inputs(n, tok.model_rows, special["bos"], special["eos"])[0][0]
    ids, mask = pad_ids(real, choose_length(n, seq_lens), special["pad"])
    return ids[None], mask[None]


def _worker_bench(job: dict[str, Any]) -> None:
    """Raw signature latency (exactly L tokens), first-run cost and the model's memory under
    one runtime, thread count and weight cache (job: bundle, runtime, weight_cache, threads,
    lengths, warmup, repeats, out)."""
    from edge_m3.bundle import load_bundle
    from edge_m3.runtime.runners import import_runtime, open_runner

    runtime, weight_cache = _runtime(job)
    threads, lengths = int(job["threads"]), [int(n) for n in job["lengths"]]
    warmup, repeats, out = int(job["warmup"]), int(job["repeats"]), Path(job["out"])
    bundle = load_bundle(Path(job["bundle"]), verify=False)
    entry = bundle.model_entry(runtime.format)
    import_s = import_runtime(runtime)
    rss0, reset = rss_now(), reset_peak_rss()
    t0 = time.perf_counter()
    runner = open_runner(bundle.path / entry.file, entry.signatures, runtime, threads,
                         weight_cache)
    load_s = time.perf_counter() - t0
    tok = bundle.manifest.tokenizer
    first = {}  # the first result of every signature, shortest first (as an app's queries come)
    for n in entry.seq_lens:
        ids, mask = padded_inputs(n, entry.seq_lens, tok)
        t1 = time.perf_counter()
        runner.run(ids, mask)
        first[str(n)] = time.perf_counter() - t1
    latency = time_lengths(runner, entry.seq_lens, tok, lengths, warmup, repeats)[1]
    memory = model_memory(rss0, bundle.manifest.model_bytes(entry), runner.weight_cache, reset)
    out.write_text(json.dumps({"load_s": load_s, "import_s": import_s, "latency": latency,
                               "first_call": first, **memory,
                               "version": runtime.version()}))


def _worker_check(job: dict[str, Any]) -> None:
    """`edge-m3 check` on the device: every signature timed cold and warm (exactly L tokens),
    then golden.json's texts through the whole device step; load time and peak RSS (job:
    bundle, runtime, weight_cache, threads, warmup, repeats, out)."""
    from edge_m3.bundle import load_bundle
    from edge_m3.runtime.pipeline import DevicePipeline
    from edge_m3.runtime.runners import import_runtime
    from edge_m3.spec import GOLDEN

    runtime, weight_cache = _runtime(job)
    threads, warmup, repeats = int(job["threads"]), int(job["warmup"]), int(job["repeats"])
    out = Path(job["out"])
    bundle = load_bundle(Path(job["bundle"]), verify=False)  # the parent checked every hash
    cases = json.loads((bundle.path / GOLDEN).read_text("utf-8"))["cases"]
    import_s = import_runtime(runtime)
    rss0 = rss_now()
    t0 = time.perf_counter()
    pipe = DevicePipeline(bundle, runtime, threads, fmt=runtime.format, weight_cache=weight_cache)
    load_s = time.perf_counter() - t0
    # Timed first, so that first_call is an app's real first query of each signature.
    first, latency = time_lengths(pipe.runner, pipe.lengths, pipe.spec, pipe.lengths, warmup,
                                  repeats)
    outs = [pipe.embed(case["text"]) for case in cases]
    save_outputs(out, outs, {"load_s": load_s, "import_s": import_s, "latency": latency,
                             "first_call": first, "peak_rss": peak_rss(), "rss_before_load": rss0,
                             "runtime": runtime.name, "version": runtime.version(),
                             "file": pipe.entry.file})


def _worker_bench_torch(job: dict[str, Any]) -> None:
    """The reference's forward pass (FlagEmbedding's or sentence-transformers', torch fp32,
    by the checkpoint's output layout) on the same n tokens, unpadded (a batch of one is never
    padded by either; job: checkpoint, threads, lengths, warmup, repeats, out)."""
    from importlib import metadata

    import torch

    from edge_m3.checkpoint.loader import checkpoint_outputs

    checkpoint_dir, threads = job["checkpoint"], int(job["threads"])
    lengths, warmup, repeats = [int(n) for n in job["lengths"]], int(job["warmup"]), int(job["repeats"])
    out = Path(job["out"])

    from edge_m3.harness.flagref import import_flag_model, import_sentence_transformer

    torch.set_num_threads(threads)
    flagembedding = checkpoint_outputs(Path(checkpoint_dir)).reference == "flagembedding"
    rss0 = rss_now()
    t0 = time.perf_counter()
    if flagembedding:
        flag = import_flag_model()(checkpoint_dir, use_fp16=False, devices="cpu")
        model, tokenizer = flag.model.float().eval(), flag.tokenizer
        rows, dist = int(model.model.config.vocab_size), "FlagEmbedding"

        def forward(batch: dict[str, Any]) -> Any:
            return model(batch, return_dense=True, return_sparse=True, return_colbert_vecs=True)
    else:
        model = import_sentence_transformer()(checkpoint_dir, device="cpu", local_files_only=True).eval()
        tokenizer, dist = model.tokenizer, "sentence-transformers"
        rows = int(model[0].auto_model.config.vocab_size)

        def forward(batch: dict[str, Any]) -> Any:
            return model(dict(batch))["sentence_embedding"]
    load_s = time.perf_counter() - t0
    bos = int(tokenizer.cls_token_id if tokenizer.bos_token_id is None else tokenizer.bos_token_id)
    eos = int(tokenizer.sep_token_id if tokenizer.eos_token_id is None else tokenizer.eos_token_id)
    latency, first = {}, {}
    with torch.inference_mode():
        for n in lengths:
            ids, mask = synthetic_inputs(n, rows, bos, eos)
            batch = {INPUT_IDS: torch.from_numpy(ids).long(),
                     ATTENTION_MASK: torch.from_numpy(mask).long()}
            first[str(n)], latency[str(n)] = _timed_repeats(lambda b=batch: forward(b), warmup, repeats)
    out.write_text(json.dumps({"load_s": load_s, "latency": latency, "first_call": first,
                               "peak_rss": peak_rss(), "rss_before_load": rss0, "reference": dist,
                               "version": f"torch {torch.__version__}, {dist} {metadata.version(dist)}"}))


STEPS = {"bundle": _worker_bundle, "flag": _worker_flag, "st": _worker_st, "hf": _worker_hf,
         "keras": _worker_keras,
         "bench": _worker_bench, "check": _worker_check, "bench-torch": _worker_bench_torch}


if __name__ == "__main__":
    job_main(STEPS)

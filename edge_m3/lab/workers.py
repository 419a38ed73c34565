"""The lab's child processes: the references (FlagEmbedding, sentence-transformers,
transformers, the Keras fp32 model) over `verify`'s texts, and the reference's forward pass timed
for `bench --reference`, each `python -m edge_m3.lab.workers STEP JOB.json` (edge_m3.common.proc).

The jobs, result files and helpers are the device package's (edge_m3.device.workers): one wire
format, read the same way by both.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from edge_m3.common.proc import job_main, peak_rss, rss_now
from edge_m3.device.workers import (
    TorchBenchJob,
    WireJob,
    receive,
    save_outputs,
    synthetic_inputs,
    timed_repeats,
)
from edge_m3.spec import ATTENTION_MASK, COLBERT_VECS, DENSE_VECS, INPUT_IDS, LEXICAL_WEIGHTS

MODULE = "edge_m3.lab.workers"


@dataclass(frozen=True)
class ReferenceJob(WireJob):
    """Steps `flag`, `st`, `hf` and `keras`: a reference over `texts` (truncated at
    `max_length` tokens), outputs to `out` (save_outputs). `pairs` (query and passage text
    indexes, `flag` only) are scored by FlagEmbedding's own functions too."""

    module: ClassVar[str] = MODULE
    checkpoint: str
    texts: list[str]
    max_length: int
    out: str
    pairs: dict[str, list[int]] | None = None


def _worker_flag(job: ReferenceJob) -> None:
    """FlagEmbedding's BGEM3FlagModel itself (torch fp32, CPU): the primary reference.

    With `pairs` (query and passage text indexes) it also scores them with FlagEmbedding's own
    `colbert_score` and `compute_lexical_matching_score`, so the lab's formulas (lab.metrics)
    are checked against FlagEmbedding's on every run.
    """
    from importlib import metadata

    checkpoint_dir, texts, max_length = job.checkpoint, job.texts, job.max_length
    out, pairs = Path(job.out), job.pairs

    from edge_m3.lab.flagref import import_flag_model

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


def _worker_st(job: ReferenceJob) -> None:
    """sentence-transformers' SentenceTransformer.encode (torch fp32, CPU): the primary
    reference of a sentence-transformers checkpoint.
    Its own pipeline: the checkpoint's tokenizer (truncation at max_length, keeping [SEP]),
    Transformer, Pooling and Normalize modules."""
    from importlib import metadata

    from edge_m3.lab.flagref import import_sentence_transformer

    checkpoint_dir, texts, max_length = job.checkpoint, job.texts, job.max_length
    out = Path(job.out)
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


def _worker_hf(job: ReferenceJob) -> None:
    """transformers' AutoModel (torch fp32, CPU, eager attention) for a plain transformers
    snapshot: the last hidden state of each unpadded text, pooled as config.json's
    `classifier_pooling` says."""
    from importlib import metadata

    import torch
    from transformers import AutoModel, AutoTokenizer

    from edge_m3.checkpoint import ModelConfig

    checkpoint_dir, texts, max_length = job.checkpoint, job.texts, job.max_length
    out = Path(job.out)
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


def _worker_keras(job: ReferenceJob) -> None:
    """The fp32 Keras model the bundle was converted from, one unpadded text at a time."""
    from edge_m3 import __version__
    from edge_m3.checkpoint import load_checkpoint
    from edge_m3.modeling import build_model
    from edge_m3.runtime.postprocess import postprocess
    from edge_m3.tokenizer import checkpoint_tokenizer

    checkpoint_dir, texts, max_length = job.checkpoint, job.texts, job.max_length
    out = Path(job.out)
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


def _worker_bench_torch(job: TorchBenchJob) -> None:
    """The reference's forward pass (FlagEmbedding's or sentence-transformers', torch fp32,
    by the checkpoint's output layout) on the same n tokens, unpadded (a batch of one is never
    padded by either)."""
    from importlib import metadata

    import torch

    from edge_m3.checkpoint.loader import checkpoint_outputs

    checkpoint_dir, threads = job.checkpoint, job.threads
    lengths, warmup, repeats = job.lengths, job.warmup, job.repeats
    out = Path(job.out)

    from edge_m3.lab.flagref import import_flag_model, import_sentence_transformer

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
            first[str(n)], latency[str(n)] = timed_repeats(lambda b=batch: forward(b), warmup, repeats)
    out.write_text(json.dumps({"load_s": load_s, "latency": latency, "first_call": first,
                               "peak_rss": peak_rss(), "rss_before_load": rss0, "reference": dist,
                               "version": f"torch {torch.__version__}, {dist} {metadata.version(dist)}"}))



STEPS = {"flag": receive(ReferenceJob, _worker_flag), "st": receive(ReferenceJob, _worker_st),
         "hf": receive(ReferenceJob, _worker_hf), "keras": receive(ReferenceJob, _worker_keras),
         "bench-torch": receive(TorchBenchJob, _worker_bench_torch)}


if __name__ == "__main__":
    job_main(STEPS)

"""Batch throughput on a rig or desktop: `edge-m3 embed --texts` vs FlagEmbedding's `encode`.

    python -m tools.bench.bench_throughput BUNDLE CHECKPOINT [--texts 2000] [--threads 2] [--batch 32]

Both sides get the same texts (drawn, seeded, from edge_m3/data/corpus_multilingual.txt: one
to eight corpus lines joined, about 10 to 300 tokens) and compute all three outputs (dense,
sparse, ColBERT) with the same thread count, one after the other in this run, each in its own
process: the bundle through the `edge-m3 embed --out X.jsonl` command a user runs (since issue
27 a bulk job: each text at the smallest fixed length that holds it, LiteRT, in lanes of one
thread; tools/bench/bench_bulk.py times the Parquet path and whole commands), FlagEmbedding's
`BGEM3FlagModel.encode` (torch fp32, batches of --batch, sorted by length and padded to the
longest, as it does).
Model load is excluded on both sides; texts/s is texts over the encoding wall time. A third
row times the device step alone (tokenize, run, post-process; `DevicePipeline.embed`, no JSON),
also in its own process: `embed` writes every ColBERT vector as JSON text, which costs more
than the model on short texts. `--results docs/results/throughput.json` also writes the table for
docs/benchmarks.md (tools/bench/results.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

from tools.bench.results import Load, add_option, write_result


def make_texts(n: int, seed: int = 0) -> list[str]:
    corpus = resources.files("edge_m3").joinpath("data/corpus_multilingual.txt").read_text("utf-8")
    lines = [ln.strip() for ln in corpus.split("\n") if ln.strip() and len(ln) < 400]
    rng = random.Random(seed)
    return [" ".join(rng.choice(lines) for _ in range(rng.randint(1, 8))) for _ in range(n)]


def _flag_child(checkpoint: str, texts_file: str, threads: int, batch: int, max_length: int) -> None:
    """FlagEmbedding in this (child) process: prints {"seconds", "version"} as JSON."""
    import torch

    torch.set_num_threads(threads)
    from importlib import metadata

    from FlagEmbedding import BGEM3FlagModel

    texts = Path(texts_file).read_text("utf-8").split("\n")[:-1]
    model = BGEM3FlagModel(checkpoint, use_fp16=False, devices="cpu")
    model.encode(texts[:batch], batch_size=batch, max_length=max_length, return_dense=True,
                 return_sparse=True, return_colbert_vecs=True)  # warm-up
    t0 = time.perf_counter()
    model.encode(texts, batch_size=batch, max_length=max_length, return_dense=True,
                 return_sparse=True, return_colbert_vecs=True)
    print(json.dumps({"seconds": time.perf_counter() - t0,
                      "version": f"torch {torch.__version__}, FlagEmbedding "
                                 f"{metadata.version('FlagEmbedding')}"}))


def _pipeline_child(bundle: str, texts_file: str, runtime: str, threads: int) -> None:
    """The device step alone in this (child) process: prints {"seconds"} as JSON."""
    from edge_m3.bundle import load_bundle
    from edge_m3.runtime import RUNTIMES
    from edge_m3.runtime.pipeline import DevicePipeline

    texts = Path(texts_file).read_text("utf-8").split("\n")[:-1]
    pipe = DevicePipeline(load_bundle(Path(bundle)), RUNTIMES[runtime], threads)
    t0 = time.perf_counter()
    for text in texts:
        pipe.embed(text)
    print(json.dumps({"seconds": time.perf_counter() - t0}))


def _child(args: list[str], what: str, env: dict[str, str]) -> dict:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{what} failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle", type=Path)
    ap.add_argument("checkpoint", help="the BGE-M3-layout checkpoint the bundle was built from")
    ap.add_argument("--texts", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32, help="FlagEmbedding's batch size")
    ap.add_argument("--runtime", default="litert")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    add_option(ap, "throughput.json")
    a = ap.parse_args(argv)
    load = Load()
    from rich.console import Console
    from rich.table import Table

    from edge_m3.bundle import load_bundle

    max_length = load_bundle(a.bundle).manifest.max_length
    texts = make_texts(a.texts)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TOKENIZERS_PARALLELISM": "false"}
    with tempfile.TemporaryDirectory(prefix="edge-m3-throughput-") as tmp:
        tf = Path(tmp) / "texts.txt"
        tf.write_text("".join(t + "\n" for t in texts), "utf-8")
        done = subprocess.run([sys.executable, "-m", "edge_m3.cli", "embed", str(a.bundle), "--texts",
                               str(tf), "--runtime", a.runtime, "--threads", str(a.threads), "--out",
                               str(Path(tmp) / "out.jsonl")], capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise SystemExit(f"edge-m3 embed failed: {done.stderr.strip()[-500:]}")
        m = re.search(r"(\d+) text\(s\) (?:embedded )?in ([\d.]+) s: ([\d.]+) texts/s", done.stderr)
        assert m, done.stderr
        ours = {"seconds": float(m.group(2)), "rate": float(m.group(3))}
        step = _child(["--pipeline-child", str(a.bundle), str(tf), a.runtime, str(a.threads)],
                      "device step", env)
        step["rate"] = len(texts) / step["seconds"]
        ref = _child(["--flag-child", a.checkpoint, str(tf), str(a.threads), str(a.batch),
                      str(max_length)], "FlagEmbedding", env)
        ref["rate"] = len(texts) / ref["seconds"]
    manifest = load_bundle(a.bundle).manifest
    title = f"{len(texts):,} texts, {a.threads} threads, dense + sparse + ColBERT; model load excluded"
    table = Table(title=title)
    columns = ("side", "what", "seconds", "texts/s", "vs FlagEmbedding")
    for col in columns:
        table.add_column(col, justify="left" if col in ("side", "what") else "right")
    rows = [["edge-m3 embed", f"{a.bundle.name} ({manifest.quant}, {a.runtime}, bulk job to JSON lines)",
             f"{ours['seconds']:.1f}", f"{ours['rate']:.1f}", f"{ours['rate'] / ref['rate']:.2f}x"],
            ["edge-m3 device step", "the same, without writing JSON", f"{step['seconds']:.1f}",
             f"{step['rate']:.1f}", f"{step['rate'] / ref['rate']:.2f}x"],
            ["FlagEmbedding encode", f"{ref['version']}, fp32, batch {a.batch}",
             f"{ref['seconds']:.1f}", f"{ref['rate']:.1f}", "1.00x"]]
    for row in rows:
        table.add_row(*row)
    Console(width=140).print(table)
    if a.results:
        write_result(a.results, title=f"`embed` to JSON lines and the device step, {title}",
                     module="tools.bench.bench_throughput", argv=argv, columns=columns, rows=rows, load=load)
    if a.json:
        a.json.write_text(json.dumps({"texts": len(texts), "threads": a.threads, "batch": a.batch,
                                      "edge_m3": ours, "device_step": step,
                                      "flagembedding": ref}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--flag-child":
        _flag_child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--pipeline-child":
        _pipeline_child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        raise SystemExit(main())

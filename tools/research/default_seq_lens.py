"""DEFAULT_SEQ_LENS (edge_m3/builder/options.py): which signature lengths serve a realistic mix of
queries and passages best.

    python -m tools.research.default_seq_lens demo/e5-small-bge-m3-layout --quant int8 \
        --sets 32,128,512 16,32,64,128,256,512 --out /tmp/buckets \
        [--results docs/results/speed_buckets.json]

Per bucket set: one `edge-m3 build` (wall time, file size), then the device pipeline under
LiteRT (tokenize, pick the smallest signature that holds the text, run, post-process) over the
same mix of texts, in a process of its own: mean device-step time for queries and passages,
the share of padded tokens, the model's peak RSS (x file) and the first call per signature.

The mix is seeded and built from the package's own texts: queries are the retrieval set's
queries plus corpus lines of 8 to 40 tokens; passages are consecutive corpus lines joined
until a target length drawn log-uniformly from 60 to 500 tokens.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.spec import choose_length
from tools.bench import results
from tools.bench.bench_build import run_build  # one way to time a build


def make_mix(sp_path: Path, n_queries: int, n_passages: int, seed: int = 0) -> dict[str, list[str]]:
    """Queries of 8-40 tokens and passages of 60-500 tokens (see the module docstring)."""
    from importlib import resources

    from edge_m3.harness.inputs import retrieval_set
    from edge_m3.tokenizer import Tokenizer

    tok = Tokenizer(sp_path)
    rng = np.random.default_rng(seed)
    lines = [ln.strip() for ln in resources.files("edge_m3").joinpath("data/corpus_multilingual.txt")
             .read_text("utf-8").splitlines() if ln.strip()]
    count = [len(tok.encode(ln, 100_000)) - 2 for ln in lines]  # without <s> and </s>
    queries = [q["text"] for q in retrieval_set()["queries"]]
    short = [ln for ln, n in zip(lines, count, strict=True) if 8 <= n + 2 <= 40]
    queries += [short[i] for i in rng.permutation(len(short))[: max(n_queries - len(queries), 0)]]
    passages = []
    usable = [i for i, n in enumerate(count) if n <= 120]
    while len(passages) < n_passages:
        target = math.exp(rng.uniform(math.log(60), math.log(500)))
        start = int(rng.choice(usable))
        parts, total = [], 2
        for i in range(start, len(lines)):
            if count[i] > 120:
                continue
            parts.append(lines[i])
            total += count[i]
            if total >= target:
                break
        if total >= 60:
            passages.append(" ".join(parts))
    return {"queries": queries[:n_queries], "passages": passages}


def run_mix(bundle: Path, texts: list[str], threads: int, tmp: Path) -> dict[str, Any]:
    """The device pipeline over `texts` under LiteRT in a child (harness worker `bundle`)."""
    from edge_m3.harness.workers import load_outputs, run_worker, runtime_job, worker
    from edge_m3.runtime import RUNTIMES

    out = tmp / "mix"
    run_worker(worker("bundle", {"bundle": str(bundle), **runtime_job(RUNTIMES["litert"]),
                                 "threads": threads, "texts": texts, "out": str(out)},
                      f"mix on {bundle.name}"))
    outs, meta = load_outputs(out)
    return {"outs": outs, **meta}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", type=Path)
    p.add_argument("--quant", default="int8")
    p.add_argument("--sets", nargs="+", default=["32,128,512", "16,32,64,128,256,512"],
                   help="bucket sets, each a comma list of signature lengths")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--queries", type=int, default=120)
    p.add_argument("--passages", type=int, default=60)
    p.add_argument("--rounds", type=int, default=3, help="the mix this many times over")
    p.add_argument("--out", type=Path, default=None, help="keep bundles here (default: temp)")
    p.add_argument("--json", type=Path, default=None)
    results.add_option(p, "speed_buckets.json")
    a = p.parse_args()
    load = results.Load()
    mix = make_mix(a.checkpoint / "sentencepiece.bpe.model", a.queries, a.passages)
    texts = mix["queries"] + mix["passages"]
    nq = len(mix["queries"])
    rows = []
    with tempfile.TemporaryDirectory() as tmp_s:
        root = a.out or Path(tmp_s)
        for lengths in a.sets:
            lens = sorted(int(x) for x in lengths.split(","))
            out = root / f"buckets-{'-'.join(map(str, lens))}"
            if (out / "manifest.json").is_file():
                build = {"wall": float("nan")}  # reused
            else:
                build = run_build(a.checkpoint, a.quant, out, ["--seq-lens", ",".join(map(str, lens))])
            manifest = json.loads((out / "manifest.json").read_text())
            entry = next(m for m in manifest["models"] if m["format"] == "tflite")
            size = manifest["files"][entry["file"]]["size"]
            res = run_mix(out, texts * a.rounds, a.threads, Path(tmp_s))
            per_text = [v for n in sorted(res["latency"], key=int) for v in res["latency"][n]]
            # latency is grouped by length in the worker; rebuild per text from the ids
            ids = [o["input_ids"] for o in res["outs"]]
            padded = [choose_length(len(i), lens) for i in ids]
            by_len: dict[str, list[float]] = {n: list(v) for n, v in res["latency"].items()}
            times = []
            for length in padded:  # the worker appended each length's times in text order
                times.append(by_len[str(length)].pop(0))
            t = np.asarray(times).reshape(a.rounds, -1).mean(axis=0)
            real = np.asarray([len(i) for i in ids[: len(texts)]])
            pad = np.asarray(padded[: len(texts)])
            rows.append({
                "lengths": lens, "build_s": build["wall"], "file_mb": size / 1e6,
                "query_ms": 1e3 * float(t[:nq].mean()), "passage_ms": 1e3 * float(t[nq:].mean()),
                "query_p95_ms": 1e3 * float(np.percentile(t[:nq], 95)),
                "mix_s": float(t.sum()),
                "query_padding": float(1 - real[:nq].sum() / pad[:nq].sum()),
                "passage_padding": float(1 - real[nq:].sum() / pad[nq:].sum()),
                "model_peak_rss_mb": res["model_peak_rss"] / 1e6,
                "model_rss_ratio": res["model_rss_ratio"],
                "first_call_ms": {n: 1e3 * v for n, v in res["first_call"].items()},
                "texts": len(per_text)})
    q_tokens = [len(x) for x in ids[:nq]]
    mix_line = (f"mix: {nq} queries ({min(q_tokens)}-{max(q_tokens)} tokens), "
                f"{len(texts) - nq} passages; {a.rounds} rounds; LiteRT, {a.threads} threads")
    head = ["buckets", "build s", "file MB", "query ms (p95)", "passage ms", "mix s",
            "padding q / p", "model RSS MB (x file)", "first call per signature ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        first = ", ".join(f"{n}: {v:.0f}" for n, v in r["first_call_ms"].items())
        lines.append(f"| {','.join(map(str, r['lengths']))} | {r['build_s']:.0f} | {r['file_mb']:.1f} | "
                     f"{r['query_ms']:.1f} ({r['query_p95_ms']:.1f}) | {r['passage_ms']:.1f} | "
                     f"{r['mix_s']:.2f} | {r['query_padding']:.0%} / {r['passage_padding']:.0%} | "
                     f"{r['model_peak_rss_mb']:.0f} ({r['model_rss_ratio']:.2f}x) | {first} |")
    print(mix_line, *lines, sep="\n")
    if a.results:
        columns, table = results.markdown_table(lines)
        results.write_result(a.results, title="Signature lengths: per-text cost of a query and passage mix",
                             module="tools.research.default_seq_lens", columns=columns, rows=table,
                             notes=[f"{a.checkpoint.name}, {a.quant}; {mix_line}; each text through the "
                                    "device pipeline at the smallest signature that holds it."], load=load)
    if a.json:
        a.json.write_text(json.dumps({"mix": {k: len(v) for k, v in mix.items()}, "rows": rows},
                                     indent=1))


if __name__ == "__main__":
    main()

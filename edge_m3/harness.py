"""`edge-m3 embed | verify | bench`, and the child processes they run.

Every runtime and every reference runs in a child process of its own
(`python -m edge_m3.harness WORKER ...`): that is how an app holds one runtime, it makes the
peak RSS of each an honest per-process figure, and tflite-runtime cannot share a process with
TensorFlow (its interpreter fails with std::bad_alloc once TF is loaded).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.errors import EdgeM3Error
from edge_m3.pipeline import choose_length
from edge_m3.textfile import read_lines
from edge_m3.tokenizer import pad_ids

# --------------------------------------------------------------------------- inputs


def read_texts(path: Path) -> list[str]:
    """`--texts`: one text per line, UTF-8 (see edge_m3.textfile)."""
    return read_lines(path, "--texts")


def retrieval_set() -> dict[str, Any]:
    """The built-in multilingual queries and passages (edge_m3/data/retrieval_set.json)."""
    return json.loads(resources.files("edge_m3").joinpath("data/retrieval_set.json")
                      .read_text("utf-8"))


def load_thresholds(path: Path | None, quant: str) -> tuple[dict[str, float], str]:
    """One variant's ship thresholds from one file (default: the packaged one), and its name."""
    from edge_m3.metrics import check_limits

    source = str(path) if path else "edge_m3/data/thresholds.json"
    try:
        if path is None:
            text = resources.files("edge_m3").joinpath("data/thresholds.json").read_text("utf-8")
        else:
            text = Path(path).read_text("utf-8")
        data = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise EdgeM3Error(f"--thresholds {source}: unreadable ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get(quant), dict):
        raise EdgeM3Error(f"--thresholds {source}: no entry for variant '{quant}'")
    return check_limits(data[quant], f"--thresholds {source} ({quant})"), source


def write_atomic(path: Path, text: str, option: str = "--out") -> None:
    """Write through a temp file and rename: a reader never sees half a file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise EdgeM3Error(f"{option} {path}: cannot write ({exc.strerror})") from None


def parse_ints(value: str, option: str) -> list[int]:
    """A comma list of positive integers."""
    try:
        out = [int(v) for v in str(value).split(",") if v.strip()]
    except ValueError:
        raise EdgeM3Error(f"{option} {value}: not a comma list of integers") from None
    if not out or min(out) < 1:
        raise EdgeM3Error(f"{option} {value}: need positive integers")
    return out


def _check_threads(threads: int | None, option: str = "--threads") -> None:
    if threads is not None and threads < 1:
        raise EdgeM3Error(f"{option} {threads}: must be at least 1")


# --------------------------------------------------------------------------- embed


def cmd_embed(a: argparse.Namespace) -> int:
    """JSON lines of FlagEmbedding-named outputs, from the bundle alone (as an app would)."""
    from edge_m3.bundle import load_bundle
    from edge_m3.pipeline import DevicePipeline, to_jsonable

    _check_threads(a.threads)
    texts = list(a.text) + (read_texts(a.texts) if a.texts else [])
    if not texts:
        raise EdgeM3Error("no text: give TEXT arguments or --texts FILE (one text per line)")
    bundle = load_bundle(a.bundle)  # refuses any file whose sha256 is not the manifest's
    pipe = DevicePipeline(bundle, a.runtime, a.threads)
    lines = [json.dumps(to_jsonable(pipe.embed(t)), ensure_ascii=False) for t in texts]
    body = "\n".join(lines) + "\n"
    if a.out:
        write_atomic(Path(a.out), body)
    else:
        sys.stdout.write(body)
    return 0


def cmd_verify(a: argparse.Namespace) -> int:
    """Gate a bundle on parity with the reference (see edge_m3.verify)."""
    from edge_m3.verify import run_verify

    _check_threads(a.threads)
    return run_verify(a)


# --------------------------------------------------------------------------- child processes


def run_workers(jobs: Sequence[tuple[Sequence[str], str]], parallel: bool = False) -> list[str | None]:
    """Run `python -m edge_m3.harness ARGS` per job; return None per success, else one line why.

    `parallel` starts them together (only for jobs whose timings do not matter).
    """
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")

    def start(args: Sequence[str]) -> tuple[subprocess.Popen, Any]:
        # output to a file, not a pipe: a chatty child (progress bars) never blocks on a full pipe
        log = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        return subprocess.Popen([sys.executable, "-m", "edge_m3.harness", *args], env=env,
                                stdout=log, stderr=subprocess.STDOUT), log

    def finish(started: tuple[subprocess.Popen, Any], what: str) -> str | None:
        proc, log = started
        with log:
            proc.wait()
            if proc.returncode == 0:
                return None
            log.seek(0)
            lines = [ln for ln in log.read().splitlines() if ln.strip()]
        mine = [ln for ln in lines if ln.startswith("edge-m3: error: ")]
        if mine:
            return f"{what}: {mine[-1].removeprefix('edge-m3: error: ')}"
        why = lines[-1].strip()[-300:] if lines else ""
        if proc.returncode < 0:
            why = f"killed by signal {-proc.returncode}" + (f" ({why})" if why else "")
        return f"{what} failed: {why or f'exit {proc.returncode}'}"

    if parallel:
        procs = [(start(args), what) for args, what in jobs]
        return [finish(p, what) for p, what in procs]
    return [finish(start(args), what) for args, what in jobs]


def run_worker(args: Sequence[str], what: str) -> None:
    """One child that must succeed: its failure is a one-line user-facing error."""
    error = run_workers([(args, what)])[0]
    if error:
        raise EdgeM3Error(error)


def _peak_rss() -> int:
    """Peak resident set size of this program, bytes.

    Linux: VmHWM, which starts afresh at exec; ru_maxrss would carry over the parent's peak
    (a child spawned from a 600 MB pytest process reports 600 MB). macOS: ru_maxrss, in bytes.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return peak if sys.platform == "darwin" else peak * 1024


def _rss_now() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _import_runtime(runtime: str) -> float:
    """Import the runtime's package first, so load time is the model's, not the import's."""
    import importlib

    t0 = time.perf_counter()
    importlib.import_module({"tflite-runtime": "tflite_runtime.interpreter",
                             "litert": "ai_edge_litert.interpreter", "tf": "tensorflow",
                             "onnxruntime": "onnxruntime"}[runtime])
    return time.perf_counter() - t0


def save_outputs(path: Path, outs: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> None:
    """Per-text outputs as `<path>.npz` (vectors) + `<path>.json` (ids, lexical weights, meta)."""
    arrays = {}
    for i, o in enumerate(outs):
        if "dense_vecs" in o:
            arrays[f"d{i}"] = np.asarray(o["dense_vecs"], np.float32)
        if "colbert_vecs" in o:
            arrays[f"c{i}"] = np.asarray(o["colbert_vecs"], np.float32)
    np.savez(path.with_suffix(".npz"), **arrays)
    texts = []
    for o in outs:
        t: dict[str, Any] = {"input_ids": [int(x) for x in o["input_ids"]]}
        if "lexical_weights" in o:
            t["lexical_weights"] = {str(k): float(v) for k, v in o["lexical_weights"].items()}
        texts.append(t)
    path.with_suffix(".json").write_text(json.dumps({**meta, "texts": texts}))


def load_outputs(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """What `save_outputs` wrote: the per-text outputs and the meta data."""
    meta = json.loads(path.with_suffix(".json").read_text())
    outs = []
    with np.load(path.with_suffix(".npz")) as z:
        for i, t in enumerate(meta.pop("texts")):
            o = dict(t)
            for key, name in (("d", "dense_vecs"), ("c", "colbert_vecs")):
                if f"{key}{i}" in z:
                    o[name] = z[f"{key}{i}"]
            outs.append(o)
    return outs, meta


def synthetic_inputs(n: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Exactly n real tokens: `<s>`, n-2 ordinary ids below `rows`, `</s>` (no padding)."""
    rng = np.random.default_rng(n)
    ids = np.concatenate([[0], rng.integers(5, max(6, min(rows, 30000)), n - 2), [2]])
    ids = ids.astype(np.int32)[None]
    return ids, np.ones_like(ids)


def _model_rows(manifest: Mapping[str, Any]) -> int:
    """Rows of the bundled embedding table (a trimmed vocabulary has fewer than vocab_size)."""
    tok = manifest["tokenizer"]
    kept = (tok.get("vocab_map") or {}).get("kept")
    return int(kept) if isinstance(kept, int) else int(tok["vocab_size"])


def _worker_bundle(bundle_dir: Path, runtime: str, threads: int, texts: list[str],
                   out: Path) -> None:
    """The device pipeline under one runtime: outputs, load time, latency, peak RSS."""
    from edge_m3.bundle import load_bundle
    from edge_m3.pipeline import DevicePipeline
    from edge_m3.runtime import runtime_version

    bundle = load_bundle(bundle_dir, verify=False)  # the parent checked every hash
    import_s = _import_runtime(runtime)
    rss0 = _rss_now()
    t0 = time.perf_counter()
    pipe = DevicePipeline(bundle, runtime, threads)
    load_s = time.perf_counter() - t0
    rows = _model_rows(bundle.manifest)
    t0 = time.perf_counter()
    for n in pipe.lengths:  # warm-up: XNNPACK packs weights on a signature's first call
        pipe.runner.run(*synthetic_inputs(n, rows))
    warmup_s = time.perf_counter() - t0
    outs, latency = [], {}
    for text in texts:  # the whole device step: tokenize, run, post-process
        t1 = time.perf_counter()
        res = pipe.embed(text)
        latency.setdefault(str(res["seq_len"]), []).append(time.perf_counter() - t1)
        outs.append(res)
    save_outputs(out, outs, {"load_s": load_s, "import_s": import_s, "warmup_s": warmup_s,
                             "latency": latency,
                             "peak_rss": _peak_rss(),
                             "rss_before_load": rss0, "runtime": runtime,
                             "version": runtime_version(runtime), "file": pipe.entry["file"]})


def _worker_flag(checkpoint_dir: str, texts: list[str], max_length: int, out: Path,
                 pairs: Mapping[str, list[int]] | None = None) -> None:
    """FlagEmbedding's BGEM3FlagModel itself (torch fp32, CPU): the primary reference.

    With `pairs` (query and passage text indexes) it also scores them with FlagEmbedding's own
    `colbert_score` and `compute_lexical_matching_score`, so the harness's formulas are checked
    against FlagEmbedding's on every run.
    """
    from importlib import metadata

    from FlagEmbedding import BGEM3FlagModel

    t0 = time.perf_counter()
    model = BGEM3FlagModel(checkpoint_dir, use_fp16=False, devices="cpu")
    load_s = time.perf_counter() - t0
    res = model.encode(texts, batch_size=16, max_length=max_length, return_dense=True,
                       return_sparse=True, return_colbert_vecs=True)
    ids = [model.tokenizer(t, truncation=True, max_length=max_length)["input_ids"] for t in texts]
    outs = [{"input_ids": ids[i], "dense_vecs": res["dense_vecs"][i],
             "lexical_weights": dict(res["lexical_weights"][i]),
             "colbert_vecs": res["colbert_vecs"][i]} for i in range(len(texts))]
    scores = None
    if pairs:
        qs, ps = pairs["queries"], pairs["passages"]
        lw, cv = res["lexical_weights"], res["colbert_vecs"]
        scores = {"sparse": [[float(model.compute_lexical_matching_score(lw[q], lw[p])) for p in ps]
                             for q in qs],
                  "colbert": [[float(model.colbert_score(cv[q], cv[p])) for p in ps] for q in qs]}
    save_outputs(out, outs, {"load_s": load_s, "peak_rss": _peak_rss(), "scores": scores,
                             "runtime": "FlagEmbedding BGEM3FlagModel (torch fp32, CPU)",
                             "version": metadata.version("FlagEmbedding")})


def _worker_keras(checkpoint_dir: str, texts: list[str], max_length: int, out: Path) -> None:
    """The fp32 Keras model the bundle was converted from, one unpadded text at a time."""
    from edge_m3 import __version__
    from edge_m3.checkpoint import load_checkpoint
    from edge_m3.model import build_model
    from edge_m3.postprocess import postprocess
    from edge_m3.tokenizer import Tokenizer

    t0 = time.perf_counter()
    ckpt = load_checkpoint(checkpoint_dir)
    model, tok = build_model(ckpt), Tokenizer(ckpt.sentencepiece_path)
    load_s = time.perf_counter() - t0
    outs = []
    for text in texts:
        ids = tok.encode(text, max_length)
        arr = np.asarray([ids], np.int32)
        raw = {k: v.numpy() for k, v in model(arr, np.ones_like(arr), hidden=False).items()}
        outs.append({"input_ids": ids, **postprocess(raw, ids, tok.spec.special_ids)})
    save_outputs(out, outs, {"load_s": load_s, "peak_rss": _peak_rss(),
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


def _worker_bench(bundle_dir: Path, runtime: str, threads: int, lengths: list[int],
                  warmup: int, repeats: int, out: Path) -> None:
    """Raw signature latency (exactly L tokens) and memory under one runtime and thread count."""
    from edge_m3.bundle import load_bundle
    from edge_m3.runtime import open_runner, runtime_version

    bundle = load_bundle(bundle_dir, verify=False)
    entry = bundle.model_entry("onnx" if runtime == "onnxruntime" else "tflite")
    import_s = _import_runtime(runtime)
    rss0 = _rss_now()
    t0 = time.perf_counter()
    runner = open_runner(bundle.path / entry["file"], entry["signatures"], runtime, threads)
    load_s = time.perf_counter() - t0
    rows = _model_rows(bundle.manifest)
    have = [int(s["seq_len"]) for s in entry["signatures"]]
    pad = int(bundle.manifest["tokenizer"]["special_ids"]["pad"])
    latency, first = {}, {}
    for n in lengths:  # n real tokens, padded to the signature the device pipeline would pick
        ids, mask = pad_ids(synthetic_inputs(n, rows)[0][0], choose_length(n, have), pad)
        ids, mask = ids[None], mask[None]
        first[str(n)], latency[str(n)] = _timed_repeats(lambda i=ids, m=mask: runner.run(i, m),
                                                        warmup, repeats)
    out.write_text(json.dumps({"load_s": load_s, "import_s": import_s, "latency": latency,
                               "first_call": first,
                               "peak_rss": _peak_rss(), "rss_before_load": rss0,
                               "version": runtime_version(runtime)}))


def _worker_bench_torch(checkpoint_dir: str, threads: int, lengths: list[int], warmup: int,
                        repeats: int, out: Path) -> None:
    """The reference's forward pass (FlagEmbedding, torch fp32) on the same n tokens, unpadded
    (a batch of one is never padded by FlagEmbedding)."""
    from importlib import metadata

    import torch

    torch.set_num_threads(threads)
    from FlagEmbedding import BGEM3FlagModel

    rss0 = _rss_now()
    t0 = time.perf_counter()
    model = BGEM3FlagModel(checkpoint_dir, use_fp16=False, devices="cpu").model.float().eval()
    load_s = time.perf_counter() - t0
    rows = int(model.model.config.vocab_size)
    latency, first = {}, {}
    with torch.inference_mode():
        for n in lengths:
            ids, mask = synthetic_inputs(n, rows)
            batch = {"input_ids": torch.from_numpy(ids).long(),
                     "attention_mask": torch.from_numpy(mask).long()}
            first[str(n)], latency[str(n)] = _timed_repeats(
                lambda b=batch: model(b, return_dense=True, return_sparse=True,
                                      return_colbert_vecs=True), warmup, repeats)
    out.write_text(json.dumps({"load_s": load_s, "latency": latency, "first_call": first,
                               "peak_rss": _peak_rss(),
                               "rss_before_load": rss0,
                               "version": f"torch {torch.__version__}, FlagEmbedding "
                                          f"{metadata.version('FlagEmbedding')}"}))


# --------------------------------------------------------------------------- bench


def select_runtimes(bundle: Any, wanted: str | None, option: str = "--runtime") -> list[str]:
    """The runtimes to check: those asked for, else every installed one the bundle can use."""
    from edge_m3.runtime import RUNTIMES, TFLITE_RUNTIMES, available_runtimes

    formats = {m["format"] for m in bundle.manifest["models"]}
    have = available_runtimes()
    if not wanted:  # skip what the build's self-check saw fail (int8pc on tflite-runtime 2.14)
        failed = {rt for m in bundle.manifest["models"]
                  for rt, res in (m.get("self_check") or {}).items()
                  if str(res).startswith("FAILED")}
        out = [r for r in TFLITE_RUNTIMES if "tflite" in formats and r in have and r not in failed]
        if "onnx" in formats and "onnxruntime" in have:
            out.append("onnxruntime")
        if not out:
            raise EdgeM3Error(f"{bundle.path}: no installed runtime can run this bundle "
                              f"(formats {sorted(formats)})")
        return out
    chosen = [r.strip() for r in wanted.split(",") if r.strip()]
    for r in chosen:
        if r not in RUNTIMES:
            raise EdgeM3Error(f"{option} {r}: unknown (choose from {', '.join(RUNTIMES)})")
        if r not in have:
            raise EdgeM3Error(f"{option} {r}: not installed")
        fmt = "onnx" if r == "onnxruntime" else "tflite"
        if fmt not in formats:
            raise EdgeM3Error(f"{option} {r}: {bundle.path} has no {fmt} model")
    if not chosen or len(set(chosen)) != len(chosen):
        raise EdgeM3Error(f"{option} {wanted}: empty or repeated entries")
    return chosen


def cmd_bench(a: argparse.Namespace) -> int:
    """Latency and memory: runtimes x threads x lengths, each figure also as a ratio to torch."""
    from edge_m3.bundle import load_bundle

    bundle = load_bundle(a.bundle)
    runtimes = select_runtimes(bundle, a.runtimes, "--runtimes")
    threads = parse_ints(a.threads, "--threads")
    if a.repeats < 1 or a.warmup < 0:
        raise EdgeM3Error(f"--repeats {a.repeats} / --warmup {a.warmup}: need repeats >= 1, "
                          "warmup >= 0")
    have = sorted({int(s["seq_len"]) for m in bundle.manifest["models"] for s in m["signatures"]})
    lengths = parse_ints(a.lengths, "--lengths") if a.lengths else have
    for n in lengths:
        if not 2 <= n <= max(have):
            raise EdgeM3Error(f"--lengths {n}: need 2..{max(have)} tokens (the bundle has "
                              f"signatures for {have})")
    ref_dir = None
    if a.reference:
        from edge_m3.checkpoint import resolve_checkpoint

        ref_dir = str(resolve_checkpoint(a.reference)[0])

    rows: list[dict[str, Any]] = []
    common = [",".join(map(str, lengths)), str(a.warmup), str(a.repeats)]
    with tempfile.TemporaryDirectory(prefix="edge-m3-bench-") as tmp_s:
        tmp = Path(tmp_s)
        for th in threads:  # one process per cell, run one after another: timings stay clean
            ref = None
            if ref_dir:
                out = tmp / f"torch-{th}.json"
                run_worker(["bench-torch", ref_dir, str(th), *common, str(out)],
                           f"torch reference ({th} threads)")
                ref = json.loads(out.read_text())
                rows.append(_bench_row("torch fp32 (FlagEmbedding)", th, ref, None, lengths))
            for rt in runtimes:
                out = tmp / f"{rt}-{th}.json"
                run_worker(["bench", str(bundle.path), rt, str(th), *common, str(out)],
                           f"bench {rt} ({th} threads)")
                rows.append(_bench_row(rt, th, json.loads(out.read_text()), ref, lengths))
    result = {"bundle": str(bundle.path), "quant": bundle.manifest["quant"],
              "warmup": a.warmup, "repeats": a.repeats, "lengths": lengths,
              "reference": a.reference, "rows": rows}
    _print_bench(result)
    if a.json:
        write_atomic(Path(a.json), json.dumps(result, indent=1) + "\n", "--json")
    return 0


def _bench_row(runtime: str, threads: int, res: Mapping[str, Any], ref: Mapping[str, Any] | None,
               lengths: Sequence[int]) -> dict[str, Any]:
    """One runtime x thread count: p50/p95 per length, load, peak RSS, and ratios to the reference."""
    row: dict[str, Any] = {"runtime": runtime, "version": res.get("version"), "threads": threads,
                           "load_s": res["load_s"], "peak_rss_mb": res["peak_rss"] / 1e6,
                           "rss_before_load_mb": res["rss_before_load"] / 1e6, "lengths": {}}
    for n in lengths:
        v = res["latency"][str(n)]
        fig = {"p50_ms": 1e3 * float(np.percentile(v, 50)),
               "p95_ms": 1e3 * float(np.percentile(v, 95)),
               "first_call_ms": 1e3 * float(res["first_call"][str(n)])}
        if ref is not None:  # speedup: reference time / this runtime's time
            r = ref["latency"][str(n)]
            fig["p50_speedup"] = 1e3 * float(np.percentile(r, 50)) / fig["p50_ms"]
            fig["p95_speedup"] = 1e3 * float(np.percentile(r, 95)) / fig["p95_ms"]
        row["lengths"][str(n)] = fig
    if ref is not None:  # memory: share of the reference's peak (load times are not comparable:
        # TFLite maps the file and packs weights on the first call, see first_call_ms)
        row["peak_rss_ratio"] = res["peak_rss"] / ref["peak_rss"]
    return row


def _print_bench(result: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    lengths = result["lengths"]
    table = Table(title=f"bench {result['bundle']} ({result['quant']}); p50 / p95 ms over "
                        f"{result['repeats']} runs" + ("; (x) = speedup over torch fp32, RSS as a "
                                                       "share of torch's" if result["reference"]
                                                       else ""))
    for col in ("runtime", "threads", *[f"{n} tokens" for n in lengths], f"1st call @{lengths[0]}",
                "load s", "peak RSS MB"):
        table.add_column(col, justify="left" if col == "runtime" else "right")

    def ratio(x: float | None) -> str:
        return f" ({x:.2f}x)" if x is not None else ""

    for row in result["rows"]:
        cells = [f"{f['p50_ms']:.2f} / {f['p95_ms']:.2f}{ratio(f.get('p50_speedup'))}"
                 for f in (row["lengths"][str(n)] for n in lengths)]
        table.add_row(row["runtime"], str(row["threads"]), *cells,
                      f"{row['lengths'][str(lengths[0])]['first_call_ms']:.1f}",
                      f"{row['load_s']:.3f}",
                      f"{row['peak_rss_mb']:.0f}{ratio(row.get('peak_rss_ratio'))}")
    console = Console()
    if not console.is_terminal:
        console = Console(width=150)
    console.print(table)


# --------------------------------------------------------------------------- child entry


def _worker_main(argv: list[str]) -> int:
    kind, *rest = argv
    if kind == "bundle":
        bundle_dir, rt, th, texts, out = rest
        _worker_bundle(Path(bundle_dir), rt, int(th), json.loads(Path(texts).read_text()),
                       Path(out))
    elif kind == "flag":
        ckpt, texts, max_length, out, *pairs = rest
        _worker_flag(ckpt, json.loads(Path(texts).read_text()), int(max_length), Path(out),
                     json.loads(Path(pairs[0]).read_text()) if pairs else None)
    elif kind == "keras":
        ckpt, texts, max_length, out = rest
        _worker_keras(ckpt, json.loads(Path(texts).read_text()), int(max_length), Path(out))
    elif kind == "bench":
        bundle_dir, rt, th, lengths, warmup, repeats, out = rest
        _worker_bench(Path(bundle_dir), rt, int(th), parse_ints(lengths, "lengths"), int(warmup),
                      int(repeats), Path(out))
    elif kind == "bench-torch":
        ckpt, th, lengths, warmup, repeats, out = rest
        _worker_bench_torch(ckpt, int(th), parse_ints(lengths, "lengths"), int(warmup),
                            int(repeats), Path(out))
    else:
        raise SystemExit(f"unknown worker {kind}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        raise SystemExit(_worker_main(sys.argv[1:]))
    except EdgeM3Error as exc:  # the parent shows this line as the reason
        sys.stderr.write("edge-m3: error: " + " ".join(str(exc).split()) + "\n")
        raise SystemExit(2) from None

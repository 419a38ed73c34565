"""`edge-m3 embed | verify | bench`: the device pipeline replayed from a bundle, and the gate.

Every runtime runs in a child process of its own (`python -m edge_m3.harness worker ...`): that
is how an app holds one runtime, it gives an honest peak RSS per runtime, and tflite-runtime
cannot share a process with TensorFlow.
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
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.errors import EdgeM3Error

# --------------------------------------------------------------------------- inputs


def read_texts(path: Path) -> list[str]:
    """One text per line, UTF-8; an undecodable line is reported by its number."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise EdgeM3Error(f"--texts {path}: cannot read ({exc.strerror})") from None
    out = []
    for number, line in enumerate(raw.split(b"\n"), 1):
        try:
            text = line.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as exc:
            raise EdgeM3Error(f"--texts {path}: line {number} is not UTF-8 "
                              f"(byte {exc.start})") from None
        out.append(text)
    if out and out[-1] == "" and raw.endswith(b"\n"):
        out.pop()
    return out


def retrieval_set() -> dict[str, Any]:
    """The built-in multilingual queries and passages (edge_m3/data/retrieval_set.json)."""
    return json.loads(resources.files("edge_m3").joinpath("data/retrieval_set.json")
                      .read_text("utf-8"))


def load_thresholds(path: Path | None, quant: str) -> dict[str, float]:
    """The ship thresholds for one variant, from one file (default: the packaged one)."""
    try:
        if path is None:
            data = json.loads(resources.files("edge_m3").joinpath("data/thresholds.json")
                              .read_text("utf-8"))
        else:
            data = json.loads(Path(path).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise EdgeM3Error(f"--thresholds {path}: unreadable ({exc})") from None
    if quant not in data:
        raise EdgeM3Error(f"--thresholds {path}: no entry for variant '{quant}'")
    return {k: float(v) for k, v in data[quant].items()}


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# --------------------------------------------------------------------------- embed


def cmd_embed(a: argparse.Namespace) -> int:
    from edge_m3.bundle import load_bundle
    from edge_m3.pipeline import DevicePipeline, to_jsonable

    texts = list(a.text) + (read_texts(a.texts) if a.texts else [])
    if not texts:
        raise EdgeM3Error("no text: give TEXT arguments or --texts FILE")
    bundle = load_bundle(a.bundle)
    pipe = DevicePipeline(bundle, a.runtime, a.threads)
    lines = [json.dumps(to_jsonable(pipe.embed(t)), ensure_ascii=False) for t in texts]
    if a.out:
        _write_atomic(Path(a.out), "\n".join(lines) + "\n")
    else:
        sys.stdout.write("\n".join(lines) + "\n")
    return 0


# --------------------------------------------------------------------------- child workers


def _peak_rss() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _save_outputs(path: Path, outs: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    """Per-text outputs as npz (vectors) + JSON (ids, lexical weights, timings)."""
    arrays = {}
    for i, o in enumerate(outs):
        arrays[f"d{i}"] = np.asarray(o["dense_vecs"], np.float32)
        arrays[f"c{i}"] = np.asarray(o["colbert_vecs"], np.float32)
    np.savez(path.with_suffix(".npz"), **arrays)
    meta = {**meta, "texts": [{"input_ids": [int(x) for x in o["input_ids"]],
                               "lexical_weights": {k: float(v) for k, v in
                                                   o["lexical_weights"].items()}}
                              for o in outs]}
    path.with_suffix(".json").write_text(json.dumps(meta))


def load_outputs(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    meta = json.loads(path.with_suffix(".json").read_text())
    with np.load(path.with_suffix(".npz")) as z:
        outs = [{"dense_vecs": z[f"d{i}"], "colbert_vecs": z[f"c{i}"], **t}
                for i, t in enumerate(meta.pop("texts"))]
    return outs, meta


def _worker_bundle(bundle_dir: Path, runtime: str, threads: int, texts: list[str],
                   out: Path) -> None:
    from edge_m3.bundle import load_bundle
    from edge_m3.pipeline import DevicePipeline

    t0 = time.perf_counter()
    pipe = DevicePipeline(load_bundle(bundle_dir, verify=False), runtime, threads)
    load_s = time.perf_counter() - t0
    for n in pipe.lengths:  # warm-up: XNNPACK packs weights on a signature's first call
        pipe.runner.run(*_synthetic(n))
    outs, latency = [], {}
    for text in texts:  # latency of the whole device step: tokenize, run, post-process
        t1 = time.perf_counter()
        res = pipe.embed(text)
        latency.setdefault(str(res["seq_len"]), []).append(time.perf_counter() - t1)
        outs.append(res)
    _save_outputs(out, outs, {"load_s": load_s, "latency": latency, "peak_rss": _peak_rss(),
                              "runtime": runtime})


def _worker_reference(checkpoint: str, texts: list[str], max_length: int, out: Path) -> None:
    """FlagEmbedding's BGEM3FlagModel when installed, else the fp32 Keras model."""
    from edge_m3.checkpoint import resolve_checkpoint

    ckpt_dir, _ = resolve_checkpoint(checkpoint)
    try:
        from FlagEmbedding import BGEM3FlagModel
    except ImportError:
        BGEM3FlagModel = None  # noqa: N806
    t0 = time.perf_counter()
    if BGEM3FlagModel is not None:
        model = BGEM3FlagModel(str(ckpt_dir), use_fp16=False, devices="cpu")
        load_s = time.perf_counter() - t0
        res = model.encode(texts, return_dense=True, return_sparse=True,
                           return_colbert_vecs=True, max_length=max_length, batch_size=8)
        ids = [model.tokenizer(t, truncation=True, max_length=max_length)["input_ids"]
               for t in texts]
        outs = [{"input_ids": ids[i], "dense_vecs": res["dense_vecs"][i],
                 "lexical_weights": dict(res["lexical_weights"][i]),
                 "colbert_vecs": res["colbert_vecs"][i]} for i in range(len(texts))]
        name = "FlagEmbedding BGEM3FlagModel (torch fp32)"
    else:
        from edge_m3.checkpoint import load_checkpoint
        from edge_m3.model import build_model
        from edge_m3.postprocess import postprocess
        from edge_m3.tokenizer import Tokenizer

        ckpt = load_checkpoint(ckpt_dir)
        model, tok = build_model(ckpt), Tokenizer(ckpt.sentencepiece_path)
        load_s = time.perf_counter() - t0
        outs = []
        for text in texts:
            ids = tok.encode(text, max_length)
            arr = np.asarray([ids], np.int32)
            raw = {k: v.numpy() for k, v in model(arr, np.ones_like(arr), hidden=False).items()}
            outs.append({"input_ids": ids, **postprocess(raw, ids, tok.spec.special_ids)})
        name = "Keras fp32 (edge-m3 model)"
    _save_outputs(out, outs, {"load_s": load_s, "peak_rss": _peak_rss(), "runtime": name})


def _worker_bench(bundle_dir: Path, runtime: str, threads: int, lengths: list[int],
                  repeats: int, out: Path) -> None:
    from edge_m3.bundle import load_bundle
    from edge_m3.runtime import open_runner

    bundle = load_bundle(bundle_dir, verify=False)
    entry = bundle.model_entry("onnx" if runtime == "onnxruntime" else "tflite")
    t0 = time.perf_counter()
    runner = open_runner(bundle.path / entry["file"], entry["signatures"], runtime, threads)
    load_s = time.perf_counter() - t0
    res = {"load_s": load_s, "latency": {}}
    for n in lengths:
        ids, mask = _synthetic(n)
        runner.run(ids, mask)  # warm-up: XNNPACK packs weights on first use
        times = []
        for _ in range(repeats):
            t1 = time.perf_counter()
            runner.run(ids, mask)
            times.append(time.perf_counter() - t1)
        res["latency"][str(n)] = times
    res["peak_rss"] = _peak_rss()
    out.write_text(json.dumps(res))


def _worker_bench_torch(checkpoint: str, threads: int, lengths: list[int], repeats: int,
                        out: Path) -> None:
    import torch
    from FlagEmbedding import BGEM3FlagModel

    from edge_m3.checkpoint import resolve_checkpoint

    torch.set_num_threads(threads)
    ckpt_dir, _ = resolve_checkpoint(checkpoint)
    t0 = time.perf_counter()
    model = BGEM3FlagModel(str(ckpt_dir), use_fp16=False, devices="cpu").model.eval()
    res = {"load_s": time.perf_counter() - t0, "latency": {}}
    with torch.inference_mode():
        for n in lengths:
            ids, mask = _synthetic(n)
            batch = {"input_ids": torch.from_numpy(ids).long(),
                     "attention_mask": torch.from_numpy(mask).long()}

            def step() -> None:
                model(batch, return_dense=True, return_sparse=True,  # noqa: B023
                      return_colbert_vecs=True)

            step()
            times = []
            for _ in range(repeats):
                t1 = time.perf_counter()
                step()
                times.append(time.perf_counter() - t1)
            res["latency"][str(n)] = times
    res["peak_rss"] = _peak_rss()
    out.write_text(json.dumps(res))


def _synthetic(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Exactly n real tokens: <s>, n-2 ordinary ids, </s>."""
    rng = np.random.default_rng(n)
    ids = np.concatenate([[0], rng.integers(5, 200, n - 2), [2]]).astype(np.int32)[None]
    return ids, np.ones_like(ids)


def _child(args: list[str], what: str) -> None:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    proc = subprocess.run([sys.executable, "-m", "edge_m3.harness", *args],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{what} failed: " + " | ".join(tail))


# --------------------------------------------------------------------------- verify


def _runtimes_for(bundle: Any, wanted: str | None) -> list[str]:
    from edge_m3.runtime import RUNTIMES, TFLITE_RUNTIMES, available_runtimes

    formats = {m["format"] for m in bundle.manifest["models"]}
    have = available_runtimes()
    if wanted:
        chosen = [r.strip() for r in wanted.split(",") if r.strip()]
        for r in chosen:
            if r not in RUNTIMES:
                raise EdgeM3Error(f"--runtime {r}: unknown (choose from {', '.join(RUNTIMES)})")
            if r not in have:
                raise EdgeM3Error(f"--runtime {r}: not installed")
        return chosen
    out = [r for r in TFLITE_RUNTIMES if "tflite" in formats and r in have]
    if "onnx" in formats and "onnxruntime" in have:
        out.append("onnxruntime")
    return out


def cmd_verify(a: argparse.Namespace) -> int:
    from edge_m3.bundle import load_bundle
    from edge_m3.metrics import compare, gate

    bundle = load_bundle(a.bundle)
    quant = bundle.manifest["quant"]
    limits = load_thresholds(a.thresholds, quant)
    runtimes = _runtimes_for(bundle, a.runtime)
    rs = retrieval_set()
    user = read_texts(a.texts) if a.texts else []
    queries = [q["text"] for q in rs["queries"]]
    texts = [*user, *queries, *rs["passages"]]
    q_idx = list(range(len(user), len(user) + len(queries)))
    p_idx = list(range(len(user) + len(queries), len(texts)))
    report_dir = Path(a.report or f"reports/{Path(a.bundle).resolve().name}")
    with tempfile.TemporaryDirectory(prefix="edge-m3-verify-") as tmp_s:
        tmp = Path(tmp_s)
        (tmp / "texts.json").write_text(json.dumps(texts))
        _child(["reference", str(a.reference), str(tmp / "texts.json"),
                str(bundle.manifest["max_length"]), str(tmp / "ref")], "reference")
        ref, ref_meta = load_outputs(tmp / "ref")
        results = {}
        for rt in runtimes:
            _child(["bundle", str(bundle.path), rt, str(a.threads), str(tmp / "texts.json"),
                    str(tmp / rt)], f"runtime {rt}")
            outs, meta = load_outputs(tmp / rt)
            figures = compare(outs, ref, q_idx, p_idx)
            figures["ids_match_reference"] = sum(
                o["input_ids"] == r["input_ids"] for o, r in zip(outs, ref, strict=True))
            figures["latency"] = {n: {"p50_ms": 1e3 * float(np.percentile(v, 50)),
                                      "p95_ms": 1e3 * float(np.percentile(v, 95)), "n": len(v)}
                                  for n, v in sorted(meta["latency"].items(), key=lambda kv: int(kv[0]))}
            figures["load_s"] = meta["load_s"]
            figures["peak_rss_mb"] = meta["peak_rss"] / 1e6
            figures["failed"] = gate(figures, limits)
            results[rt] = figures
    report = {"bundle": str(bundle.path), "quant": quant, "reference": ref_meta["runtime"],
              "reference_load_s": ref_meta["load_s"],
              "reference_peak_rss_mb": ref_meta["peak_rss"] / 1e6,
              "texts": len(texts), "user_texts": len(user), "queries": len(queries),
              "passages": len(p_idx), "thresholds": limits, "runtimes": results,
              "passed": all(not r["failed"] for r in results.values()) and bool(results)}
    from edge_m3.report import write_verify_report

    write_verify_report(report_dir, report)
    _print_verify(report, report_dir)
    return 0 if report["passed"] else 1


def _print_verify(report: dict[str, Any], report_dir: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"verify {report['bundle']} ({report['quant']}) vs {report['reference']}")
    for col in ("runtime", "dense cos min/mean", "lex top10", "colbert err", "retrieval top10",
                "p50 ms by length", "load s", "peak RSS", "gate"):
        table.add_column(col)
    for rt, f in report["runtimes"].items():
        table.add_row(
            rt, f"{f['dense_cosine']['min']:.6f} / {f['dense_cosine']['mean']:.6f}",
            f"{f['lexical_top10_overlap']['mean']:.3f}", f"{f['colbert_score_abs_err_max']:.2e}",
            f"{f['retrieval_top10_agreement']['min']:.3f}",
            ", ".join(f"{n}: {v['p50_ms']:.1f}" for n, v in f["latency"].items()),
            f"{f['load_s']:.2f}", f"{f['peak_rss_mb']:.0f} MB",
            "[green]pass" if not f["failed"] else "[red]FAIL: " + "; ".join(f["failed"]))
    console = Console()
    console.print(table)
    console.print(f"report: {report_dir / 'report.md'}")


# --------------------------------------------------------------------------- bench


def _ints(value: str, option: str) -> list[int]:
    try:
        out = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise EdgeM3Error(f"{option} {value}: not a comma list of integers") from None
    if not out or min(out) < 1:
        raise EdgeM3Error(f"{option} {value}: need positive integers")
    return out


def cmd_bench(a: argparse.Namespace) -> int:
    from edge_m3.bundle import load_bundle

    bundle = load_bundle(a.bundle)
    runtimes = _runtimes_for(bundle, a.runtimes)
    threads = _ints(a.threads, "--threads")
    entry = bundle.model_entry("tflite" if any(r != "onnxruntime" for r in runtimes) else "onnx")
    have = sorted(int(s["seq_len"]) for s in entry["signatures"])
    lengths = _ints(a.lengths, "--lengths") if a.lengths else have
    for n in lengths:
        if n not in have:
            raise EdgeM3Error(f"--lengths {n}: the bundle has signatures for {have}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="edge-m3-bench-") as tmp_s:
        tmp = Path(tmp_s)
        for th in threads:
            ref = None
            if a.reference:
                _child(["bench-torch", str(a.reference), str(th), ",".join(map(str, lengths)),
                        str(a.repeats), str(tmp / f"torch{th}.json")], "torch reference")
                ref = json.loads((tmp / f"torch{th}.json").read_text())
                rows.append(("torch fp32 (FlagEmbedding)", th, ref, None))
            for rt in runtimes:
                out = tmp / f"{rt}{th}.json"
                _child(["bench", str(bundle.path), rt, str(th), ",".join(map(str, lengths)),
                        str(a.repeats), str(out)], f"bench {rt}")
                rows.append((rt, th, json.loads(out.read_text()), ref))
    result = _bench_table(bundle, rows, lengths)
    if a.json:
        _write_atomic(Path(a.json), json.dumps(result, indent=1))
    return 0


def _bench_table(bundle: Any, rows: list[tuple[str, int, dict, dict | None]],
                 lengths: list[int]) -> list[dict[str, Any]]:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"bench {bundle.path} ({bundle.manifest['quant']})")
    for col in ("runtime", "threads", *[f"p50 @{n} (p95)" for n in lengths], "load s", "peak RSS"):
        table.add_column(col)
    result = []
    for rt, th, res, ref in rows:
        cells, entry = [], {"runtime": rt, "threads": th, "load_s": res["load_s"],
                            "peak_rss_mb": res["peak_rss"] / 1e6, "lengths": {}}
        for n in lengths:
            v = res["latency"][str(n)]
            p50, p95 = 1e3 * float(np.median(v)), 1e3 * float(np.percentile(v, 95))
            cell = f"{p50:.1f} ms ({p95:.1f})"
            fig = {"p50_ms": p50, "p95_ms": p95}
            if ref is not None:
                speedup = float(np.median(ref["latency"][str(n)])) * 1e3 / p50
                cell += f" {speedup:.2f}x"
                fig["speedup_vs_torch"] = speedup
            cells.append(cell)
            entry["lengths"][n] = fig
        table.add_row(rt, str(th), *cells, f"{res['load_s']:.2f}", f"{res['peak_rss'] / 1e6:.0f} MB")
        result.append(entry)
    Console().print(table)
    return result


# --------------------------------------------------------------------------- child entry


def _worker_main(argv: list[str]) -> int:
    kind, *rest = argv
    if kind == "bundle":
        bundle_dir, rt, th, texts, out = rest
        _worker_bundle(Path(bundle_dir), rt, int(th), json.loads(Path(texts).read_text()),
                       Path(out))
    elif kind == "reference":
        ckpt, texts, max_length, out = rest
        _worker_reference(ckpt, json.loads(Path(texts).read_text()), int(max_length), Path(out))
    elif kind == "bench":
        bundle_dir, rt, th, lengths, repeats, out = rest
        _worker_bench(Path(bundle_dir), rt, int(th), [int(x) for x in lengths.split(",")],
                      int(repeats), Path(out))
    elif kind == "bench-torch":
        ckpt, th, lengths, repeats, out = rest
        _worker_bench_torch(ckpt, int(th), [int(x) for x in lengths.split(",")], int(repeats),
                            Path(out))
    else:
        raise SystemExit(f"unknown worker {kind}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_worker_main(sys.argv[1:]))

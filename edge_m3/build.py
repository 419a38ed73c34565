"""`edge-m3 build`: checkpoint -> Keras -> quantized TFLite (and ONNX) bundle, atomically.

Options are validated before any heavy work. The Keras model is traced once into a SavedModel
whose endpoints are the fixed-length signatures; each variant is converted in a child process
(its memory goes back to the OS), self-checked under every installed TFLite runtime, and the
bundle is written to a temp dir that replaces the old bundle only once it is complete.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from edge_m3 import __version__
from edge_m3.bundle import HEADS
from edge_m3.errors import EdgeM3Error
from edge_m3.export_tflite import (
    FLATBUFFER_LIMIT,
    OLDEST_TFLITE_RUNTIME,
    estimated_size,
    signature_name,
    version_tuple,
)

FORMATS = ("tflite", "onnx")
DEFAULT_CHECKPOINT = "BAAI/bge-m3"
DEFAULT_OUT = "dist/bge-m3-{quant}"


@dataclass
class BuildOptions:
    """Everything `edge-m3 build` was asked for, parsed and checked."""

    checkpoint: str = DEFAULT_CHECKPOINT
    revision: str | None = None
    quants: list[str] = field(default_factory=lambda: ["int8"])
    seq_lens: list[int] = field(default_factory=lambda: [32, 128, 512])
    heads: list[str] = field(default_factory=lambda: list(HEADS))
    formats: list[str] = field(default_factory=lambda: ["tflite"])
    out: str = DEFAULT_OUT
    android_dir: Path | None = None
    ios_dir: Path | None = None
    self_check: bool = True
    vocab_corpus: list[Path] = field(default_factory=list)
    vocab_min_count: int = 1
    ort: bool = False

    def out_dir(self, quant: str) -> Path:
        return Path(self.out.format(quant=quant))


def _split(value: str, option: str) -> list[str]:
    items = [v.strip() for v in str(value).split(",") if v.strip()]
    if not items:
        raise EdgeM3Error(f"{option}: empty list")
    if len(set(items)) != len(items):
        raise EdgeM3Error(f"{option} {value}: repeated entries")
    return items


def parse_choices(value: str, option: str, choices: Sequence[str]) -> list[str]:
    """A comma list restricted to `choices`, in the order given."""
    items = _split(value, option)
    for item in items:
        if item not in choices:
            raise EdgeM3Error(f"{option} {item}: unknown (choose from {', '.join(choices)})")
    return items


def parse_seq_lens(value: str) -> list[int]:
    """Comma list of positive integers, sorted."""
    out = []
    for item in _split(value, "--seq-lens"):
        try:
            n = int(item)
        except ValueError:
            raise EdgeM3Error(f"--seq-lens {item}: not an integer") from None
        if n < 2:
            raise EdgeM3Error(f"--seq-lens {n}: must be at least 2 (<s> and </s>)")
        out.append(n)
    return sorted(out)


def validate_against_config(opts: BuildOptions, config: Any, param_count: int) -> None:
    """Checks that need config.json: lengths vs positions, the 2 GB FlatBuffer limit."""
    longest = config.max_position_embeddings - config.pad_token_id - 1
    for n in opts.seq_lens:
        if n > longest:
            raise EdgeM3Error(f"--seq-lens {n}: above this model's maximum of {longest} "
                              f"(max_position_embeddings {config.max_position_embeddings} - 2)")
    if opts.ort:
        from edge_m3.export_onnx import ORT_FORMAT_LIMIT

        if "onnx" not in opts.formats:
            raise EdgeM3Error("--ort: needs --formats with onnx (the .ort is a copy of the ONNX file)")
        for q in opts.quants:
            size = estimated_size(param_count, q)
            if size > ORT_FORMAT_LIMIT:
                raise EdgeM3Error(
                    f"--ort: a {q} ORT-format copy of this model would be {size / 1e9:.2f} GB, "
                    "over the format's 2 GB limit; use --quant fp16 or int8 with --ort")
    if "tflite" in opts.formats:
        for q in opts.quants:
            size = estimated_size(param_count, q)
            if size > FLATBUFFER_LIMIT:
                raise EdgeM3Error(
                    f"--quant {q}: a {q} TFLite file of this model would be {size / 1e9:.2f} GB, "
                    "over the 2 GB FlatBuffer limit; use --quant fp16 or int8, or --formats onnx "
                    "(external data)")


def param_count_from_config(config: Any, colbert_dim: int) -> int:
    """Parameters of the exported graph (type embedding folded, pooler dropped)."""
    h, f, n = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    layer = 4 * (h * h + h) + 2 * 2 * h + (h * f + f) + (f * h + h)
    emb = (config.vocab_size + config.max_position_embeddings) * h + 2 * h
    heads = colbert_dim * h + colbert_dim + h + 1
    return emb + n * layer + heads


def _golden_texts() -> list[str]:
    text = resources.files("edge_m3").joinpath("data/golden_texts.txt").read_text("utf-8")
    return [line for line in text.split("\n") if line]


class Reporter:
    """Phase-by-phase progress on stderr (rich), silent when asked."""

    def __init__(self, quiet: bool = False) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, quiet=quiet)

    def phase(self, title: str) -> Any:
        return self.console.status(f"[bold]{title}[/bold]…", spinner="dots")

    def done(self, title: str, seconds: float, extra: str = "") -> None:
        self.console.print(f"[green]✓[/green] {title} ({seconds:.1f} s){' ' + extra if extra else ''}")


def _timed(rep: Reporter, title: str, fn: Callable[[], Any], extra: Callable[[Any], str] | None = None) -> Any:
    t0 = time.perf_counter()
    with rep.phase(title):
        value = fn()
    rep.done(title, time.perf_counter() - t0, extra(value) if extra else "")
    return value


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def run_child(args: Sequence[str], what: str) -> dict[str, Any]:
    """Run one `edge_m3.export_tflite` step in a child process; return its JSON result."""
    cmd = [sys.executable, "-m", "edge_m3.export_tflite", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_child_env())
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"{what} failed: " + " | ".join(tail))
    return json.loads(proc.stdout.strip().splitlines()[-1])


def convert_variant(saved: Path, out_file: Path, quant: str, seq_lens: Sequence[int],
                    params: int) -> dict[str, Any]:
    """Run the converter for one variant in a child process; return its audit."""
    return run_child(["convert", "--saved", str(saved), "--out", str(out_file), "--quant", quant,
                      "--lens", ",".join(map(str, seq_lens)), "--params", str(params)],
                     f"TFLite conversion ({quant})")


_SELF_CHECK = r"""
import json, sys, numpy as np
sys.path[:0] = []
from edge_m3.runtime import open_runner
path, sigs, runtime = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
runner = open_runner(path, sigs, runtime, 1)
for s in sigs:
    n = s["seq_len"]
    ids = np.full((1, n), 1, np.int32); ids[0, :3] = [0, 5, 2]
    mask = (ids != 1).astype(np.int32); mask[0, 0] = 1
    out = runner.run(ids, mask)
    assert all(np.isfinite(v).all() for v in out.values()), s["name"]
print("ok")
"""


def self_check(model_file: Path, signatures: list[dict[str, Any]], runtimes: Sequence[str]) -> dict[str, str]:
    """Load and run every signature under each installed TFLite runtime, each in a child."""
    from edge_m3.runtime import runtime_version

    results = {}
    for rt in runtimes:
        version = runtime_version(rt)
        if version is None:
            results[rt] = "not installed"
            continue
        proc = subprocess.run([sys.executable, "-c", _SELF_CHECK, str(model_file),
                               json.dumps(signatures), rt], capture_output=True, text=True,
                              env=_child_env())
        ok = proc.returncode == 0 and proc.stdout.strip().endswith("ok")
        err = (proc.stderr.strip().splitlines() or ["?"])[-1]
        results[rt] = f"ok ({version})" if ok else f"FAILED ({version}): {err}"
    return results


def oldest_runtime(audit: dict[str, Any], checks: dict[str, str]) -> dict[str, str]:
    """The oldest runtime that runs the file: tflite-runtime 2.14 if it loaded there."""
    from edge_m3.runtime import runtime_version

    need = audit.get("min_runtime_version") or "0"
    if checks.get("tflite-runtime", "").startswith("ok") or (
        "tflite-runtime" not in checks
        and version_tuple(need) <= version_tuple(OLDEST_TFLITE_RUNTIME)
    ):
        return {"tflite-runtime": OLDEST_TFLITE_RUNTIME, "converter_min_runtime_version": need}
    return {"ai-edge-litert": runtime_version("litert") or "?", "converter_min_runtime_version": need}


def build(opts: BuildOptions, quiet: bool = False) -> list[Path]:
    """Build one bundle per requested quant; return their directories."""
    from edge_m3.bundle import check_writable

    rep = Reporter(quiet)
    for q in opts.quants:
        check_writable(opts.out_dir(q))
    for kit in (opts.android_dir, opts.ios_dir):
        if kit is not None:
            check_writable(kit)

    from edge_m3.checkpoint import load_checkpoint, resolve_checkpoint

    ckpt_dir, source = _timed(rep, f"resolve checkpoint {opts.checkpoint}",
                              lambda: resolve_checkpoint(opts.checkpoint, opts.revision))
    ckpt = _timed(rep, "load + validate checkpoint", lambda: load_checkpoint(ckpt_dir, source))
    plan = None
    if opts.vocab_corpus:
        from edge_m3.tokenizer import Tokenizer
        from edge_m3.vocab import plan_trim

        plan = _timed(rep, "plan vocabulary trim",
                      lambda: plan_trim(Tokenizer(ckpt.sentencepiece_path), opts.vocab_corpus,
                                        opts.vocab_min_count),
                      lambda p: f"{len(p.kept_ids):,} of {ckpt.config.vocab_size:,} ids kept, "
                                f"corpus coverage {p.coverage:.2%}")
    rows = len(plan.kept_ids) if plan else ckpt.config.vocab_size
    params = param_count_from_config(dataclasses.replace(ckpt.config, vocab_size=rows),
                                     ckpt.colbert_dim)
    validate_against_config(opts, ckpt.config, params)

    with tempfile.TemporaryDirectory(prefix="edge-m3-work-") as work_str:
        work = Path(work_str)
        saved = work / "saved_model"

        vocab_map = work / "vocab_map.json"
        if plan is not None:
            from edge_m3.bundle import write_json

            write_json(vocab_map, plan.to_json())

        def trace() -> dict[str, Any]:
            args = ["trace", "--checkpoint", str(ckpt_dir), "--saved", str(saved),
                    "--lens", ",".join(map(str, opts.seq_lens)), "--heads", ",".join(opts.heads)]
            if plan is not None:
                args += ["--vocab-map", str(vocab_map)]
            return run_child([*args, *(["--dynamic"] if "onnx" in opts.formats else [])],
                             "tracing the Keras model")

        traced = _timed(rep, "build Keras model + trace signatures (child process)", trace,
                        lambda t: f"{t['params']:,} parameters")
        params = traced["params"]
        if plan is not None:  # the trace may keep one more row (see keep_extreme_row)
            plan.kept_ids = traced["kept_ids"]
        outs = [_build_variant(opts, q, ckpt, plan, saved, params, rep)
                for q in opts.quants]
    if opts.android_dir is not None and opts.ios_dir is not None:
        from edge_m3.bundle import copy_to_kits

        placed = _timed(rep, "copy bundle into platform kits",
                        lambda: copy_to_kits(outs[0], opts.android_dir, opts.ios_dir))
        rep.console.print("kits: " + ", ".join(str(p) for p in placed))
    return outs


def _build_variant(opts: BuildOptions, quant: str, ckpt: Any, plan: Any, saved: Path,
                   params: int, rep: Reporter) -> Path:
    from edge_m3.bundle import (
        GOLDEN,
        MANIFEST,
        SCHEMA_VERSION,
        atomic_dir,
        file_entries,
        load_bundle,
        write_json,
    )
    from edge_m3.tokenizer import TokenizerSpec

    out_dir = opts.out_dir(quant)
    with atomic_dir(out_dir) as tmp:
        models = []
        if "tflite" in opts.formats:
            name = f"model_{quant}.tflite"
            info = _timed(rep, f"convert + quantize TFLite {quant}",
                          lambda: convert_variant(saved, tmp / name, quant, opts.seq_lens, params),
                          lambda i: f"{i['size'] / 1e6:.1f} MB")
            checks = {}
            if opts.self_check:
                checks = _timed(rep, f"self-check {quant} under tflite-runtime and LiteRT",
                                lambda: self_check(tmp / name, info["signatures"],
                                                   ("tflite-runtime", "litert")))
                for rt, result in checks.items():
                    if result.startswith("FAILED"):
                        rep.console.print(f"[yellow]! {name} does not run on {rt}: {result}")
            models.append({"format": "tflite", "file": name, "quant": quant,
                           "signatures": info["signatures"], "ops": info["ops"],
                           "oldest_runtime": oldest_runtime(info, checks),
                           "self_check": checks})
        if "onnx" in opts.formats:
            from edge_m3.export_onnx import export_onnx_variant

            models.append(_timed(rep, f"export ONNX {quant}",
                                 lambda: export_onnx_variant(saved, tmp, quant, opts.seq_lens,
                                                             opts.heads, params, ort=opts.ort)))
        (tmp / "sentencepiece.bpe.model").write_bytes(ckpt.sentencepiece_path.read_bytes())
        spec = TokenizerSpec.for_sentencepiece(tmp / "sentencepiece.bpe.model")
        extra = ["sentencepiece.bpe.model"]
        if plan is not None:
            write_json(tmp / "vocab_map.json", plan.to_json())
            spec = dataclasses.replace(spec, vocab_map=plan.manifest_entry())
            extra.append("vocab_map.json")
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "edge_m3_version": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "source": ckpt.source,
            "quant": quant,
            "hidden_size": ckpt.config.hidden_size,
            "max_length": max(opts.seq_lens),
            "heads": list(opts.heads),
            "tokenizer": {"file": "sentencepiece.bpe.model", **spec.to_manifest()},
            "models": models,
        }
        names = [m["file"] for m in models] + [f for m in models for f in m.get("extra_files", [])]
        names += [m["ort"][k] for m in models if "ort" in m for k in ("file", "ops_config")]
        manifest["files"] = file_entries(tmp, [*names, *extra])
        write_json(tmp / MANIFEST, manifest)
        golden = _timed(rep, f"golden vectors {quant}",
                        lambda: make_golden(load_bundle(tmp, verify=False), quant))
        write_json(tmp / GOLDEN, golden)
        manifest["files"].update(file_entries(tmp, [GOLDEN]))
        write_json(tmp / MANIFEST, manifest)
    _summary(rep, out_dir, manifest)
    return out_dir


def make_golden(bundle: Any, quant: str) -> dict[str, Any]:
    """A dozen multilingual texts through the device pipeline, raw and post-processed."""
    from edge_m3.pipeline import DevicePipeline, to_jsonable
    from edge_m3.runtime import available_runtimes

    fmt = bundle.manifest["models"][0]["format"]
    runtime = "onnxruntime" if fmt == "onnx" else next(
        (r for r in ("litert", "tflite-runtime", "tf") if r in available_runtimes()), "tf")
    pipe = DevicePipeline(bundle, runtime, threads=1, fmt=fmt)
    cases = []
    for text in _golden_texts():
        res = pipe.embed(text)
        case = {"text": text, "seq_len": res["seq_len"], **to_jsonable(res, raw=True)}
        cases.append(case)
    return {"schema_version": 1, "quant": quant, "model_file": pipe.entry["file"],
            "runtime": runtime, "cases": cases}


def _summary(rep: Reporter, out_dir: Path, manifest: dict[str, Any]) -> None:
    from rich.table import Table

    from edge_m3.bundle import model_bytes

    table = Table(title=f"bundle {out_dir}")
    for col in ("variant", "file", "size", "signatures", "oldest runtime"):
        table.add_column(col)
    for m in manifest["models"]:
        size = model_bytes(manifest, m)
        old = ", ".join(f"{k} {v}" for k, v in m.get("oldest_runtime", {}).items()
                        if k != "converter_min_runtime_version")
        table.add_row(f"{m['format']} {m['quant']}", m["file"], f"{size / 1e6:.1f} MB",
                      ", ".join(s["name"] for s in m["signatures"]), old)
    rep.console.print(table)


__all__ = ["BuildOptions", "build", "parse_choices", "parse_seq_lens", "signature_name"]

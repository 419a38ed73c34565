"""The device commands' child processes: the device pipeline under one runtime (`bundle`,
`check`) and the bench cells (`bench`), each `python -m edge_m3.device.workers STEP JOB.json`
(edge_m3.common.proc: why children, the wire format). The lab's children (the references,
edge_m3.lab.workers) use the same jobs, files and helpers.

Every job is one frozen dataclass (`WireJob`), written as JSON by the parent (`worker`) and
checked field by field where the child receives it (`receive`): a job a step cannot read is
refused before it runs, naming the job kind and field.

Results travel as files the job names (`out`): per-text outputs as `<out>.npz` + `<out>.json`
(save_outputs), a bench cell's figures as `<out>` (JSON).
"""

from __future__ import annotations

import dataclasses
import json
import time
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np

from edge_m3.common.proc import Job, job_main, peak_rss, reset_peak_rss, rss_now, run_jobs
from edge_m3.errors import EdgeM3Error
from edge_m3.runtime.registry import RUNTIMES, Runtime, WeightCache
from edge_m3.spec import (
    COLBERT_VECS,
    DENSE_VECS,
    LEXICAL_WEIGHTS,
    RSS_ALLOWANCE,
    choose_length,
)

MODULE = "edge_m3.device.workers"
LAB_MODULE = "edge_m3.lab.workers"  # the references' children: run by name, never imported here


def _fits(value: Any, hint: Any) -> bool:
    """Whether a decoded JSON value has the field's type (bool is not an int here)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if hint is type(None):
        return value is None
    if origin is list:
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(_fits(k, args[0]) and _fits(v, args[1])
                                               for k, v in value.items())
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


@dataclass(frozen=True)
class WireJob:
    """A child's job: one frozen dataclass per kind, the one definition of its fields. It
    crosses the process boundary as JSON (`to_json`) and is rebuilt and checked where the
    child receives it (`from_json`). `module` is the child that runs it."""

    module: ClassVar[str] = MODULE

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """The job back from its JSON; EdgeM3Error naming the kind and the field when a field
        is missing, unknown or of another type."""
        hints = typing.get_type_hints(cls)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for name in data:
            if name not in fields:
                raise EdgeM3Error(f"{cls.__name__} job: unknown field {name!r}")
        for name, f in fields.items():
            if name not in data:
                if f.default is dataclasses.MISSING:
                    raise EdgeM3Error(f"{cls.__name__} job: field {name!r} missing")
            elif not _fits(data[name], hints[name]):
                raise EdgeM3Error(f"{cls.__name__} job: field {name!r} is not {hints[name]}: "
                                  f"{data[name]!r:.60}")
        return cls(**data)


@dataclass(frozen=True)
class RuntimeJob(WireJob):
    """What every device job names: the bundle (its hashes checked by the parent), the runtime
    and weight cache (as `runtime_job` spells them) and the thread count."""

    bundle: str
    runtime: str
    weight_cache: dict[str, str | None] | None
    threads: int

    def resolve(self) -> tuple[Runtime, WeightCache | None]:
        """The runtime and weight cache the job names."""
        cache = self.weight_cache
        return RUNTIMES[self.runtime], None if cache is None else WeightCache.from_json(cache)


@dataclass(frozen=True)
class BundleJob(RuntimeJob):
    """Step `bundle`: the device pipeline over `texts`, outputs to `out` (save_outputs)."""

    texts: list[str]
    out: str


@dataclass(frozen=True)
class BenchJob(RuntimeJob):
    """Step `bench`: raw signature latency at each of `lengths` tokens, figures to `out`."""

    lengths: list[int]
    warmup: int
    repeats: int
    out: str


@dataclass(frozen=True)
class CheckJob(RuntimeJob):
    """Step `check`: every signature timed, then golden.json's texts, outputs to `out`."""

    warmup: int
    repeats: int
    out: str


@dataclass(frozen=True)
class TorchBenchJob(WireJob):
    """Step `bench-torch` of the lab's child (`bench --reference`): the reference's forward
    pass at each of `lengths` tokens, figures to `out`. Defined here, beside the bench job it
    is timed against; the lab's child receives it."""

    module: ClassVar[str] = LAB_MODULE
    checkpoint: str
    threads: int
    lengths: list[int]
    warmup: int
    repeats: int
    out: str


J = typing.TypeVar("J", bound=WireJob)


def worker(step: str, job: WireJob, what: str) -> Job:
    """One job for a child: `step` (a key of its module's STEPS) on `job`; `what` names it in
    errors."""
    return Job(job.module, step, job.to_json(), what)


def receive(kind: type[J], step: Callable[[J], None]) -> Callable[[dict[str, Any]], None]:
    """A step as `job_main` calls it: the JSON job checked and rebuilt as `kind`, then run."""
    return lambda data: step(kind.from_json(data))


def runtime_job(runtime: Runtime, weight_cache: WeightCache | None = None) -> dict[str, Any]:
    """How a job names its runtime and weight cache (RuntimeJob's fields, as keywords)."""
    return {"runtime": runtime.name,
            "weight_cache": None if weight_cache is None else weight_cache.to_json()}


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


def _worker_bundle(job: BundleJob) -> None:
    """The device pipeline under one runtime: outputs, load time, latency, the model's memory."""
    from edge_m3.bundle import load_bundle
    from edge_m3.runtime.pipeline import DevicePipeline
    from edge_m3.runtime.runners import import_runtime

    runtime, weight_cache = job.resolve()
    threads, texts, out = job.threads, job.texts, Path(job.out)
    bundle = load_bundle(Path(job.bundle), verify=False)  # the parent checked every hash
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


def timed_repeats(step: Any, warmup: int, repeats: int) -> tuple[float, list[float]]:
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
        first[str(n)], latency[str(n)] = timed_repeats(lambda i=ids, m=mask: runner.run(i, m),
                                                       warmup, repeats)
    return first, latency


def padded_inputs(n: int, seq_lens: Sequence[int], tok: Any) -> tuple[np.ndarray, np.ndarray]:
    """n real tokens, padded to the signature the device pipeline would pick."""
    from edge_m3.tokenizer import pad_ids

    special = tok.special_ids
    real = synthetic_inputs(n, tok.model_rows, special["bos"], special["eos"])[0][0]
    ids, mask = pad_ids(real, choose_length(n, seq_lens), special["pad"])
    return ids[None], mask[None]


def _worker_bench(job: BenchJob) -> None:
    """Raw signature latency (exactly L tokens), first-run cost and the model's memory under
    one runtime, thread count and weight cache."""
    from edge_m3.bundle import load_bundle
    from edge_m3.runtime.runners import import_runtime, open_runner

    runtime, weight_cache = job.resolve()
    threads, lengths = job.threads, job.lengths
    warmup, repeats, out = job.warmup, job.repeats, Path(job.out)
    bundle = load_bundle(Path(job.bundle), verify=False)
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


def _worker_check(job: CheckJob) -> None:
    """`edge-m3 check` on the device: every signature timed cold and warm (exactly L tokens),
    then golden.json's texts through the whole device step; load time and peak RSS."""
    from edge_m3.bundle import load_bundle
    from edge_m3.runtime.pipeline import DevicePipeline
    from edge_m3.runtime.runners import import_runtime
    from edge_m3.spec import GOLDEN

    runtime, weight_cache = job.resolve()
    threads, warmup, repeats = job.threads, job.warmup, job.repeats
    out = Path(job.out)
    bundle = load_bundle(Path(job.bundle), verify=False)  # the parent checked every hash
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


STEPS = {"bundle": receive(BundleJob, _worker_bundle), "bench": receive(BenchJob, _worker_bench),
         "check": receive(CheckJob, _worker_check)}


if __name__ == "__main__":
    job_main(STEPS)

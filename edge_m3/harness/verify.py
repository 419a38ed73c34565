"""`edge-m3 verify`: the bundle's device pipeline against the references, gated, with a report.

The references (FlagEmbedding and the Keras fp32 model) come from harness.references; the
figures and the gate from harness.metrics; the report from harness.report.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.common.files import check_writable, read_texts
from edge_m3.errors import OptionError
from edge_m3.harness.fidelity import Corpus, is_corpus, read_corpus, sample, worst_labels
from edge_m3.harness.inputs import load_thresholds, retrieval_set
from edge_m3.harness.metrics import compare, gate
from edge_m3.harness.references import compute_references
from edge_m3.harness.report import print_summary, write_report
from edge_m3.harness.workers import load_outputs, run_workers, runtime_job, worker
from edge_m3.runtime.choice import select_runtimes
from edge_m3.runtime.registry import Runtime
from edge_m3.spec import RSS_GATE_MIN_BYTES


@dataclass(frozen=True)
class VerifyOptions:
    """What `edge-m3 verify` was asked for, parsed (edge_m3.cli)."""

    bundle: Path
    reference: str  # hub id or checkpoint directory
    texts_file: Path | None = None  # checked with the built-in retrieval set; a corpus instead of it
    sample: int | None = None  # a corpus's stratified sample of at most this many texts
    seed: int = 0
    report: Path | None = None  # default reports/<bundle name>
    runtimes: tuple[Runtime, ...] = ()  # none: every installed one
    thresholds: Path | None = None  # {variant: limits} instead of the variant's own
    threads: int = 1
    cache: Path | None = None  # reference-output cache; None: always recompute


def _latency(meta: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    return {n: {"p50_ms": 1e3 * float(np.percentile(v, 50)),
                "p95_ms": 1e3 * float(np.percentile(v, 95)), "texts": len(v)}
            for n, v in sorted(meta["latency"].items(), key=lambda kv: int(kv[0]))}


# FlagEmbedding scores pairs one call at a time: on a corpus, the formula check takes the first
# queries and passages only (the built-in set fits whole).
FORMULA_CHECK_PAIRS = (32, 256)


def formula_pairs(sets: Mapping[str, list[int]]) -> dict[str, list[int]]:
    """The query and passage indexes whose scores FlagEmbedding's own functions recompute."""
    nq, np_ = FORMULA_CHECK_PAIRS
    return {"queries": sets["queries"][:nq], "passages": sets["passages"][:np_]}


def _formula_check(refs: Mapping[str, Any], pairs: Mapping[str, list[int]]) -> dict[str, float] | None:
    """Largest difference between our scores and FlagEmbedding's own, on its own outputs."""
    if "flagembedding" not in refs or not refs["flagembedding"][1].get("scores"):
        return None
    from edge_m3.harness.metrics import score_matrices

    outs, meta = refs["flagembedding"]
    ours = score_matrices(outs, pairs["queries"], pairs["passages"])
    return {m: float(np.abs(ours[m] - np.asarray(v)).max(initial=0.0))
            for m, v in meta["scores"].items()}


def _brief(f: Mapping[str, Any]) -> dict[str, Any]:
    """The headline figures of a secondary comparison."""
    out = {k: f[k] for k in ("lexical_abs_err", "colbert_score_abs_err",
                             "retrieval_top10_agreement", "input_ids_match") if k in f}
    if "dense_cosine" in f:
        out["dense_cosine"] = f["dense_cosine"]["all"]
    return out


def memory_gated(runtime: Runtime, model_bytes: int) -> bool:
    """Whether the gate bounds the model's memory: on the runtimes apps ship, for models big
    enough that the runtime's own few MiB do not decide the ratio (spec.RSS_GATE_MIN_BYTES)."""
    return runtime.memory_gated and model_bytes >= RSS_GATE_MIN_BYTES


def _memory(meta: Mapping[str, Any], runtime: Runtime) -> dict[str, Any]:
    """The model's memory as the report shows it (see workers.model_memory)."""
    return {"model_peak_rss_mb": meta["model_peak_rss"] / 1e6, "model_mb": meta["model_bytes"] / 1e6,
            "model_rss_ratio": meta["model_rss_ratio"], "weight_cache": meta["weight_cache"],
            "gated": memory_gated(runtime, meta["model_bytes"])}


def _corpus(opts: VerifyOptions) -> Corpus | None:
    """The corpus `--texts` names (a .jsonl file), sampled when asked; None for a plain file."""
    if opts.texts_file is None or not is_corpus(opts.texts_file):
        if opts.sample is not None:
            raise OptionError("sample", opts.sample, "needs {} FILE.jsonl (a corpus)", ["texts"])
        return None
    corpus = read_corpus(opts.texts_file, "texts")
    if opts.sample is not None:
        corpus = sample(corpus, opts.sample, opts.seed)
    if not corpus.queries or not corpus.passages:
        raise OptionError("texts", opts.texts_file, "the corpus (or its sample) needs both "
                          "queries and passages")
    return corpus


def cmd_verify(opts: VerifyOptions) -> int:
    """The whole `verify` command; 0 when every checked runtime meets every threshold, else 1."""
    from edge_m3.bundle import load_bundle
    from edge_m3.checkpoint import resolve_checkpoint
    from edge_m3.common.progress import progress

    bundle = load_bundle(opts.bundle)  # refuses a bundle whose files do not match the manifest
    quant = bundle.manifest.quant
    limits, limits_source = load_thresholds(opts.thresholds, bundle.manifest.recipe)
    runtimes = select_runtimes(bundle, opts.runtimes)
    corpus = _corpus(opts)
    user = read_texts(opts.texts_file) if opts.texts_file and corpus is None else []
    report_dir = opts.report or Path("reports") / Path(opts.bundle).resolve().name
    check_writable(report_dir, "report")  # before the references, not after
    ckpt_dir, _ = resolve_checkpoint(opts.reference, field="reference")
    labels: list[str] | None = None
    relevant: list[Any]
    if corpus is None:
        rs = retrieval_set()
        queries, passages = [q["text"] for q in rs["queries"]], list(rs["passages"])
        relevant = [int(q["relevant"]) for q in rs["queries"]]
        languages = sorted({q["lang"] for q in rs["queries"]})
    else:
        queries = [r["text"] for r in corpus.queries]
        passages = [r["text"] for r in corpus.passages]
        relevant, languages = corpus.relevant(), corpus.languages()
        labels = [r["lang"] for r in [*corpus.queries, *corpus.passages]]
    texts = [*user, *queries, *passages]
    sets = {"user": list(range(len(user))),
            "queries": list(range(len(user), len(user) + len(queries))),
            "passages": list(range(len(user) + len(queries), len(texts)))}
    pairs = formula_pairs(sets)
    max_length = bundle.manifest.max_length

    # One step for the references, one per runtime (each minutes on a real model).
    steps = progress("verify {task.description}", 1 + len(runtimes))
    with tempfile.TemporaryDirectory(prefix="edge-m3-verify-") as tmp_s, steps:
        step = steps.add_task("references", total=1 + len(runtimes))
        tmp = Path(tmp_s)
        refs = compute_references(Path(ckpt_dir), texts, max_length, tmp, opts.cache, pairs)
        primary = next(iter(refs))  # the checkpoint's primary reference, else keras
        ref_outs = refs[primary][0]
        formulas = _formula_check(refs, pairs)
        results: dict[str, Any] = {}
        for i, rt in enumerate(runtimes):  # one after another, so latencies are not disturbed
            steps.update(step, completed=1 + i, description=f"runtime {rt.name}")
            out = tmp / rt.name
            error = run_workers([worker("bundle", {"bundle": str(bundle.path), **runtime_job(rt),
                                                   "threads": opts.threads, "texts": texts,
                                                   "out": str(out)}, f"runtime {rt.name}")])[0]
            if error:
                results[rt.name] = {"error": error, "failed": [error]}
                continue
            outs, meta = load_outputs(out)
            figures = compare(outs, ref_outs, sets, sets["queries"], sets["passages"], relevant,
                              labels)
            for w in figures["worst"].values():  # the texts themselves, for a reader of the report
                i = w.get("query", w.get("text"))
                w["snippet"] = texts[i][:80] if i is not None else ""
            if labels is not None:
                figures["worse_languages"] = worst_labels(figures["per_language"], limits)
            if primary != "keras":
                figures["vs_keras"] = _brief(compare(outs, refs["keras"][0], sets,
                                                     sets["queries"], sets["passages"]))
            figures.update(version=meta["version"], file=meta["file"], latency=_latency(meta),
                           load_s=meta["load_s"], import_s=meta["import_s"],
                           warmup_s=meta["warmup_s"],
                           first_call_ms={n: 1e3 * v for n, v in meta["first_call"].items()},
                           peak_rss_mb=meta["peak_rss"] / 1e6,
                           rss_before_load_mb=meta["rss_before_load"] / 1e6,
                           memory=_memory(meta, rt))
            if memory_gated(rt, meta["model_bytes"]):
                figures["model_rss_ratio"] = meta["model_rss_ratio"]
            figures["failed"] = gate(figures, limits)
            results[rt.name] = figures
        keras_vs_primary = None
        if primary != "keras":
            keras_vs_primary = _brief(compare(refs["keras"][0], ref_outs, sets, sets["queries"],
                                              sets["passages"]))
    report = {
        "bundle": str(bundle.path), "quant": quant, "threads": opts.threads,
        "source": bundle.manifest.source.get("id"),
        "reference_checkpoint": str(opts.reference),
        "primary_reference": primary,
        "references": {name: {k: meta[k] for k in ("runtime", "version", "load_s", "cached")}
                       | {"peak_rss_mb": meta["peak_rss"] / 1e6} for name, (_, meta) in refs.items()},
        "keras_vs_flagembedding": keras_vs_primary if primary == "flagembedding" else None,
        "keras_vs_reference": keras_vs_primary,
        "score_formulas_vs_flagembedding": formulas,
        "texts": {"total": len(texts), "user": len(user), "queries": len(queries),
                  "passages": len(passages), "max_length": max_length, "languages": languages,
                  "corpus": None if corpus is None else {
                      "file": str(opts.texts_file), "sample": opts.sample, "seed": opts.seed,
                      "scripts": sorted({str(r.get("script", "")) for r in corpus.records})}},
        "thresholds": {"file": limits_source, "variant": quant, "limits": limits},
        "runtimes_checked": [rt.name for rt in runtimes],
        "runtimes": results,
        "passed": bool(results) and all(not r["failed"] for r in results.values()),
    }
    write_report(report_dir, report)
    print_summary(report, report_dir)
    return 0 if report["passed"] else 1



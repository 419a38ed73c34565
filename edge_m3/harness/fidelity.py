"""Fidelity on a corpus of real text (issue 26): the corpus file `verify --texts` reads, its
stratified sample, and the figures per language and per length.

Why per language: a variant can hold the gate on the whole corpus and fail one script (a
table quantized too coarsely for Thai's rows, say); the worst language is the figure a recipe
is chosen by. The corpus itself is made by `tools/inputs/make_fidelity_corpus.py` from Debian's
translated manual pages and gettext catalogues; a small stratified sample of it is committed as
`edge_m3/data/fidelity_sample.jsonl` (what the tests verify on, with no apt).
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.contract import LEXICAL_WEIGHTS
from edge_m3.errors import OptionError

KINDS = ("query", "passage")
CORPUS_SUFFIX = ".jsonl"
SAMPLE_FILE = "data/fidelity_sample.jsonl"
# Token-length buckets of the per-length figures (upper bounds; the last holds truncated texts).
LENGTH_BUCKETS = (16, 32, 64, 128, 256, 512)


def default_corpus() -> Path:
    """Where tools/inputs/make_fidelity_corpus.py writes the corpus (outside git: ~1.6 MB)."""
    from edge_m3.harness.references import default_cache_dir

    return default_cache_dir() / "fidelity" / "corpus.jsonl"


@dataclass(frozen=True)
class Corpus:
    """Queries and passages with a language each; `group` ties queries to their passages."""

    records: tuple[Mapping[str, Any], ...]

    @property
    def queries(self) -> list[Mapping[str, Any]]:
        return [r for r in self.records if r["kind"] == "query"]

    @property
    def passages(self) -> list[Mapping[str, Any]]:
        return [r for r in self.records if r["kind"] == "passage"]

    def relevant(self) -> list[list[int]]:
        """Per query, the positions (in `passages`) of its group's passages."""
        by_group: dict[str, list[int]] = defaultdict(list)
        for j, p in enumerate(self.passages):
            by_group[p["group"]].append(j)
        return [by_group.get(q["group"], []) for q in self.queries]

    def languages(self) -> list[str]:
        return sorted({r["lang"] for r in self.records})


def is_corpus(path: Path) -> bool:
    """A `--texts` file is a corpus when it is JSON lines (else one text per line)."""
    return Path(path).suffix == CORPUS_SUFFIX


def read_corpus(path: Path, field: str = "texts") -> Corpus:
    """The corpus file (option `field`): one JSON object a line with `text`, `kind` (query or
    passage), `lang` and `group`; a bad line is one error naming the file and line."""
    try:
        lines = Path(path).read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise OptionError(field, path, f"unreadable ({exc})") from None
    records = tuple(_record(line, n, path, field) for n, line in enumerate(lines, 1) if line.strip())
    if not records:
        raise OptionError(field, path, "no text in the corpus (one JSON object a line)")
    return Corpus(records)


def _record(line: str, n: int, path: Path, field: str) -> Mapping[str, Any]:
    try:
        r = json.loads(line)
    except ValueError as exc:
        raise OptionError(field, path, f"line {n}: not JSON ({exc})") from None
    if not isinstance(r, dict):
        raise OptionError(field, path, f"line {n}: not a JSON object")
    for key in ("text", "lang", "group"):
        if not isinstance(r.get(key), str) or not r[key]:
            raise OptionError(field, path, f"line {n}: '{key}' must be a non-empty string")
    if r.get("kind") not in KINDS:
        raise OptionError(field, path, f"line {n}: 'kind' must be query or passage")
    if "\x00" in r["text"]:
        raise OptionError(field, path, f"line {n}: text holds a NUL character")
    return r


def bundled_sample() -> Corpus:
    """The committed stratified sample (edge_m3/data/fidelity_sample.jsonl)."""
    path = resources.files("edge_m3").joinpath(SAMPLE_FILE)
    return Corpus(tuple(json.loads(line) for line in path.read_text("utf-8").splitlines() if line))


def sample(corpus: Corpus, n: int, seed: int) -> Corpus:
    """At most `n` texts in whole groups, languages taking turns (each language's groups in a
    seeded order), so every language and both kinds stay in even a small sample."""
    groups: dict[str, dict[str, list[Mapping[str, Any]]]] = defaultdict(dict)
    for r in corpus.records:
        groups[r["lang"]].setdefault(r["group"], []).append(r)
    order = {lang: random.Random(f"{seed}:{lang}").sample(sorted(g), len(g))
             for lang, g in groups.items()}
    keep: set[str] = set()
    total, open_langs = 0, sorted(order)
    while open_langs:
        for lang in list(open_langs):
            if not order[lang]:
                open_langs.remove(lang)
                continue
            g = order[lang].pop(0)
            size = len(groups[lang][g])
            if total + size > n:
                open_langs.remove(lang)
                continue
            keep.add(g)
            total += size
    return Corpus(tuple(r for r in corpus.records if r["group"] in keep))


# --------------------------------------------------------------------------- figures


def _stats(values: Sequence[float]) -> dict[str, float]:
    v = np.asarray(values, np.float64)
    return {"min": float(v.min()), "p1": float(np.percentile(v, 1)), "mean": float(v.mean()),
            "texts": int(len(v))} if len(v) else {}


def per_label(figures: Mapping[str, Any], labels: Sequence[str], ours: Sequence[Mapping[str, Any]],
              ref: Sequence[Mapping[str, Any]], queries: Sequence[int],
              mats: tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]]) -> dict[str, Any]:
    """Per label (a language): dense cosine min/p1/mean of its texts, the largest lexical
    weight error of its texts, ColBERT score error and top-10 agreement of its queries (against
    every passage)."""
    from edge_m3.harness.metrics import lexical_abs_err, topk_agreement

    cos = figures.get("dense_cosine", {}).get("per_text")
    mo, mr = mats
    q_rows: dict[str, list[int]] = defaultdict(list)
    for row, i in enumerate(queries):
        q_rows[labels[i]].append(row)
    out: dict[str, Any] = {}
    for label in sorted(set(labels)):
        idx = [i for i, lab in enumerate(labels) if lab == label]
        f: dict[str, Any] = {"texts": len(idx), "queries": len(q_rows[label])}
        if cos is not None:
            f["dense_cosine"] = _stats([cos[i] for i in idx])
        if "lexical_abs_err" in figures:
            f["lexical_abs_err"] = max(lexical_abs_err(ours[i][LEXICAL_WEIGHTS],
                                                       ref[i][LEXICAL_WEIGHTS]) for i in idx)
        rows = q_rows[label]
        if rows and "colbert" in mo:
            f["colbert_score_abs_err"] = float(np.abs(mo["colbert"][rows] - mr["colbert"][rows]).max())
        if rows and mo:
            agree = {m: topk_agreement(mo[m][rows], mr[m][rows]) for m in mo}
            f["retrieval_top10_agreement"] = {**agree, "min": min(agree.values())}
        out[label] = f
    return out


def per_length(figures: Mapping[str, Any], ref: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Dense cosine by the reference's token count, in LENGTH_BUCKETS (<= each bound)."""
    cos = figures.get("dense_cosine", {}).get("per_text")
    if cos is None:
        return {}
    buckets: dict[int, list[float]] = defaultdict(list)
    for c, r in zip(cos, ref, strict=True):
        n = len(r["input_ids"])
        buckets[next((b for b in LENGTH_BUCKETS if n <= b), LENGTH_BUCKETS[-1])].append(c)
    return {str(b): _stats(buckets[b]) for b in LENGTH_BUCKETS if buckets[b]}


def worst_labels(per: Mapping[str, Any], limits: Mapping[str, float]) -> list[str]:
    """The labels whose own figures miss a limit of the gate (dense cosine, lexical and ColBERT
    error, retrieval agreement), as readable lines: where a language is worse."""
    checks = (("dense_cosine_min", ("dense_cosine", "min"), "min"),
              ("lexical_abs_err_max", ("lexical_abs_err",), "max"),
              ("colbert_score_abs_err_max", ("colbert_score_abs_err",), "max"),
              ("retrieval_top10_agreement_min", ("retrieval_top10_agreement", "min"), "min"))
    lines = []
    for label, f in per.items():
        for key, path, bound in checks:
            if key not in limits:
                continue
            value: Any = f
            for part in path:
                value = value.get(part) if isinstance(value, Mapping) else None
            if value is None:
                continue
            if (bound == "min" and value < limits[key]) or (bound == "max" and value > limits[key]):
                lines.append(f"{label}: {path[0]} {value:.4g}")
    return lines

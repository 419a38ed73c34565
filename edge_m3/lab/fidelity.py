"""Fidelity on a corpus of real text (issue 26): the corpus file `verify --texts` reads, its
stratified sample, and the languages whose own figures (metrics.per_label) miss a bound.

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
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from edge_m3.errors import OptionError

KINDS = ("query", "passage")
CORPUS_SUFFIX = ".jsonl"
SAMPLE_FILE = "data/fidelity_sample.jsonl"


def default_corpus() -> Path:
    """Where tools/inputs/make_fidelity_corpus.py writes the corpus (outside git: ~1.6 MB)."""
    from edge_m3.lab.references import default_cache_dir

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
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past Python's stack
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
    lines = path.read_text("utf-8").splitlines()
    return Corpus(tuple(_record(line, n, Path(str(path)), "texts") for n, line in enumerate(lines, 1)
                        if line.strip()))


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
# (per language and per length: edge_m3.lab.metrics, `per_label` and `per_length`)


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

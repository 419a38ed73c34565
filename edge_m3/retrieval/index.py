"""An index of embedded passages: `add`, `search(query, k, mode)`, and the folder apps ship.

Search returns exactly the hits docs/index-format.md defines (spec/scoring.py's scores, ties by row),
so the kits return the same ones. Fast float32 passes (BLAS) only *select* rows, within a proven
error bound of the exact scores; the returned scores are always the exact sequential ones.
Saved indexes are memory-mapped back (no copy) after every file's sha256 is checked.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3 import __version__
from edge_m3.common.files import atomic_dir, file_entries, sha256_file
from edge_m3.errors import EdgeM3Error, OptionError, one_line
from edge_m3.retrieval.scores import _U32, _U64, colbert_score, seq_dots
from edge_m3.spec import (
    COLBERT_STORES,
    COLBERT_VECS,
    DENSE_STORES,
    DENSE_VECS,
    HYBRID_CANDIDATES,
    INDEX_ARRAYS,
    INDEX_BUNDLE_KEYS,
    INDEX_DTYPES,
    INDEX_FORMAT,
    INDEX_FORMAT_VERSION,
    INDEX_IDS,
    INDEX_MANIFEST,
    INDEX_POSTING_WEIGHTS,
    LEXICAL_WEIGHTS,
    MANIFEST,
    hybrid_score,
    mode_signals,
    mode_weights,
)
from edge_m3.spec.index import (
    INDEX_ARRAY_RULES,
    INDEX_FINITE,
    INDEX_ID_MAX,
    INDEX_ID_MIN,
    INDEX_MANIFEST_FIELDS,
    INDEX_POSITIVE,
    array_dtypes,
    manifest_want,
)

PassageId = int | str
_PW = INDEX_POSTING_WEIGHTS  # the postings' weights array


class CorruptIndexError(EdgeM3Error):
    """An index's files refused for their contents (spec.KIT_ERROR_KINDS' corrupt_index): a file
    missing, malformed, or not what index.json says (or a writable index's database refused): build
    or download the index again. A caller's mistake (a bad query, another bundle) is not one."""

    kind = "corrupt_index"


@dataclass(frozen=True)
class Hit:
    """One search result: the row in the index, its passage's id, its exact score, and which
    chunk of the passage the row is (0 for a passage of one chunk)."""

    row: int
    id: PassageId
    score: float
    chunk: int = 0


def chunk_numbers(ids: Sequence[PassageId]) -> tuple[np.ndarray, int]:
    """Each row's chunk number (rows sharing an id are one passage's chunks, in row order) and
    the most chunks of one passage (docs/index-format.md, "Passages and chunks")."""
    seen: dict[PassageId, int] = {}
    out = np.zeros(len(ids), np.int64)
    for r, pid in enumerate(ids):
        out[r] = seen[pid] = seen.get(pid, -1) + 1
    return out, (max(seen.values()) + 1 if seen else 0)


def best_per_passage(hits: Iterable[Hit], k: int) -> list[Hit]:
    """The first (best) hit of each id, the first k of them: a passage ranked by its best chunk."""
    out: list[Hit] = []
    seen: set[PassageId] = set()
    for h in hits:
        if h.id not in seen:
            seen.add(h.id)
            out.append(h)
            if len(out) == k:
                break
    return out


@dataclass(frozen=True)
class BundleIdentity:
    """The model that embedded an index's passages: queries must come from the same one."""

    model_file: str
    model_sha256: str
    tokenizer_file: str
    tokenizer_sha256: str
    quant: str = ""
    path: str = ""  # where the bundle was at build time (informational)

    @classmethod
    def of(cls, bundle: Any, fmt: str | None = None) -> BundleIdentity:
        """The identity of a loaded bundle's model file of `fmt` (its first one when None)."""
        entry = bundle.model_entry(fmt)
        files = bundle.manifest.files
        tok = bundle.manifest.tokenizer.file
        return cls(entry.file, files.get(entry.file, {}).get("sha256", ""), tok,
                   files.get(tok, {}).get("sha256", ""), bundle.manifest.quant,
                   str(Path(bundle.path).resolve()))

    def to_json(self) -> dict[str, str]:
        return {"model_file": self.model_file, "model_sha256": self.model_sha256,
                "tokenizer_file": self.tokenizer_file, "tokenizer_sha256": self.tokenizer_sha256,
                "quant": self.quant, "path": self.path}

    @classmethod
    def from_json(cls, d: Any, where: str) -> BundleIdentity:
        if not isinstance(d, dict) or not all(isinstance(d.get(k), str) for k in INDEX_BUNDLE_KEYS):
            raise CorruptIndexError(f"{where}: bundle: needs {', '.join(INDEX_BUNDLE_KEYS)} (strings)")
        return cls(d["model_file"], d["model_sha256"], d["tokenizer_file"], d["tokenizer_sha256"],
                   str(d.get("quant", "")), str(d.get("path", "")))

    def check(self, bundle: Any, where: str) -> None:
        """Refuse (one line) a bundle whose manifest lacks this model or tokenizer file."""
        files = bundle.manifest.files
        for name, sha in ((self.model_file, self.model_sha256), (self.tokenizer_file, self.tokenizer_sha256)):
            if files.get(name, {}).get("sha256") != sha:
                raise EdgeM3Error(f"{where}: built by another bundle ({name} sha256 {sha[:12]}..., "
                                  f"{Path(bundle.path) / MANIFEST} has "
                                  f"{str(files.get(name, {}).get('sha256', 'no such file'))[:12]}...); "
                                  "rebuild the index with this bundle or give the index's bundle")


def search_args(k: Any, mode: str, weights: Sequence[float] | None,
                has_colbert: bool) -> tuple[tuple[str, ...], tuple[float, float, float]]:
    """A search's arguments checked (one line each): the mode's signals and the weights."""
    signals = mode_signals(mode)
    w = mode_weights(weights)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise OptionError("k", k, "must be an integer >= 1")
    if "colbert" in signals and not has_colbert:
        raise OptionError("mode", mode, "needs ColBERT vectors; this index was built without them "
                          "(colbert none)")
    return signals, w


def _quantize_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 codes and float32 per-row scales: scale = max|x| / 127 (1.0 for a zero row),
    code = round-half-even(x / scale) (docs/index-format.md)."""
    x = np.asarray(x, np.float32)
    peak = np.abs(x).max(axis=1) if x.size else np.zeros(len(x), np.float32)
    scale = np.where(peak > 0, peak / np.float32(127), np.float32(1)).astype(np.float32)
    codes = np.clip(np.rint(x / scale[:, None]), -127, 127).astype(np.int8)
    return codes, scale


def as_query(query: Mapping[str, Any], signals: Sequence[str]) -> dict[str, Any]:
    names = {"dense": DENSE_VECS, "sparse": LEXICAL_WEIGHTS, "colbert": COLBERT_VECS}
    missing = [names[s] for s in signals if names[s] not in query]
    if missing:
        raise EdgeM3Error(f"the query lacks {', '.join(missing)} (the bundle does not export that head)")
    return dict(query)


class Index:
    """Passages' dense vectors, lexical weights (an inverted index) and, optionally, ColBERT vectors.

    `dense`: "float32" or "int8" (per-row scale); `colbert`: "fp16", "int8" (per-vector scale)
    or "none". `add` takes pipeline outputs (DevicePipeline.embed); `save`/`load` the folder.
    """

    def __init__(self, dim: int, dense: str = "float32", colbert: str = "fp16",
                 bundle: BundleIdentity | None = None) -> None:
        if dense not in DENSE_STORES:
            raise OptionError("dense", dense, f"unknown (choose from {', '.join(DENSE_STORES)})")
        if colbert not in COLBERT_STORES:
            raise OptionError("colbert", colbert, f"unknown (choose from {', '.join(COLBERT_STORES)})")
        self.dim, self.dense_store, self.colbert_store, self.bundle = int(dim), dense, colbert, bundle
        self.ids: list[PassageId] = []
        self.arrays: dict[str, np.ndarray] = {}
        self._pending: list[tuple[np.ndarray, dict[int, float], np.ndarray | None]] = []
        self._norms: dict[str, np.ndarray] = {}
        self._chunks: tuple[np.ndarray, int] | None = None
        self.path: Path | None = None
        self.freeze()

    def __len__(self) -> int:
        """Rows (a chunked passage has several; `passages` counts ids)."""
        return len(self.ids)

    @property
    def passages(self) -> int:
        """The number of passages (distinct ids)."""
        return len(set(self.ids)) if self.chunk_counts()[1] > 1 else len(self.ids)

    def chunk_counts(self) -> tuple[np.ndarray, int]:
        """Each row's chunk number and the most chunks of one passage (chunk_numbers), cached."""
        if self._chunks is None:
            self._chunks = chunk_numbers(self.ids)
        return self._chunks

    @property
    def has_colbert(self) -> bool:
        return self.colbert_store != "none"

    @classmethod
    def from_arrays(cls, dim: int, dense: str, colbert: str, arrays: Mapping[str, np.ndarray],
                    ids: Sequence[PassageId], bundle: BundleIdentity | None = None) -> Index:
        """An index over arrays already in the folder's layout (a bulk build, a benchmark);
        they are checked against each other as a loaded index's are."""
        idx = cls(dim, dense, colbert, bundle)
        idx.ids, idx.arrays = list(ids), {k: v for k, v in arrays.items() if k in INDEX_ARRAYS}
        idx._chunks = None
        _check_layout(idx, "arrays")
        return idx

    # ------------------------------------------------------------------ building

    def add(self, outputs: Iterable[Mapping[str, Any]], ids: Iterable[PassageId] | None = None) -> None:
        """Append passages (pipeline outputs); `ids` default to their row numbers."""
        outputs = list(outputs)
        ids = list(ids) if ids is not None else list(range(len(self.ids), len(self.ids) + len(outputs)))
        if len(ids) != len(outputs):
            raise EdgeM3Error(f"{len(ids)} ids for {len(outputs)} passages")
        for out in outputs:
            dense = np.asarray(out[DENSE_VECS], np.float32)
            if dense.shape != (self.dim,) or not np.isfinite(dense).all():
                raise EdgeM3Error(f"dense vector of shape {dense.shape} (want ({self.dim},), finite)")
            # a dense-only bundle's passages have no lexical weights (no postings)
            lex = {int(k): float(np.float32(v)) for k, v in out.get(LEXICAL_WEIGHTS, {}).items()}
            if any(not (w > 0 and np.isfinite(w)) for w in lex.values()):
                raise EdgeM3Error("lexical weights must be finite and > 0 (non-positive ones are dropped "
                                  "by post-processing)")
            col = None
            if self.has_colbert:
                col = np.asarray(out[COLBERT_VECS], np.float32).reshape(-1, self.dim)
                if not np.isfinite(col).all():
                    raise EdgeM3Error("ColBERT vectors must be finite")
            self._pending.append((dense, lex, col))
        self.ids.extend(ids)
        self._chunks = None

    def freeze(self) -> None:
        """Fold pending passages into the arrays (docs/index-format.md's layout); stored rows keep
        their codes (an int8 row is never quantized twice)."""
        if not self._pending and self.arrays:
            return
        a, new = self.arrays, self._pending
        old_n = len(self.ids) - len(new)
        dense = np.stack([p[0] for p in new]) if new else np.zeros((0, self.dim), np.float32)
        out: dict[str, np.ndarray] = {}
        if self.dense_store == "int8":
            codes, scale = _quantize_rows(dense)
            out["dense"] = _cat(a.get("dense"), codes)
            out["dense_scale"] = _cat(a.get("dense_scale"), scale)
        else:
            out["dense"] = _cat(a.get("dense"), dense)
        # postings: the stored (token, row, weight) triples plus the new ones, sorted by token, row
        tok_new = np.array([t for p in new for t in p[1]], np.int64)
        row_new = np.array([old_n + i for i, p in enumerate(new) for _ in p[1]], np.int64)
        w_new = np.array([w for p in new for w in p[1].values()], np.float32)
        if a:
            lengths = np.diff(np.asarray(a["sparse_offsets"]))
            tok = np.concatenate([np.repeat(np.asarray(a["sparse_tokens"], np.int64), lengths), tok_new])
            row = np.concatenate([np.asarray(a["sparse_rows"], np.int64), row_new])
            w = np.concatenate([np.asarray(a[_PW]), w_new])
        else:
            tok, row, w = tok_new, row_new, w_new
        postings(out, tok, row, w)
        if self.has_colbert:
            cols = [p[2] for p in new]
            counts = np.array([len(c) for c in cols], np.int64)
            base = int(a["colbert_offsets"][-1]) if a else 0
            out["colbert_offsets"] = _cat(a.get("colbert_offsets", np.zeros(1, np.int64))[:-1] if a else None,
                                          base + np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
            vecs = np.concatenate(cols).astype(np.float32) if cols else np.zeros((0, self.dim), np.float32)
            if self.colbert_store == "int8":
                codes, scale = _quantize_rows(vecs)
                out["colbert"] = _cat(a.get("colbert"), codes)
                out["colbert_scale"] = _cat(a.get("colbert_scale"), scale)
            else:
                out["colbert"] = _cat(a.get("colbert"), vecs.astype(np.float16))
        self.arrays, self._pending, self._norms = out, [], {}

    # ------------------------------------------------------------------ exact scores

    def _stored(self, name: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Rows of a stored matrix widened to float64 exactly, and their scales (int8 only)."""
        x = np.asarray(self.arrays[name][rows]).astype(np.float64)
        scale = self.arrays.get(f"{name}_scale")
        return x, None if scale is None else np.asarray(scale[rows]).astype(np.float64)

    def dense_exact(self, q: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """dense(q, row) for `rows`, by the contract's arithmetic."""
        x, scale = self._stored("dense", rows)
        s = seq_dots(x, q[None, :]) if len(rows) else np.zeros(0)
        return s if scale is None else s * scale

    def _norm(self, name: str) -> np.ndarray:
        """Each stored vector's float64 norm times its scale (cached): the error bounds' factor."""
        if name not in self._norms:
            out, x = [], self.arrays[name]
            for start in range(0, len(x), 1 << 15):
                out.append(np.linalg.norm(np.asarray(x[start:start + (1 << 15)]).astype(np.float64), axis=1))
            norm = np.concatenate(out) if out else np.zeros(0)
            if f"{name}_scale" in self.arrays:
                norm = norm * np.asarray(self.arrays[f"{name}_scale"]).astype(np.float64)
            self._norms[name] = norm * (1 + 1e-9)
        return self._norms[name]

    def _dense_fast(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every row's dense score by a float32 BLAS pass, and a bound on its distance to the exact one."""
        q32 = q.astype(np.float32)
        x, n = self.arrays["dense"], len(self.ids)
        fast = np.empty(n)
        for start in range(0, n, 1 << 14):
            block = _as_f32(x[start:start + (1 << 14)])
            fast[start:start + len(block)] = block @ q32
        if "dense_scale" in self.arrays:
            fast *= np.asarray(self.arrays["dense_scale"])
        gamma = 2 * (self.dim + 2) * _U32 / (1 - (self.dim + 2) * _U32)
        margin = gamma * float(np.linalg.norm(q)) * self._norm("dense") + 4 * _U32 * np.abs(fast) + 1e-300
        return fast, margin

    def sparse_exact(self, lex: Mapping[Any, float],
                     dead: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """sparse(q, row) for every row (0.0 for rows sharing no token) and the touched rows
        (but the `dead` ones)."""
        acc = np.zeros(len(self.ids))
        touched = np.zeros(len(self.ids), bool)
        a = self.arrays
        tokens, off = a["sparse_tokens"], a["sparse_offsets"]
        q = {int(t): float(np.float32(v)) for t, v in lex.items()}
        for tok in sorted(q):  # ascending id: each row's sum in the contract's order
            at = int(np.searchsorted(tokens, tok))
            if at == len(tokens) or int(tokens[at]) != tok:
                continue
            rows = np.asarray(a["sparse_rows"][off[at]:off[at + 1]])
            w = np.asarray(a[_PW][off[at]:off[at + 1]]).astype(np.float64)
            acc[rows] = acc[rows] + q[tok] * w
            touched[rows] = True
        if dead is not None:
            touched &= ~dead
        return acc, np.nonzero(touched)[0]

    def colbert_exact(self, q: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """colbert(Q, row) for `rows`, by the contract's arithmetic."""
        co, scale = self.arrays["colbert_offsets"], self.arrays.get("colbert_scale")
        out = np.empty(len(rows))
        for i, r in enumerate(rows):
            lo, hi = int(co[r]), int(co[r + 1])
            vecs = np.asarray(self.arrays["colbert"][lo:hi])
            out[i] = colbert_score(q, vecs, None if scale is None else np.asarray(scale[lo:hi]))
        return out

    def colbert_fast(self, q: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """colbert(Q, row) for `rows` by float32 BLAS, and a bound on the distance to the exact one."""
        co, nq = self.arrays["colbert_offsets"], len(q)
        fast, margin = np.zeros(len(rows)), np.zeros(len(rows))
        if nq == 0 or not len(rows):
            return fast, margin
        q32 = q.astype(np.float32)
        qn = np.linalg.norm(q, axis=1)[:, None]
        gamma = 2 * (self.dim + 2) * _U32 / (1 - (self.dim + 2) * _U32)
        norms, scale = self._norm("colbert"), self.arrays.get("colbert_scale")
        lo_all, hi_all = np.asarray(co[rows]), np.asarray(co[rows + 1])
        budget = 1 << 16  # vectors per BLAS block
        ends = np.cumsum(hi_all - lo_all)
        start = 0
        while start < len(rows):
            stop = max(int(np.searchsorted(ends, (ends[start - 1] if start else 0) + budget, "right")),
                       start + 1)
            lo, hi = lo_all[start:stop], hi_all[start:stop]
            lengths = hi - lo
            total = int(lengths.sum())
            if total:
                if lo[-1] - lo[0] == total - lengths[-1]:  # consecutive rows: one slice
                    idx = slice(int(lo[0]), int(hi[-1]))
                    v = _as_f32(self.arrays["colbert"][idx])
                else:
                    first = np.cumsum(lengths) - lengths
                    idx = np.arange(total) - np.repeat(first - lo, lengths)
                    v = _as_f32(np.asarray(self.arrays["colbert"])[idx])
                s = (q32 @ v.T).astype(np.float64)
                if scale is not None:
                    s *= np.asarray(scale[idx])
                m = gamma * qn * norms[idx][None, :] + 4 * _U32 * np.abs(s)
                nonempty = lengths > 0
                starts = (np.cumsum(lengths) - lengths)[nonempty]
                best = np.maximum.reduceat(s, starts, axis=1)
                worst = np.maximum.reduceat(m, starts, axis=1)
                sel = np.arange(start, stop)[nonempty]
                fast[sel] = best.sum(axis=0) / nq
                margin[sel] = worst.sum(axis=0) / nq + 1e-12 * np.abs(best).sum(axis=0) / nq
            start = stop
        return fast, margin

    # ------------------------------------------------------------------ search

    def search(self, query: Mapping[str, Any], k: int = 10, mode: str = "dense",
               weights: Sequence[float] | None = None, exclude: np.ndarray | None = None,
               chunks: bool = False) -> list[Hit]:
        """The best `k` passages for `query` (pipeline outputs) by `mode`, each by its best chunk;
        `chunks`: the best `k` rows instead (docs/index-format.md, "Search" and "Passages and
        chunks"). `exclude`: a boolean mask of rows to leave out (a writable index's removed
        rows), as if they were not there."""
        search_args(k, mode, weights, self.has_colbert)
        numbers, most = self.chunk_counts()
        if chunks or most <= 1:
            return self._row_search(query, k, mode, weights, exclude)
        if exclude is not None and np.shape(exclude) == (len(self.ids),) and np.any(exclude):
            most = chunk_numbers([p for p, x in zip(self.ids, exclude, strict=True) if not x])[1]
        return best_per_passage(self._row_search(query, k * max(most, 1), mode, weights, exclude), k)

    def _row_search(self, query: Mapping[str, Any], k: int, mode: str,
                    weights: Sequence[float] | None, exclude: np.ndarray | None) -> list[Hit]:
        """The best `k` rows (docs/index-format.md, "Search")."""
        signals, w = search_args(k, mode, weights, self.has_colbert)
        query = as_query(query, signals)
        self.freeze()
        n = len(self.ids)
        dead = None if exclude is None or not np.any(exclude) else np.asarray(exclude, bool)
        if dead is not None and dead.shape != (n,):
            raise EdgeM3Error(f"exclude: a mask of {dead.shape} for {n} rows")
        if n == 0 or (dead is not None and dead.all()):
            return []
        qd = np.asarray(query[DENSE_VECS], np.float32).astype(np.float64) if "dense" in signals else None
        if qd is not None and qd.shape != (self.dim,):
            raise EdgeM3Error(f"query dense vector of shape {qd.shape}, the index's is ({self.dim},)")
        qc = None
        if "colbert" in signals:
            qc = np.asarray(query[COLBERT_VECS], np.float32).reshape(-1, self.dim).astype(np.float64)
        if mode == "dense":
            rows, scores = self._dense_top(qd, k, dead)
        elif mode == "sparse":
            acc, touched = self.sparse_exact(query[LEXICAL_WEIGHTS], dead)
            rows, scores = top_of(touched, acc[touched], k)
        elif mode == "colbert":
            alive = np.arange(n) if dead is None else np.nonzero(~dead)[0]
            fast, margin = self.colbert_fast(qc, alive)
            sel, scores = _exact_top(fast, margin, k, lambda sel: self.colbert_exact(qc, alive[sel]))
            rows = alive[sel]
        else:
            rows, scores = self._hybrid(mode, query, qd, qc, k, w, dead)
        numbers = self.chunk_counts()[0]
        return [Hit(int(r), self.ids[int(r)], float(s), int(numbers[int(r)]))
                for r, s in zip(rows, scores, strict=True)]

    def _dense_top(self, q: np.ndarray, k: int,
                   dead: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        fast, margin = self._dense_fast(q)
        if dead is not None:  # never selected: below every live row's bound
            fast[dead], margin[dead] = -np.inf, 0.0
            k = min(k, int((~dead).sum()))
        return _exact_top(fast, margin, k, lambda rows: self.dense_exact(q, rows))

    def _hybrid(self, mode: str, query: Mapping[str, Any], qd: np.ndarray, qc: np.ndarray | None, k: int,
                w: tuple[float, float, float], dead: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        c = max(k, HYBRID_CANDIDATES)
        dense_rows, _ = self._dense_top(qd, c, dead)
        acc, touched = self.sparse_exact(query[LEXICAL_WEIGHTS], dead)
        sparse_rows, _ = top_of(touched, acc[touched], c)
        cand = np.union1d(dense_rows, sparse_rows).astype(np.int64)
        d, s = self.dense_exact(qd, cand), acc[cand]
        sel, scores = hybrid_top(mode, d, s, qc is not None, lambda sel: self.colbert_fast(qc, cand[sel]),
                                  lambda sel: self.colbert_exact(qc, cand[sel]), k, w)
        return cand[sel], scores

    # ------------------------------------------------------------------ the folder

    def save(self, out: Path) -> Path:
        """Write the index folder atomically (docs/index-format.md): a reader never sees half of it."""
        self.freeze()
        with atomic_dir(Path(out)) as tmp:
            arrays = {}
            for name, arr in self.arrays.items():
                dtype = arr.dtype.name  # float32, float16, int8, int32 or int64
                np.ascontiguousarray(arr, dtype=INDEX_DTYPES[dtype]).tofile(tmp / INDEX_ARRAYS[name])
                arrays[name] = {"file": INDEX_ARRAYS[name], "dtype": dtype, "shape": list(arr.shape)}
            (tmp / INDEX_IDS).write_text(json.dumps(self.ids, ensure_ascii=False), encoding="utf-8")
            names = [INDEX_IDS] + [v["file"] for v in arrays.values()]
            manifest = {"format": INDEX_FORMAT, "format_version": INDEX_FORMAT_VERSION,
                        "edge_m3_version": __version__,
                        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "bundle": self.bundle.to_json() if self.bundle else None,
                        "count": len(self.ids), "dim": self.dim, "dense": self.dense_store,
                        "colbert": self.colbert_store, "arrays": arrays,
                        "files": file_entries(tmp, names)}
            (tmp / INDEX_MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        return Path(out)

    @classmethod
    def load(cls, path: Path, bundle: Any = None, verify: bool = True) -> Index:
        """Memory-map a saved index; refuse (CorruptIndexError, one line) a corrupt one, and with
        `bundle` (a loaded Bundle) one built by another model (EdgeM3Error). A file that goes
        while it is read (another process's compaction deleting the base) is one line too."""
        try:
            return cls._load(Path(path), bundle, verify)
        except OSError as exc:
            raise CorruptIndexError(f"{path}: unreadable ({one_line(exc)})") from None

    @classmethod
    def _load(cls, path: Path, bundle: Any, verify: bool) -> Index:
        m = read_manifest(path)
        where = str(path)
        ident = BundleIdentity.from_json(m["bundle"], where) if m.get("bundle") is not None else None
        if bundle is not None:
            if ident is None:
                raise EdgeM3Error(f"{where}: records no bundle, so queries cannot be checked against it")
            ident.check(bundle, where)
        _check_files(path, m["files"], verify)
        idx = cls.__new__(cls)
        idx.dim, idx.dense_store, idx.colbert_store, idx.bundle = m["dim"], m["dense"], m["colbert"], ident
        idx._pending, idx._norms, idx.path, idx._chunks = [], {}, path, None
        idx.ids = _read_ids(path, m["count"])
        idx.arrays = {name: _map_array(path, spec) for name, spec in m["arrays"].items()}
        _check_layout(idx, where)
        # float32 dense and fp16 ColBERT values finite: checked with the sha256 (which reads every
        # byte anyway); an index opened unverified is trusted to hold what Index.add writes
        floats = [x for x in INDEX_FINITE if x in idx.arrays and idx.arrays[x].dtype != np.int8]
        if verify and not all(_finite(idx.arrays[x]) for x in floats):
            raise CorruptIndexError(f"{where}: a stored vector is not finite; refusing a corrupt index")
        return idx


def _check_files(path: Path, files: Mapping[str, Any], verify: bool) -> None:
    """Every file index.json lists: a plain name, there, of its size and (`verify`) its sha256."""
    for name, entry in files.items():
        f = path / name
        if Path(name).name != name:
            raise CorruptIndexError(f"{path / INDEX_MANIFEST}: file name {name!r} is not a plain name")
        if not f.is_file():
            raise CorruptIndexError(f"{f}: listed in {INDEX_MANIFEST} but missing")
        if f.stat().st_size != entry["size"] or (verify and sha256_file(f) != entry["sha256"]):
            raise CorruptIndexError(f"{f}: sha256 does not match {INDEX_MANIFEST}; refusing a modified or "
                                    "corrupt index")


def _is_id(i: Any) -> bool:
    """A passage id: a string or an int64 (spec.index.INDEX_ID_MIN..MAX), as the kits store them
    (issue 38: 2^63 was an id here only)."""
    return isinstance(i, str) or (isinstance(i, int) and not isinstance(i, bool)
                                  and INDEX_ID_MIN <= i <= INDEX_ID_MAX)


def _read_ids(path: Path, count: int) -> list[PassageId]:
    """ids.json: a list of `count` ids."""
    try:
        ids = json.loads((path / INDEX_IDS).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CorruptIndexError(f"{path / INDEX_IDS}: unreadable ({one_line(exc)})") from None
    if not isinstance(ids, list) or len(ids) != count or not all(_is_id(i) for i in ids):
        raise CorruptIndexError(f"{path / INDEX_IDS}: must be a list of {count} ids "
                                "(int64s or strings)")
    return ids


def _map_array(path: Path, spec: Mapping[str, Any]) -> np.ndarray:
    """An array's file memory-mapped as its manifest entry says, refused when its size is not that."""
    shape = tuple(spec["shape"])
    dtype = np.dtype(INDEX_DTYPES[spec["dtype"]])
    f = path / spec["file"]
    need = math.prod(shape) * dtype.itemsize  # Python ints: a lying shape cannot wrap round
    if f.stat().st_size != need:
        raise CorruptIndexError(f"{f}: {f.stat().st_size} bytes, {spec['dtype']} {list(shape)} "
                                f"needs {need}")
    return np.memmap(f, dtype=dtype, mode="r", shape=shape) if need else np.zeros(shape, dtype)


def read_manifest(path: Path) -> dict[str, Any]:
    """index.json parsed and checked field by field (spec.index.INDEX_MANIFEST_FIELDS; one line
    per problem)."""
    mpath = Path(path) / INDEX_MANIFEST
    if not mpath.is_file():
        raise CorruptIndexError(f"{mpath}: not found (is {path} an edge-m3 index?)")
    try:
        m = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise CorruptIndexError(f"{mpath}: not valid JSON ({exc})") from None
    if not isinstance(m, dict) or m.get("format") != INDEX_FORMAT:
        raise CorruptIndexError(f"{mpath}: not an {INDEX_FORMAT} manifest")
    if m.get("format_version") != INDEX_FORMAT_VERSION:
        raise CorruptIndexError(f"{mpath}: format_version {m.get('format_version')!r} unsupported "
                                f"(this edge-m3 reads {INDEX_FORMAT_VERSION})")
    for key, kind, rule in INDEX_MANIFEST_FIELDS:
        if not _FIELD_CHECKS[kind](m.get(key), rule):
            raise CorruptIndexError(f"{mpath}: {key}: must be {manifest_want(kind, rule)}")
    listed = set(m["files"])
    for name in [INDEX_IDS] + [s["file"] for s in m["arrays"].values()]:
        if name not in listed:
            raise CorruptIndexError(f"{mpath}: files: {name} has no sha256")
    return m


def _int_ok(v: Any, rule: tuple[int, int | None]) -> bool:
    return isinstance(v, int) and v >= rule[0] and (rule[1] is None or v <= rule[1])


def _array_entry_ok(name: Any, entry: Any) -> bool:
    """An `arrays` entry: a known array's file, a known dtype, a shape of integers >= 0."""
    return (name in INDEX_ARRAYS and isinstance(entry, dict) and entry.get("file") == INDEX_ARRAYS[name]
            and isinstance(entry.get("dtype"), str) and entry["dtype"] in INDEX_DTYPES
            and isinstance(entry.get("shape"), list)
            and all(isinstance(x, int) and x >= 0 for x in entry["shape"]))


def _file_entry_ok(entry: Any) -> bool:
    return (isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
            and isinstance(entry.get("size"), int))


# index.json field types (spec.index.INDEX_MANIFEST_FIELDS) -> (value, rule) -> whether it holds
_FIELD_CHECKS: dict[str, Callable[[Any, Any], bool]] = {
    "int": _int_ok,
    "enum": lambda v, rule: isinstance(v, str) and v in rule,
    "arrays": lambda v, _: isinstance(v, dict) and all(_array_entry_ok(k, e) for k, e in v.items()),
    "files": lambda v, _: isinstance(v, dict) and all(_file_entry_ok(e) for e in v.values()),
}


def _check_layout(idx: Index, where: str) -> None:
    """The arrays agree with each other (a hand-edited manifest cannot make search read past an end):
    spec.index.INDEX_ARRAY_RULES' names, dtypes and shapes, then the offsets, order and values."""
    need = array_dtypes(idx.dense_store, idx.colbert_store)
    bad = _names_and_shapes(idx, need)
    for check in (_colbert_bad, _sparse_bad, _values_bad):
        if bad:
            break
        bad = check(idx, need)
    if bad:
        raise CorruptIndexError(f"{where}: inconsistent arrays ({', '.join(bad)}); refusing a corrupt index")


def _names_and_shapes(idx: Index, need: Mapping[str, str]) -> list[str]:
    """The arrays the stores use, and only those (a stray one was read here and ignored by the kits,
    issue 38), of their dtypes; those sized by rows and dim of their shape, the others of their rank."""
    a, n, d = idx.arrays, len(idx.ids), idx.dim
    missing = _missing(idx, need)
    sizes = {"rows": n, "rows+1": n + 1, "dim": d}
    shapes = {name: shape for name, _, _, shape in INDEX_ARRAY_RULES}
    want = {x: tuple(sizes[v] for v in s) for x, s in shapes.items() if all(v in sizes for v in s)}
    bad = missing or [x for x, s in want.items() if x in a and a[x].shape != s]
    # Every other array has its rank; a 0-D one has no length to check against.
    return bad + [x for x in need if x not in want and x in a and a[x].ndim != len(shapes[x])]


def _missing(idx: Index, need: Mapping[str, str]) -> list[str]:
    """The arrays the stores need that are absent, stray ones, and those of another dtype."""
    a = idx.arrays
    missing = [x for x in need if x not in a]
    missing += [f"{x} unused by the {idx.dense_store}/{idx.colbert_store} stores" for x in a if x not in need]
    return missing + [f"{x} is {a[x].dtype.name}" for x in need if x in a and a[x].dtype.name != need[x]]


def _offsets_ok(off: np.ndarray, starts: int, end: int) -> bool:
    """spec.index.INDEX_OFFSETS: one more than the starts, from 0, never decreasing, to the end."""
    return off.shape == (starts + 1,) and off[0] == 0 and off[-1] == end and not (np.diff(off) < 0).any()


def _colbert_bad(idx: Index, need: Mapping[str, str]) -> list[str]:
    """The ColBERT vectors: [V, dim], their offsets over them, a scale per vector."""
    a = idx.arrays
    if "colbert" not in need:
        return []
    v = a["colbert"].shape
    if v[1] != idx.dim or not _offsets_ok(np.asarray(a["colbert_offsets"]), len(idx.ids), v[0]) \
            or ("colbert_scale" in a and a["colbert_scale"].shape != (v[0],)):
        return ["colbert"]
    return []


def _sparse_bad(idx: Index, need: Mapping[str, str]) -> list[str]:
    """The postings: offsets over them, a weight per posting, rows of the index, tokens strictly
    ascending (searched by bisection), each posting's rows strictly ascending."""
    a, n = idx.arrays, len(idx.ids)
    off, p = np.asarray(a["sparse_offsets"]), a["sparse_rows"].shape
    rows, tokens = np.asarray(a["sparse_rows"]), np.asarray(a["sparse_tokens"])
    if not _offsets_ok(off, len(tokens), p[0]) or a[_PW].shape != p \
            or (len(rows) and (rows.min() < 0 or rows.max() >= n)) \
            or (tokens[1:] <= tokens[:-1]).any():  # (np.diff of int32 wraps)
        return ["sparse"]
    if len(rows) > 1:  # a posting's rows strictly ascending, as `postings` writes them (issue 38:
        within = np.ones(len(rows) - 1, bool)  # a row twice in one was summed once here, twice by the kits)
        within[off[1:-1][(off[1:-1] > 0) & (off[1:-1] < len(rows))] - 1] = False
        if (within & (np.diff(rows) <= 0)).any():
            return ["sparse_rows"]
    return []


def _values_bad(idx: Index, need: Mapping[str, str]) -> list[str]:
    """spec.index.INDEX_POSITIVE: scales are max|x| / 127 (> 0) and weights > 0: anything else is
    not ours (issue 38: a negative scale made an error bound negative and a row vanish from
    Python's hits only). Only the arrays the stores use: a stray one is ignored, as the kits do."""
    return [x for x in INDEX_POSITIVE if x in need and not _positive(idx.arrays[x])]


def _positive(x: np.ndarray) -> bool:
    """Every value finite and > 0 (read in blocks: the array may be memory-mapped)."""
    for start in range(0, len(x), 1 << 20):
        b = np.asarray(x[start:start + (1 << 20)], np.float32)
        if not (np.isfinite(b) & (b > 0)).all():
            return False
    return True


def _finite(x: np.ndarray) -> bool:
    """Every value finite (read in blocks: the array may be memory-mapped)."""
    step = max(1, (1 << 22) // max(1, int(np.prod(x.shape[1:]))))
    return all(np.isfinite(np.asarray(x[start:start + step])).all() for start in range(0, len(x), step))


# float16 bits -> float32, exact: numpy's own float16 conversion is about 10x slower than a lookup.
_F16_TO_F32 = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)


def _as_f32(x: np.ndarray) -> np.ndarray:
    """Stored vectors as float32 (exactly: float16 and int8 values are all float32 values)."""
    x = np.asarray(x)
    if x.dtype == np.float16:
        return _F16_TO_F32[x.view(np.uint16)]
    return x.astype(np.float32, copy=False)  # a float32 store is read in place (no copy per search)


def postings(a: dict[str, np.ndarray], tok: np.ndarray, row: np.ndarray, w: np.ndarray) -> None:
    """The CSR-by-token postings of (token, row, weight) triples into `a`, sorted by token then row."""
    order = np.lexsort((row, tok))
    tok, row, w = tok[order], row[order], w[order]
    tokens, counts = np.unique(tok, return_counts=True)
    a["sparse_tokens"] = tokens.astype(np.int32)
    a["sparse_offsets"] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    a["sparse_rows"] = row.astype(np.int32)
    a[_PW] = np.asarray(w, np.float32)


def _cat(old: np.ndarray | None, new: np.ndarray) -> np.ndarray:
    """Stored rows (maybe memory-mapped) followed by new ones, as one in-memory array."""
    return new if old is None else np.concatenate([np.asarray(old), new.astype(old.dtype)])


def top_of(rows: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best k of exact scores: score descending, row ascending."""
    order = np.lexsort((rows, -scores))[:k]
    return rows[order], scores[order]


def hybrid_top(mode: str, d: np.ndarray, s: np.ndarray, colbert: bool,
                fast: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                exact: Callable[[np.ndarray], np.ndarray], k: int,
                w: tuple[float, float, float]) -> tuple[np.ndarray, np.ndarray]:
    """A hybrid mode's best k candidates (positions, ties by position) from their exact dense and
    sparse scores; ColBERT, when the mode adds it, by `fast` (scores and error bounds) and only
    where that cannot decide by `exact`."""
    n = len(d)
    if not colbert:
        h = hybrid_score(mode, d, s, np.zeros(n), w)
        order = np.lexsort((np.arange(n), -h))[:k]
        return order, h[order]
    cf, cm = fast(np.arange(n))
    h_fast = hybrid_score(mode, d, s, cf, w)
    den = (w[0] + w[1]) + w[2]
    h_margin = (w[2] * cm / den) * (1 + 1e-9) + 8 * _U64 * (
        np.abs(cf * w[2]) + np.abs(s * w[1]) + np.abs(d * w[0])) / den + 1e-300
    return _exact_top(h_fast, h_margin, k,
                      lambda sel: hybrid_score(mode, d[sel], s[sel], exact(sel), w))


def _exact_top(fast: np.ndarray, margin: np.ndarray, k: int,
               exact: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The exact top k (score descending, index ascending) when each exact score lies within
    `margin` of `fast`: only the indexes whose upper bound reaches the k-th best lower bound
    can be among them, and only those are scored exactly."""
    n = len(fast)
    k = min(k, n)
    if k == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    lower = fast - margin
    floor = np.partition(lower, n - k)[n - k]
    cand = np.nonzero(fast + margin >= floor)[0]
    return top_of(cand, exact(cand), k)

"""An index of embedded passages: `add`, `search(query, k, mode)`, and the folder apps ship.

Search returns exactly the hits docs/index-format.md defines (spec/scoring.py's scores, ties by row),
so the kits return the same ones. Fast float32 passes (BLAS) only *select* rows, within a proven
error bound of the exact scores (ranking.py picks the top k from them); the returned scores are
always the exact sequential ones. The folder is index_folder.py's: saved atomically, memory-mapped
back after every file's sha256 is checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.errors import EdgeM3Error, OptionError, one_line
from edge_m3.retrieval.index_folder import (
    BundleIdentity,
    CorruptIndexError,
    Layout,
    PassageId,
    check_layout,
    read_folder,
    write_folder,
)
from edge_m3.retrieval.ranking import (
    Hit,
    as_query,
    best_per_passage,
    chunk_numbers,
    exact_top,
    hybrid_top,
    search_args,
    top_of,
)
from edge_m3.retrieval.scores import U32, colbert_score, seq_dots
from edge_m3.spec import (
    COLBERT_STORES,
    COLBERT_VECS,
    DENSE_STORES,
    DENSE_VECS,
    HYBRID_CANDIDATES,
    INDEX_ARRAYS,
    INDEX_POSTING_WEIGHTS,
    LEXICAL_WEIGHTS,
)

_PW = INDEX_POSTING_WEIGHTS  # the postings' weights array


def quantize_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 codes and float32 per-row scales: scale = max|x| / 127 (1.0 for a zero row),
    code = round-half-even(x / scale) (docs/index-format.md)."""
    x = np.asarray(x, np.float32)
    peak = np.abs(x).max(axis=1) if x.size else np.zeros(len(x), np.float32)
    scale = np.where(peak > 0, peak / np.float32(127), np.float32(1)).astype(np.float32)
    codes = np.clip(np.rint(x / scale[:, None]), -127, 127).astype(np.int8)
    return codes, scale


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
        check_layout(Layout(idx.dim, dense, colbert, idx.ids, idx.arrays), "arrays")
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
            codes, scale = quantize_rows(dense)
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
                codes, scale = quantize_rows(vecs)
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
        gamma = 2 * (self.dim + 2) * U32 / (1 - (self.dim + 2) * U32)
        margin = gamma * float(np.linalg.norm(q)) * self._norm("dense") + 4 * U32 * np.abs(fast) + 1e-300
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
        gamma = 2 * (self.dim + 2) * U32 / (1 - (self.dim + 2) * U32)
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
                m = gamma * qn * norms[idx][None, :] + 4 * U32 * np.abs(s)
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
            sel, scores = exact_top(fast, margin, k, lambda sel: self.colbert_exact(qc, alive[sel]))
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
        return exact_top(fast, margin, k, lambda rows: self.dense_exact(q, rows))

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
        layout = Layout(self.dim, self.dense_store, self.colbert_store, self.ids, self.arrays)
        return write_folder(out, layout, self.bundle)

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
        layout, ident = read_folder(path, bundle, verify)
        idx = cls.__new__(cls)
        idx.dim, idx.dense_store, idx.colbert_store, idx.bundle = (layout.dim, layout.dense_store,
                                                                   layout.colbert_store, ident)
        idx._pending, idx._norms, idx.path, idx._chunks = [], {}, path, None
        idx.ids, idx.arrays = layout.ids, layout.arrays
        return idx


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

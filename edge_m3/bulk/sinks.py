"""Where bulk results go, chosen by the `--out` suffix, written in parts a killed job keeps.

- `X.parquet`: a directory of Parquet files (a dataset, as Spark and Ray write one):
  `part-00000.parquet`, ... in input order. Columns: `row` (int64, the input row), `id` (int64
  or string, the input's id), `input_ids` list<int32>, `dense_vecs` fixed_size_list<float32,
  hidden>, `lexical_weights` struct<ids: list<int32>, weights: list<float32>> (the JSON dict's
  keys and values, in its order), `colbert_vecs` list<fixed_size_list<float32, hidden>>.
  `pyarrow.parquet.read_table("X.parquet")`, pandas, DuckDB (`'X.parquet/*.parquet'`) and Ray
  read it; files starting with `_` or `.` are edge-m3's own and skipped by those readers.
- `X.npy`: a directory of .npy arrays (no pickle), whole once the job ends. `row.npy` int64
  [n], `id.npy` int64 or unicode [n]; ragged columns are flat values plus `<name>.offsets.npy`
  (int64 [n+1]: text i is `values[offsets[i]:offsets[i+1]]`): `input_ids.npy` int32,
  `dense_vecs.npy` float32 [n, hidden], `lexical_weights.ids.npy` int32 and
  `lexical_weights.weights.npy` float32 (one offsets file, `lexical_weights.offsets.npy`),
  `colbert_vecs.npy` float32 [tokens, hidden] with `colbert_vecs.offsets.npy`.
- `X.jsonl`: one JSON object per line (`id` and FlagEmbedding's names), for small jobs: every
  float becomes text. Its parts live in `.X.jsonl.parts/` until the job ends.

Each part is written under a temp name and renamed, then the job record (`_edge_m3_job.json`:
what the job is, how many parts are done) is replaced: a job killed at any point restarts with
`--resume` from the last part the record counts. Rejected rows go to `X.rejected.jsonl`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.bulk.columns import Ragged
from edge_m3.bulk.engine import ID, ROW, Embedded
from edge_m3.common.corpus import Rejected, require_pyarrow
from edge_m3.common.files import fill_atomic, write_json
from edge_m3.errors import OptionError
from edge_m3.spec import COLBERT_VECS, DENSE_VECS, LEXICAL_WEIGHTS

JOB_FILE = "_edge_m3_job.json"
REJECTED_SUFFIX = ".rejected.jsonl"
SUFFIXES = (".parquet", ".npy", ".jsonl")


def out_format(out: Path) -> str:
    """'parquet', 'npy' or 'jsonl', from the suffix of `--out`."""
    suffix = Path(out).suffix.lower()
    if suffix not in SUFFIXES:
        raise OptionError("out", out, f"choose the format by its suffix: {', '.join(SUFFIXES)}")
    return suffix[1:]


def rejected_path(out: Path) -> Path:
    return Path(out).with_name(Path(out).name + REJECTED_SUFFIX)


def read_record(work: Path) -> dict[str, Any] | None:
    """The job record in `work` (the local job's and the Ray job's), or None."""
    try:
        record = json.loads((Path(work) / JOB_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def part_name(k: int) -> str:
    return f"part-{k:05d}"


# --------------------------------------------------------------------------- Arrow columns

def arrow_table(emb: Embedded, outputs: Sequence[str], hidden: int, id_type: Any = None) -> Any:
    """One chunk as an Arrow table (the Parquet sink's and Ray's): the schema in the module doc."""
    pa = require_pyarrow()
    ids = pa.array(emb.ids, type=id_type) if id_type is not None else pa.array(
        emb.ids, type=pa.string() if emb.ids and isinstance(emb.ids[0], str) else pa.int64())

    def ragged(r: Ragged, inner: Any) -> Any:
        return pa.ListArray.from_arrays(pa.array(r.offsets.astype(np.int32)), inner)

    def vectors(values: np.ndarray) -> Any:
        flat = pa.array(np.ascontiguousarray(values, np.float32).reshape(-1))
        return pa.FixedSizeListArray.from_arrays(flat, hidden)

    cols = {ROW: pa.array(emb.rows, pa.int64()), ID: ids,
            "input_ids": ragged(emb.input_ids, pa.array(emb.input_ids.values))}
    if "dense" in outputs and emb.dense is not None:
        cols[DENSE_VECS] = vectors(emb.dense)
    if "sparse" in outputs and emb.lexical_ids is not None:
        off = pa.array(emb.lexical_ids.offsets.astype(np.int32))
        cols[LEXICAL_WEIGHTS] = pa.StructArray.from_arrays(
            [pa.ListArray.from_arrays(off, pa.array(emb.lexical_ids.values)),
             pa.ListArray.from_arrays(off, pa.array(emb.lexical_weights))], names=["ids", "weights"])
    if "colbert" in outputs and emb.colbert is not None:
        cols[COLBERT_VECS] = ragged(emb.colbert, vectors(emb.colbert.values))
    return pa.table(cols)


def _concat(parts: Sequence[Embedded]) -> Embedded:
    """Chunks of one part as one."""
    if len(parts) == 1:
        return parts[0]

    def rag(rs: Sequence[Ragged | None]) -> Ragged | None:
        if rs[0] is None:
            return None
        offs, shift = [np.zeros(1, np.int64)], 0
        for r in rs:
            offs.append(r.offsets[1:] + shift)  # type: ignore[union-attr]
            shift += int(r.offsets[-1])  # type: ignore[union-attr]
        return Ragged(np.concatenate([r.values for r in rs]), np.concatenate(offs))  # type: ignore[union-attr]

    return Embedded(rows=np.concatenate([p.rows for p in parts]), ids=[i for p in parts for i in p.ids],
                    input_ids=rag([p.input_ids for p in parts]),  # type: ignore[arg-type]
                    dense=None if parts[0].dense is None else np.concatenate([p.dense for p in parts]),
                    lexical_ids=rag([p.lexical_ids for p in parts]),
                    lexical_weights=None if parts[0].lexical_weights is None else
                    np.concatenate([p.lexical_weights for p in parts]),
                    colbert=rag([p.colbert for p in parts]))


# --------------------------------------------------------------------------- the sinks

class Sink:
    """Parts in `self.work` (the output dir, or the JSON lines' parts dir), the job record there,
    rejected rows per part in `work/_rejected/`."""

    def __init__(self, out: Path, outputs: Sequence[str], hidden: int) -> None:
        self.out, self.outputs, self.hidden = Path(out), tuple(outputs), hidden
        self.work = self.out
        self.id_type: Any = None
        self._pending: list[Embedded] = []

    # the state on disk
    def exists(self) -> bool:
        return self.out.exists() or self.work.exists() or rejected_path(self.out).exists()

    def record(self) -> dict[str, Any] | None:
        return read_record(self.work)

    def save_record(self, record: dict[str, Any]) -> None:
        write_json(self.work / JOB_FILE, record, "out")

    def begin(self) -> None:
        (self.work / "_rejected").mkdir(parents=True, exist_ok=True)

    def drop_parts_from(self, k: int) -> None:
        """Parts a killed job wrote after its last record (redone on resume)."""
        for p in self._part_paths():
            if int(p.name.split("-")[1].split(".")[0]) >= k:
                shutil.rmtree(p) if p.is_dir() else p.unlink()

    # writing
    def add(self, k: int, emb: Embedded) -> None:
        """One chunk of part k, in order (kept until `commit`; Parquet streams it to disk)."""
        self._pending.append(emb)

    def commit(self, k: int, rejected: Sequence[Rejected]) -> None:
        """Part k's rows, then its rejected rows: each atomically (the record follows, by the
        caller)."""
        chunks = [e for e in self._pending if len(e)]  # a part all rejected writes no file
        self._pending = []
        if chunks:
            self._write_part(k, _concat(chunks))
        self._commit_rejected(k, rejected)

    def abort(self) -> None:
        """Forget a part begun and not committed (the job failed or stopped)."""
        self._pending = []

    def _commit_rejected(self, k: int, rejected: Sequence[Rejected]) -> None:
        lines = "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in rejected)
        fill_atomic(self.work / "_rejected" / f"{part_name(k)}.jsonl",
                    lambda tmp: tmp.write_text(lines, "utf-8"), "out")

    def finish(self, parts: int) -> int:
        """Whole outputs from the parts; returns the rejected-row count (their file written)."""
        rej = [self.work / "_rejected" / f"{part_name(k)}.jsonl" for k in range(parts)]
        count = sum(p.read_bytes().count(b"\n") for p in rej if p.exists())
        target = rejected_path(self.out)
        if count:
            def fill(tmp: Path) -> None:
                with open(tmp, "wb") as fh:
                    for p in rej:
                        if p.exists():
                            fh.write(p.read_bytes())
            fill_atomic(target, fill, "out")
        self._finish(parts)
        return count

    # per format
    def _part_paths(self) -> list[Path]:
        return sorted(self.work.glob("part-*"))

    def _write_part(self, k: int, emb: Embedded) -> None:
        raise NotImplementedError

    def _finish(self, parts: int) -> None:
        record = self.record() or {}
        shutil.rmtree(self.work / "_rejected", ignore_errors=True)
        self.save_record({**record, "complete": True})


class ParquetSink(Sink):
    """The parts are the dataset. Each chunk is a row group, written to the part's temp file
    as it comes (the writer thread overlaps the model), and the part renamed once whole."""

    def __init__(self, out: Path, outputs: Sequence[str], hidden: int) -> None:
        super().__init__(out, outputs, hidden)
        require_pyarrow("--out .parquet")
        self._open: tuple[Path, Any] | None = None  # the open part: (temp file, ParquetWriter)

    def begin(self) -> None:
        super().begin()
        for stale in self.work.glob(".part-*.parquet.part"):  # a killed job's unfinished part
            stale.unlink(missing_ok=True)

    def add(self, k: int, emb: Embedded) -> None:
        if not len(emb):
            return
        table = arrow_table(emb, self.outputs, self.hidden, self.id_type)
        self.id_type = table.schema.field(ID).type
        with self._writing(k):
            if self._open is None:
                tmp = self.work / f".{part_name(k)}.parquet.part"
                self._open = (tmp, require_pyarrow().parquet.ParquetWriter(tmp, table.schema))
            self._open[1].write_table(table)

    def commit(self, k: int, rejected: Sequence[Rejected]) -> None:
        if self._open is not None:
            with self._writing(k):
                tmp, writer = self._open
                writer.close()
                os.replace(tmp, self.work / f"{part_name(k)}.parquet")
                self._open = None
        self._commit_rejected(k, rejected)

    def abort(self) -> None:
        if self._open is not None:
            tmp, writer = self._open
            self._open = None
            with contextlib.suppress(Exception):
                writer.close()
            tmp.unlink(missing_ok=True)

    @contextlib.contextmanager
    def _writing(self, k: int) -> Iterator[None]:
        """A failed write of part k: its temp file removed, one line naming the part."""
        try:
            yield
        except OSError as exc:
            self.abort()
            raise OptionError("out", self.work / f"{part_name(k)}.parquet",
                              f"cannot write ({exc})") from None


_NPY_RAGGED = {"input_ids": "input_ids", COLBERT_VECS: COLBERT_VECS}


class NpySink(Sink):
    """Parts as .npy folders in `_parts/`, joined into whole arrays at the end."""

    def _part_paths(self) -> list[Path]:
        return sorted((self.work / "_parts").glob("part-*"))

    def _write_part(self, k: int, emb: Embedded) -> None:
        arrays = npy_arrays(emb)
        final = self.work / "_parts" / part_name(k)
        tmp = self.work / "_parts" / f".{part_name(k)}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for name, a in arrays.items():
            np.save(tmp / f"{name}.npy", a, allow_pickle=False)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)

    def _finish(self, parts: int) -> None:
        dirs = [d for d in (self.work / "_parts" / part_name(k) for k in range(parts)) if d.is_dir()]
        names = sorted({p.stem for d in dirs for p in d.glob("*.npy")})
        for name in names:
            pieces = [np.load(d / f"{name}.npy", mmap_mode="r", allow_pickle=False) for d in dirs]
            if name.endswith(".offsets"):  # each part's offsets start at 0: shift and join
                shift, joined = 0, [np.zeros(1, np.int64)]
                for p in pieces:
                    joined.append(np.asarray(p[1:]) + shift)
                    shift += int(p[-1])
                whole = np.concatenate(joined)
                fill_atomic(self.work / f"{name}.npy", lambda tmp, a=whole: _save(tmp, a), "out")
                continue
            dtype = np.result_type(*[p.dtype for p in pieces])  # str ids: the widest
            shape = (sum(len(p) for p in pieces), *pieces[0].shape[1:])

            def fill(tmp: Path, pieces: list[np.ndarray] = pieces, dtype: Any = dtype,
                     shape: tuple[int, ...] = shape) -> None:
                mm = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape)
                at = 0
                for p in pieces:
                    mm[at:at + len(p)] = p
                    at += len(p)
                mm.flush()
                del mm
            fill_atomic(self.work / f"{name}.npy", fill, "out")
        shutil.rmtree(self.work / "_parts", ignore_errors=True)
        super()._finish(parts)


def _save(tmp: Path, a: np.ndarray) -> None:
    with open(tmp, "wb") as fh:
        np.save(fh, a, allow_pickle=False)


def npy_arrays(emb: Embedded) -> dict[str, np.ndarray]:
    """One chunk's arrays under their file names (the layout in the module doc)."""
    ids = np.asarray(emb.ids) if emb.ids else np.zeros(0, np.int64)
    out = {ROW: emb.rows, ID: ids.astype(np.int64) if ids.dtype.kind in "iu" else ids,
           "input_ids": emb.input_ids.values, "input_ids.offsets": emb.input_ids.offsets}
    if emb.dense is not None:
        out[DENSE_VECS] = emb.dense
    if emb.lexical_ids is not None and emb.lexical_weights is not None:
        out[f"{LEXICAL_WEIGHTS}.ids"] = emb.lexical_ids.values
        out[f"{LEXICAL_WEIGHTS}.weights"] = emb.lexical_weights
        out[f"{LEXICAL_WEIGHTS}.offsets"] = emb.lexical_ids.offsets
    if emb.colbert is not None:
        out[COLBERT_VECS] = emb.colbert.values
        out[f"{COLBERT_VECS}.offsets"] = emb.colbert.offsets
    return out


class JsonlSink(Sink):
    """Parts in `.X.jsonl.parts/`, joined into X.jsonl (atomically) at the end."""

    def __init__(self, out: Path, outputs: Sequence[str], hidden: int) -> None:
        super().__init__(out, outputs, hidden)
        self.work = self.out.with_name(f".{self.out.name}.parts")

    def _write_part(self, k: int, emb: Embedded) -> None:
        text = "".join(json.dumps(emb.record(i), ensure_ascii=False) + "\n" for i in range(len(emb)))
        fill_atomic(self.work / f"{part_name(k)}.jsonl", lambda tmp: tmp.write_text(text, "utf-8"), "out")

    def _finish(self, parts: int) -> None:
        files = [self.work / f"{part_name(k)}.jsonl" for k in range(parts)]

        def fill(tmp: Path) -> None:
            with open(tmp, "wb") as fh:
                for f in files:
                    if f.exists():
                        with open(f, "rb") as src:
                            shutil.copyfileobj(src, fh)
        fill_atomic(self.out, fill, "out")
        shutil.rmtree(self.work, ignore_errors=True)


def make_sink(out: Path, outputs: Sequence[str], hidden: int) -> Sink:
    fmt = out_format(out)
    return {"parquet": ParquetSink, "npy": NpySink, "jsonl": JsonlSink}[fmt](out, outputs, hidden)

"""The one reader of corpora: what bulk `embed`, Ray and `index` take in, row by row.

A corpus is read as a stream (a million rows are never held at once) of `Row`s and `Rejected`
rows, in input order. A bad row (invalid UTF-8, unparsable JSON, a missing, null or empty text)
is yielded as `Rejected` with its row number and, when readable, its id, and the stream goes on:
one bad line must not stop a million-row job. What makes the whole file unusable (missing,
unreadable, a Parquet file without the named columns, pyarrow not installed) is an `OptionError`
raised by `open_corpus`, before any model is loaded.

Formats, chosen by the path (or `format=`):

- a directory, `.parquet` or `.pq`: Parquet (a directory is a dataset: its `*.parquet` files in
  name order), columns `id` and `text` by default (`id_column`, `text_column`);
- `.jsonl` or `.ndjson`: one JSON object per line, keys `id` and `text` by default;
- anything else: UTF-8 text, one text per line (split on "\\n" only, a trailing "\\r" and a
  leading BOM dropped, as `edge_m3.common.files.read_lines`); the id is the row number.

Every row has `row`, its 0-based position in the input (line N of a text file is row N-1), which
output order and `--resume` go by. `id` is the input's own id: an int or a str, the same type
for every row of a corpus (a JSON row whose id has another type is rejected); with
`id_column=None` (or a text file) the id is the row number. Empty means no characters other than
whitespace: such a text embeds to nothing useful and is nearly always a stray blank line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import ModuleType
from typing import Any

from edge_m3.errors import EdgeM3Error, OptionError, one_line

DEFAULT_ID_COLUMN = "id"
DEFAULT_TEXT_COLUMN = "text"
PARQUET_EXTRA = "pip install 'edge-m3[parquet]'"
_BOM = b"\xef\xbb\xbf"
_PARQUET_BATCH_ROWS = 4096  # rows pyarrow decodes at a time: bounded memory, few Python calls


class CorpusFormat(StrEnum):
    TEXT = "txt"
    JSONL = "jsonl"
    PARQUET = "parquet"


_SUFFIXES = {".jsonl": CorpusFormat.JSONL, ".ndjson": CorpusFormat.JSONL,
             ".parquet": CorpusFormat.PARQUET, ".pq": CorpusFormat.PARQUET}


@dataclass(frozen=True, slots=True)
class Row:
    """One text to embed: its 0-based position in the input, its id, the text."""

    row: int
    id: int | str
    text: str


@dataclass(frozen=True, slots=True)
class Rejected:
    """A row that cannot be embedded: its position, its id when it could be read, and why."""

    row: int
    id: int | str | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        """What `OUT.rejected.jsonl` holds per line."""
        return {"row": self.row, "id": self.id, "reason": self.reason}


def require_pyarrow(what: str = "Parquet") -> ModuleType:
    """pyarrow (with pyarrow.parquet loaded), imported only when Parquet is used: the runtime
    install leaves it out (tens of MB). Missing: one line saying what to install."""
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise EdgeM3Error(f"{what} needs pyarrow, which the runtime install leaves out: "
                          f"{PARQUET_EXTRA}") from None
    return pyarrow


def corpus_format(path: Path) -> CorpusFormat:
    """The format a path is read in, from its suffix (a directory: a Parquet dataset)."""
    path = Path(path)
    if path.is_dir():
        return CorpusFormat.PARQUET
    return _SUFFIXES.get(path.suffix.lower(), CorpusFormat.TEXT)


def _empty(text: str) -> bool:
    return not text.strip()


class Corpus:
    """An opened corpus: checked to be readable, read again from the start by each `rows()`."""

    def __init__(self, path: Path, fmt: CorpusFormat, id_column: str | None, text_column: str,
                 field: str, files: tuple[Path, ...]) -> None:
        self.path, self.format, self.field = Path(path), fmt, field
        self.id_column, self.text_column = id_column, text_column
        self.files = files  # the Parquet files of a dataset, in reading order; else (path,)

    def rows(self, start: int = 0) -> Iterator[Row | Rejected]:
        """Rows and rejected rows in input order, from row `start` on (rows before it are
        skipped without being decoded: `--resume`)."""
        if self.format is CorpusFormat.TEXT:
            return self._text_rows(start)
        if self.format is CorpusFormat.JSONL:
            return self._jsonl_rows(start)
        return self._parquet_rows(start)

    def count(self) -> int:
        """Rows in the corpus (Parquet: from the footers; lines: one fast pass over the bytes),
        for progress bars."""
        if self.format is CorpusFormat.PARQUET:
            pa = require_pyarrow()
            n = 0
            for f in self.files:
                try:
                    n += pa.parquet.ParquetFile(f).metadata.num_rows
                except (OSError, ValueError, pa.ArrowException) as exc:
                    raise _unreadable_parquet(self.field, f, exc) from None
            return n
        n, last = 0, b"\n"
        with self._open(self.path) as fh:
            while block := fh.read(1 << 22):
                n += block.count(b"\n")
                last = block[-1:]
        return n + (last != b"\n")

    # ------------------------------------------------------------------ readers

    def _open(self, path: Path) -> Any:
        try:
            return open(path, "rb")
        except OSError as exc:
            raise OptionError(self.field, path, f"cannot read ({exc.strerror})") from None

    def _lines(self, start: int) -> Iterator[tuple[int, bytes]]:
        """(row, raw line without "\\n", "\\r" or BOM), split on "\\n" only."""
        with self._open(self.path) as fh:
            for row, line in enumerate(fh):
                if row < start:
                    continue
                if row == 0:
                    line = line.removeprefix(_BOM)
                yield row, line.removesuffix(b"\n").removesuffix(b"\r")

    def _text_rows(self, start: int) -> Iterator[Row | Rejected]:
        for row, raw in self._lines(start):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield Rejected(row, row, f"not UTF-8 (byte {exc.start + 1} of the line)")
                continue
            yield Rejected(row, row, "empty text") if _empty(text) else Row(row, row, text)

    def _jsonl_rows(self, start: int) -> Iterator[Row | Rejected]:
        id_type: type | None = None
        for row, raw in self._lines(start):
            try:
                obj = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                yield Rejected(row, None, f"not UTF-8 (byte {exc.start + 1} of the line)")
                continue
            except ValueError as exc:
                why = "empty line" if not raw.strip() else f"not JSON ({exc.args[0].split(':')[0]})"
                yield Rejected(row, None, why)
                continue
            except RecursionError:  # json's C parser recurses per bracket
                yield Rejected(row, None, "not JSON (nested too deeply)")
                continue
            if not isinstance(obj, dict):
                yield Rejected(row, None, f"not a JSON object (a {type(obj).__name__})")
                continue
            rid: Any = row
            if self.id_column is not None:
                rid = obj.get(self.id_column)
                if rid is None or isinstance(rid, bool) or not isinstance(rid, int | str):
                    what = "no" if self.id_column not in obj else f"a {type(rid).__name__}"
                    yield Rejected(row, None, f"{what} '{self.id_column}' (an integer or a string)")
                    continue
                if id_type is None:
                    id_type = type(rid)
                elif type(rid) is not id_type:
                    yield Rejected(row, rid, f"'{self.id_column}' is a {type(rid).__name__}, the "
                                   f"first row's a {id_type.__name__}")
                    continue
            text = obj.get(self.text_column)
            if not isinstance(text, str):
                what = "no" if text is None else f"a {type(text).__name__} as"
                yield Rejected(row, rid, f"{what} '{self.text_column}' (a string)")
                continue
            try:  # a lone surrogate ("\ud800") passes json.loads but cannot be written as UTF-8
                text.encode("utf-8")
            except UnicodeEncodeError:
                yield Rejected(row, rid, "text holds a lone surrogate (not UTF-8)")
                continue
            yield Rejected(row, rid, "empty text") if _empty(text) else Row(row, rid, text)

    def _parquet_rows(self, start: int) -> Iterator[Row | Rejected]:
        pa = require_pyarrow()
        columns = [c for c in (self.id_column, self.text_column) if c is not None]
        row = 0
        for path in self.files:
            try:  # a corrupt page shows only when decoded (pyarrow: OSError, ArrowException, or a
                # ValueError such as UnicodeDecodeError): the whole job stops on one line
                pf = pa.parquet.ParquetFile(path)
                if row + pf.metadata.num_rows <= start:  # wholly before `start`: not even decoded
                    row += pf.metadata.num_rows
                    continue
                first = row
                for batch in pf.iter_batches(batch_size=_PARQUET_BATCH_ROWS, columns=columns):
                    n = batch.num_rows
                    if row + n <= start:
                        row += n
                        continue
                    texts = batch.column(self.text_column).to_pylist()
                    ids = batch.column(self.id_column).to_pylist() if self.id_column else None
                    for i in range(max(0, start - row), n):
                        yield self._parquet_row(row + i, ids[i] if ids is not None else row + i, texts[i])
                    row += n
                if row - first != pf.metadata.num_rows:  # pyarrow may decode a bad page as no rows
                    raise OptionError(self.field, path, f"corrupt Parquet file ({row - first} rows decoded, "
                                      f"its footer says {pf.metadata.num_rows})")
            except (OSError, ValueError, pa.ArrowException) as exc:
                raise _unreadable_parquet(self.field, path, exc) from None

    def _parquet_row(self, row: int, rid: Any, text: Any) -> Row | Rejected:
        return check_row(row, rid, text, self.id_column, self.text_column)


def check_row(row: int, rid: Any, text: Any, id_column: str | None = DEFAULT_ID_COLUMN,
              text_column: str = DEFAULT_TEXT_COLUMN) -> Row | Rejected:
    """One columnar row (Parquet, Arrow: Ray's batches) as a Row, or why it cannot be embedded."""
    if rid is None:
        return Rejected(row, None, f"null '{id_column}'")
    if isinstance(text, bytes):  # a binary column: its bytes may be anything
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            return Rejected(row, rid, f"not UTF-8 (byte {exc.start + 1} of the text)")
    if text is None:
        return Rejected(row, rid, f"null '{text_column}'")
    if not isinstance(text, str):
        return Rejected(row, rid, f"a {type(text).__name__} as '{text_column}' (a string)")
    return Rejected(row, rid, "empty text") if _empty(text) else Row(row, rid, text)


def _unreadable_parquet(field: str, path: Path, exc: Exception) -> OptionError:
    return OptionError(field, path, f"not a readable Parquet file ({one_line(exc)})")


def open_corpus(path: Path, *, format: CorpusFormat | str | None = None,
                id_column: str | None = DEFAULT_ID_COLUMN, text_column: str = DEFAULT_TEXT_COLUMN,
                field: str = "texts") -> Corpus:
    """Check that the corpus can be read (`field`: the option it came from, for the one-line
    error) and return it. Parquet's schema is checked here: a missing or mistyped column fails
    the whole job at once, not once per row."""
    path = Path(path)
    fmt = CorpusFormat(format) if format is not None else corpus_format(path)
    if not path.exists():
        raise OptionError(field, path, "no such file or directory")
    if fmt is not CorpusFormat.PARQUET:
        if path.is_dir():
            raise OptionError(field, path, f"is a directory (a {fmt.value} corpus is one file)")
        with Corpus(path, fmt, id_column, text_column, field, (path,))._open(path):
            pass
        return Corpus(path, fmt, id_column, text_column, field, (path,))
    files = _parquet_files(path, field, id_column, text_column)
    return Corpus(path, fmt, id_column, text_column, field, files)


def _parquet_files(path: Path, field: str, id_column: str | None, text_column: str) -> tuple[Path, ...]:
    """The Parquet file, or a dataset's files, each readable with the text and id columns (one
    id type across the files)."""
    require_pyarrow()  # before anything else: without it no Parquet corpus is read
    files = tuple(sorted(path.glob("*.parquet"))) if path.is_dir() else (path,)
    if not files:
        raise OptionError(field, path, "a directory without *.parquet files")
    first = None
    for f in files:
        t = _check_parquet(f, field, id_column, text_column)
        if first is None:
            first = t
        if id_column is not None and first != t:  # one id type, as JSON lines
            raise OptionError(field, f, f"column '{id_column}' is {t}, {files[0].name}'s is {first}")
    return files


def _check_parquet(f: Path, field: str, id_column: str | None, text_column: str) -> Any:
    """One Parquet file's footer and columns checked; its id column's type (None without one)."""
    pa = require_pyarrow()
    try:
        schema = pa.parquet.read_schema(f)
        meta = pa.parquet.read_metadata(f)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise _unreadable_parquet(field, f, exc) from None
    groups = sum(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
    if groups != meta.num_rows:  # rows are numbered (and --resume skips) by the footer's count
        raise OptionError(field, f, f"corrupt Parquet footer ({meta.num_rows} rows, its row groups "
                          f"hold {groups})")
    wanted = {text_column: "a string or binary", id_column: "an integer or string"}
    for name, kind in wanted.items():
        if name is None:
            continue
        if name not in schema.names:
            names = one_line(", ".join(schema.names))  # names are the file's: any characters
            raise OptionError(field, f, f"no column '{name}' (columns: {names})")
        t = schema.field(name).type
        ok = (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
              or pa.types.is_large_binary(t)) if name == text_column else (
            pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t))
        if not ok:
            raise OptionError(field, f, f"column '{name}' is {one_line(t)}, not {kind}")
    return None if id_column is None else schema.field(id_column).type

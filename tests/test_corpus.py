"""The one corpus reader (edge_m3.common.corpus): text lines, JSON lines, Parquet; bad rows are
rejected with their row and id and never stop the stream; whole-file problems are one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from edge_m3.common import corpus as corpus_mod
from edge_m3.common.corpus import CorpusFormat, Rejected, Row, open_corpus
from edge_m3.errors import EdgeM3Error, OptionError


def _split(items: list[Row | Rejected]) -> tuple[list[tuple], list[tuple]]:
    rows = [(r.row, r.id, r.text) for r in items if isinstance(r, Row)]
    bad = [(r.row, r.id, r.reason) for r in items if isinstance(r, Rejected)]
    return rows, bad


def test_text_lines_rows_and_rejects(tmp_path: Path) -> None:
    f = tmp_path / "t.txt"
    f.write_bytes(b"\xef\xbb\xbfa\r\n\nx\xffy\n  \n" + "b\u2028c\nlast".encode())
    c = open_corpus(f)
    assert c.format is CorpusFormat.TEXT and c.count() == 6
    rows, bad = _split(list(c.rows()))
    assert rows == [(0, 0, "a"), (4, 4, "b\u2028c"), (5, 5, "last")]
    assert bad == [(1, 1, "empty text"), (2, 2, "not UTF-8 (byte 2 of the line)"), (3, 3, "empty text")]
    # resume: rows before `start` are skipped, numbering is unchanged
    assert [r.row for r in c.rows(start=3)] == [3, 4, 5]


def test_jsonl_ids_columns_and_rejects(tmp_path: Path) -> None:
    f = tmp_path / "c.jsonl"
    lines = [json.dumps({"doc": "d0", "body": "héllo"}).encode(),
             b"{not json",
             json.dumps({"doc": "d2"}).encode(),
             json.dumps({"doc": 3, "body": "int id after str ids"}).encode(),
             json.dumps({"body": "no id"}).encode(),
             b"[1, 2]",
             b"",
             json.dumps({"doc": "d7", "body": "\ud800"}).encode(),
             b'{"doc": "d8", "body": "\xff"}',
             json.dumps({"doc": "d9", "body": " "}).encode(),
             json.dumps({"doc": "d10", "body": 5}).encode(),
             json.dumps({"doc": "d11", "body": "ok"}).encode()]
    f.write_bytes(b"\n".join(lines) + b"\n")
    c = open_corpus(f, id_column="doc", text_column="body")
    assert c.format is CorpusFormat.JSONL and c.count() == 12
    rows, bad = _split(list(c.rows()))
    assert rows == [(0, "d0", "héllo"), (11, "d11", "ok")]
    assert [(r, i) for r, i, _ in bad] == [(1, None), (2, "d2"), (3, 3), (4, None), (5, None), (6, None),
                                           (7, "d7"), (8, None), (9, "d9"), (10, "d10")]
    reasons = [why for _, _, why in bad]
    assert reasons[0].startswith("not JSON") and reasons[1] == "no 'body' (a string)"
    assert reasons[2] == "'doc' is a int, the first row's a str" and reasons[3].startswith("no 'doc'")
    assert reasons[4] == "not a JSON object (a list)" and reasons[5] == "empty line"
    assert "surrogate" in reasons[6] and reasons[7].startswith("not UTF-8")
    assert reasons[8] == "empty text" and reasons[9] == "a int as 'body' (a string)"
    # Without an id column the row number is the id.
    rows, _ = _split(list(open_corpus(f, id_column=None, text_column="body").rows()))
    assert rows[0] == (0, 0, "héllo") and rows[1][:2] == (3, 3)


def _write_parquet(path: Path, ids: list, texts: list, text_type: str = "string") -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": ids, "text": pa.array(texts, type=getattr(pa, text_type)())}), path,
                   row_group_size=3)


def test_parquet_file_and_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(corpus_mod, "_PARQUET_BATCH_ROWS", 2)  # rows cross batch and group borders
    d = tmp_path / "ds"
    d.mkdir()
    _write_parquet(d / "part-0.parquet", [10, 11, 12, 13, 14], ["a", None, "", "d", "e"])
    _write_parquet(d / "part-1.parquet", [15, None, 17], [b"f", b"g", b"\xffh"], "binary")
    c = open_corpus(d)
    assert c.format is CorpusFormat.PARQUET and c.count() == 8
    rows, bad = _split(list(c.rows()))
    assert rows == [(0, 10, "a"), (3, 13, "d"), (4, 14, "e"), (5, 15, "f")]
    assert bad == [(1, 11, "null 'text'"), (2, 12, "empty text"), (6, None, "null 'id'"),
                   (7, 17, "not UTF-8 (byte 1 of the text)")]
    for start in range(9):
        assert [r.row for r in c.rows(start=start)] == list(range(start, 8))
    one = open_corpus(d / "part-0.parquet", id_column=None)
    assert [(r.row, r.id) for r in one.rows() if isinstance(r, Row)] == [(0, 0), (3, 3), (4, 4)]


def test_whole_file_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match=r"^texts .*nope\.txt: no such file"):
        open_corpus(tmp_path / "nope.txt")
    with pytest.raises(OptionError, match=r"is a directory"):
        open_corpus(tmp_path, format="jsonl")
    with pytest.raises(OptionError, match=r"without \*\.parquet"):
        open_corpus(tmp_path)
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(OptionError, match=r"bad\.parquet: not a readable Parquet file"):
        open_corpus(bad)
    p = tmp_path / "p.parquet"
    _write_parquet(p, [1, 2], ["a", "b"])
    with pytest.raises(OptionError, match=r"no column 'body' \(columns: id, text\)"):
        open_corpus(p, text_column="body")
    with pytest.raises(OptionError, match=r"column 'id' is int64, not a string or binary"):
        open_corpus(p, text_column="id", id_column=None)
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": [1.5], "text": ["a"]}), p)
    with pytest.raises(OptionError, match=r"column 'id' is double, not an integer or string"):
        open_corpus(p)
    d = tmp_path / "mixed"
    d.mkdir()
    _write_parquet(d / "a.parquet", [1], ["a"])
    _write_parquet(d / "b.parquet", ["x"], ["b"])
    with pytest.raises(OptionError, match=r"b\.parquet: column 'id' is string, a\.parquet's is int64"):
        open_corpus(d)


def test_pyarrow_missing_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "x.parquet").write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow -> ImportError
    with pytest.raises(EdgeM3Error, match=r"^Parquet needs pyarrow.*pip install 'edge-m3\[parquet\]'$"):
        open_corpus(tmp_path / "x.parquet")
    # Text corpora never import it.
    f = tmp_path / "t.txt"
    f.write_text("a\n")
    assert [r.text for r in open_corpus(f).rows()] == ["a"]  # type: ignore[union-attr]

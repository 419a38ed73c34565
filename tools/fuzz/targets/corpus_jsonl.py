"""The bulk job's JSON-lines input (common.corpus.open_corpus, Corpus.rows): every line is a
Row or a Rejected row; only an unusable file is refused."""

from __future__ import annotations

from edge_m3.common.corpus import Rejected, Row, open_corpus
from tools.fuzz.harness import scratch_file


def run(data: bytes) -> None:
    corpus = open_corpus(scratch_file("in.jsonl", data))
    rows = list(corpus.rows())
    assert [r.row for r in rows] == list(range(len(rows)))
    assert len(rows) == corpus.count()
    assert all(isinstance(r, Rejected) or (isinstance(r, Row) and r.text.strip()) for r in rows)

"""The bulk job's Parquet input (common.corpus.open_corpus, Corpus.rows): a file pyarrow cannot
read is refused by open_corpus or, for a bad page, while reading rows; never a traceback."""

from __future__ import annotations

from edge_m3.common.corpus import Rejected, Row, open_corpus
from tools.fuzz.harness import scratch_file


def run(data: bytes) -> None:
    corpus = open_corpus(scratch_file("in.parquet", data))
    n = corpus.count()
    rows = list(corpus.rows())
    assert [r.row for r in rows] == list(range(len(rows))) and len(rows) == n
    assert all(isinstance(r, Rejected) or (isinstance(r, Row) and r.text.strip()) for r in rows)

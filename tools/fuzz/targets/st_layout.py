"""A sentence-transformers checkpoint's modules.json, 1_Pooling/config.json and
sentence_bert_config.json (families.read_sentence_transformers); the input is a folder blob."""

from __future__ import annotations

from edge_m3.families import read_sentence_transformers
from tools.fuzz.harness import unpack, write_folder


def run(data: bytes) -> None:
    layout = read_sentence_transformers(write_folder(unpack(data)))
    assert layout.max_seq_length is None or layout.max_seq_length >= 2

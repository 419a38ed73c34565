"""The one reader of users' text files (--texts, --vocab-corpus, coverage TEXTS)."""

from __future__ import annotations

from pathlib import Path

import pytest

from edge_m3.common.files import read_lines
from edge_m3.errors import EdgeM3Error


def test_lines_bom_crlf_and_other_breaks(tmp_path: Path) -> None:
    f = tmp_path / "t.txt"
    f.write_bytes("\ufeffa\r\n\nb\u2028c\n".encode())
    assert read_lines(f, "--texts") == ["a", "", "b\u2028c"]


def test_errors_name_option_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "t.txt"
    f.write_bytes(b"ok\nx\xffy\n")
    with pytest.raises(EdgeM3Error, match=r"^--texts .*t\.txt: line 2 is not UTF-8 \(byte 2 of"):
        read_lines(f, "--texts")
    with pytest.raises(EdgeM3Error, match=r"^coverage TEXTS .*nope: cannot read"):
        read_lines(tmp_path / "nope", "coverage TEXTS")

"""Reading a user's text file: one text per line, UTF-8, errors that name the file and line."""

from __future__ import annotations

from pathlib import Path

from edge_m3.errors import EdgeM3Error


def read_lines(path: Path, option: str) -> list[str]:
    """Lines split on "\\n" only (texts may hold other line breaks), a trailing "\\r" and a
    leading BOM dropped; `option` names where the path came from in the one-line error."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise EdgeM3Error(f"{option} {path}: cannot read ({exc.strerror})") from None
    lines = raw.removeprefix(b"\xef\xbb\xbf").split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for number, line in enumerate(lines, 1):
        try:
            out.append(line.decode("utf-8").removesuffix("\r"))
        except UnicodeDecodeError as exc:
            raise EdgeM3Error(f"{option} {path}: line {number} is not UTF-8 "
                              f"(byte {exc.start + 1} of the line)") from None
    return out

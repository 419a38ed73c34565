"""Files: users' text files, hashes, and writes that a reader never sees half done.

One place for each: reading a UTF-8 text file with errors that name the file and line, the
streamed sha256 of the manifest, writing a file (text, JSON or a copy) through a temp name and a
rename, replacing a whole directory atomically, and checking an output path before heavy work.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from edge_m3.errors import OptionError


def read_lines(path: Path, field: str) -> list[str]:
    """Lines split on "\\n" only (texts may hold other line breaks), a trailing "\\r" and a
    leading BOM dropped; `field` is the option the path came from (the one-line error's)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise OptionError(field, path, f"cannot read ({exc.strerror})") from None
    lines = raw.removeprefix(b"\xef\xbb\xbf").split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for number, line in enumerate(lines, 1):
        try:
            out.append(line.decode("utf-8").removesuffix("\r"))
        except UnicodeDecodeError as exc:
            raise OptionError(field, path, f"line {number} is not UTF-8 "
                              f"(byte {exc.start + 1} of the line)") from None
    return out


def read_texts(path: Path, field: str = "texts") -> list[str]:
    """The texts file (option `field`): one text per line, UTF-8 (read_lines).
    An empty file is an error: a wrong file should not pass unnoticed (embed would have
    nothing to do, verify would gate on the built-in set alone)."""
    texts = read_lines(path, field)
    if not texts:
        raise OptionError(field, path, "no text in the file (one text per line)")
    return texts


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    """Streamed sha256: model files are hundreds of MB."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def file_entries(directory: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """`{name: {sha256, size}}` for the manifest."""
    return {n: {"sha256": sha256_file(directory / n), "size": (directory / n).stat().st_size}
            for n in sorted(names)}


def _replace_with(path: Path, fill: Callable[[Path], None], field: str | None) -> None:
    """Fill a temp file beside `path`, then rename it over `path`.

    With `field` (the option the path came from), an OSError becomes the one-line user error.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fill(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if field is None:
            raise
        raise OptionError(field, path, f"cannot write ({exc.strerror})") from None
    except BaseException:  # the content failed (a bad text, Ctrl-C): nothing is left behind
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def fill_atomic(path: Path, fill: Callable[[Path], None], field: str | None = None) -> None:
    """`fill(tmp)` writes the content (any writer: Parquet, .npy) to a temp name beside `path`,
    renamed over `path` when it returns: a reader, or a resumed job, never sees half a file."""
    _replace_with(path, fill, field)


def write_atomic(path: Path, text: str, field: str | None = None) -> None:
    """Write text through a temp file and rename: a reader never sees half a file."""
    _replace_with(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), field)


def write_lines_atomic(path: Path, lines: Iterable[str], field: str | None = None) -> None:
    """Lines written as they come (thousands of embeddings need not fit in memory), through a
    temp file and a rename like `write_atomic`."""
    def fill(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            for line in lines:
                fh.write(line + "\n")

    _replace_with(path, fill, field)


def write_json(path: Path, data: Any, field: str | None = None) -> None:
    """JSON (indented, UTF-8 as is) written atomically."""
    write_atomic(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n", field)


def copy_atomic(src: Path, dst: Path) -> None:
    """Copy a file so that `dst` is either absent, the old file, or the whole new one."""
    _replace_with(dst, lambda tmp: shutil.copyfile(src, tmp), None)


def check_writable(out: Path, field: str, is_file: bool = False) -> None:
    """Fail before any heavy work when the directory `out` (a file with `is_file`) could not be
    written (exit 2 in the CLI): the write itself comes after the model ran, too late. `field`
    is the option the path came from."""
    out = Path(out)
    probe = out.resolve().parent
    while not probe.exists():
        probe = probe.parent
    if out.exists() and out.is_dir() == is_file:
        raise OptionError(field, out, f"exists and is {'a directory' if is_file else 'not a directory'}")
    if not probe.is_dir():
        raise OptionError(field, out, f"{probe} is not a directory")
    try:  # a real write: os.access says yes to root even on read-only mounts
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as exc:
        raise OptionError(field, out, f"{probe} is not writable ({exc.strerror})") from None


@contextlib.contextmanager
def atomic_dir(out_dir: Path) -> Iterator[Path]:
    """Yield a private temp dir; on success it replaces out_dir, on any failure it vanishes.

    The previous directory stays in place (and complete) until the new one is fully written.
    """
    out_dir = out_dir.resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.building-", dir=out_dir.parent))
    os.chmod(tmp, 0o755)  # mkdtemp's 0700 would make the bundle unreadable to others
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if out_dir.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
        os.replace(out_dir, old / "bundle")
    try:
        os.replace(tmp, out_dir)
    except BaseException:
        if old is not None:
            os.replace(old / "bundle", out_dir)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

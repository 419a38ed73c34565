"""One exception type for user-facing failures, so the CLI can exit 2 with one clear line."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence

# The characters Python's str.splitlines breaks a line at. A message quoting a string from a file
# (a name, a token) escapes each of these as Python's repr does, so that a refusal is one line in
# every language. Generated into both kits (through edge_m3.spec, which holds the kits' rules),
# whose exception constructors (Kotlin's EdgeM3Exception, Swift's EdgeM3Error.init) apply
# `escape_line_breaks` to every message, as EdgeM3Error's does here.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def escape_line_breaks(message: str) -> str:
    """`message` with every line break escaped as Python's repr escapes it: one line."""
    return "".join(repr(ch)[1:-1] if ch in LINE_BREAKS else ch for ch in message)


class EdgeM3Error(Exception):
    """Bad input (file, option, text): the message names the culprit and fits on one line.

    The line breaks of a message are escaped here, once for every raise (as the kits' exception
    constructors do): a name or key quoted from a file cannot break a refusal into two lines
    (the fuzzers found three such messages, each quoting a field a different way)."""

    # The kits' error kind this refusal is (spec.KIT_ERROR_KINDS): subclasses that map to
    # another kind (CorruptIndexError, WriteRefused) set theirs, so a harness reads `exc.kind`.
    kind: str = "invalid_input"

    def __init__(self, *args: object) -> None:
        if args and isinstance(args[0], str):
            args = (escape_line_breaks(args[0]), *args[1:])
        super().__init__(*args)


class OptionError(EdgeM3Error):
    """A bad value of one option, raised where the value is understood.

    Below the CLI an option is known by its name (`field`, the argparse dest: "runtime",
    "seq_lens"), never by its flag: the CLI, the one place that knows how the user spelled it,
    renders the line with `render(flags)`. `why` may point at other options by `{}`, filled in
    order from `mentions`. Outside the CLI (a library call) the names stand as they are.
    """

    def __init__(self, field: str | None, value: object, why: str, mentions: Sequence[str] = ()) -> None:
        self.field, self.value, self.why, self.mentions = field, value, why, tuple(mentions)
        super().__init__(self.render({}))

    def render(self, flags: Mapping[str, str]) -> str:
        """The one line, each option named as `flags` spells it (else by its name)."""
        why = self.why.format(*(flags.get(m, m) for m in self.mentions)) if self.mentions else self.why
        head = [flags.get(self.field, self.field)] if self.field else []
        head += [] if self.value is None else [str(self.value)]
        return escape_line_breaks(f"{' '.join(head)}: {why}" if head else why)


def one_line(detail: object, limit: int = 200) -> str:
    """Another library's message (a parser's, a pickle's) fit for an EdgeM3Error: its line
    breaks and runs of white space made single spaces, cut at `limit` characters."""
    text = " ".join(str(detail).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


# The errnos of a full disk or an exhausted quota.
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class DiskFull(EdgeM3Error):
    """A write failed for want of space: the machine's disk, not the user's input, but theirs to
    fix, so one line naming the file and what is free there, never a traceback (a build writes
    GBs of temporary files; the previous bundle is untouched, as on any failed build)."""

    kind = "write_failed"  # the kits' kind for a write a full disk refused


def chain(exc: BaseException | None) -> Iterator[BaseException]:
    """`exc` and the exceptions it was raised from or while handling (`__cause__`, else
    `__context__`, which `raise ... from None` hides from a traceback but keeps), each once."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def disk_full(exc: BaseException) -> DiskFull | None:
    """`exc` (or an exception it was raised from) as a DiskFull if it is a full disk's, else
    None (raise it as it is). An OSError tells by its errno; TensorFlow's file writers raise
    their own type (ResourceExhaustedError: "PATH; No space left on device"), told by the C
    library's message. A failed write() names no file: the free space is then TMPDIR's."""
    for e in chain(exc):
        if isinstance(e, OSError) and e.errno in DISK_FULL:
            return _disk_full(os.fsdecode(e.filename) if e.filename else None)
        text = str(e)
        for code in DISK_FULL:
            if not isinstance(e, OSError) and os.strerror(code) in text:
                where = text.split(";", 1)[0].strip() if ";" in text else ""
                return _disk_full(where if os.path.isabs(where) else None)
    return None


def _disk_full(where: str | None) -> DiskFull:
    probe = os.path.dirname(os.path.abspath(where)) if where else tempfile.gettempdir()
    while probe and not os.path.isdir(probe) and probe != os.path.dirname(probe):
        probe = os.path.dirname(probe)
    try:
        n = shutil.disk_usage(probe).free
        free = f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"
        free += f" free in {probe}"
    except OSError:
        free = f"free space in {probe} unknown"
    return DiskFull(f"no space left on the disk{f' writing {where}' if where else ''} ({free}): "
                    "free some space, or point TMPDIR (temporary files) or the output at a larger disk")

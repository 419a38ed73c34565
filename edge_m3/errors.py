"""One exception type for user-facing failures, so the CLI can exit 2 with one clear line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class EdgeM3Error(Exception):
    """Bad input (file, option, text): the message names the culprit and fits on one line."""

    # The kits' error kind this refusal is (contract.KIT_ERROR_KINDS): subclasses that map to
    # another kind (CorruptIndexError, WriteRefused) set theirs, so a harness reads `exc.kind`.
    kind: str = "invalid_input"


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
        return f"{' '.join(head)}: {why}" if head else why


def one_line(detail: object, limit: int = 200) -> str:
    """Another library's message (a parser's, a pickle's) fit for an EdgeM3Error: its line
    breaks and runs of white space made single spaces, cut at `limit` characters."""
    text = " ".join(str(detail).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"

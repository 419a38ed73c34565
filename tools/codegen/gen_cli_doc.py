"""Write docs/cli.md, the command-line reference, from edge_m3/cli.py's parser (the one definition).

    python -m tools.codegen.gen_cli_doc            # rewrite docs/cli.md
    python -m tools.codegen.gen_cli_doc --check    # exit 1 if it is stale (make lint, the tests)

Every command's usage, description, options and examples come from the parser's own help texts,
so `edge-m3 COMMAND -h` and this page cannot disagree.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from tools.codegen import ROOT, generate, header

DOC = ROOT / "docs/cli.md"
HEADER = f"<!-- {header('gen_cli_doc', 'edge_m3/cli.py')} -->"
EVERY = ("help", "quiet", "verbose")  # every command's, listed once at the top
WIDTH = "100"  # the usage lines' wrap: fixed, so the page does not depend on the terminal


@contextlib.contextmanager
def _columns() -> Iterator[None]:
    """argparse wraps usage at the terminal's width (COLUMNS): fixed while the page is rendered."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    takes = action.nargs != 0
    metavar = f" {action.metavar or action.dest.upper()}" if takes else ""
    return ", ".join(f"`{flag}{metavar}`" for flag in action.option_strings)


def _options(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> list[str]:
    rows = ["| argument or option | what it does |", "| --- | --- |"]
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        if action.dest in skip:
            continue
        rows.append(f"| {_flags(action)} | {_cell(action.help or '')} |")
    return rows


def render() -> str:
    """docs/cli.md's text."""
    from edge_m3.cli import build_parser

    with _columns():
        return _render(build_parser())


def _render(parser: argparse.ArgumentParser) -> str:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in sub._choices_actions}
    out = [HEADER, "", "# Command line reference", "", "```text", parser.format_usage().rstrip(), "```", "",
           "```text", parser.description.rstrip(), "```", "", parser.epilog.rstrip(), "",
           "## Options of every command", "",
           "`-h`, `-q` and `-v` are also accepted after the command name.", "",
           *_options(parser), "", "## Commands", "", "| command | what it does |", "| --- | --- |"]
    out += [f"| [`{name}`](#edge-m3-{name}) | {_cell(helps[name])} |" for name in sub.choices]
    for name, cmd in sub.choices.items():
        examples = (cmd.epilog or "").splitlines()[1:]  # after "examples:"
        out += ["", f"## edge-m3 {name}", "", f"{helps[name]}.", "", "```text", cmd.format_usage().rstrip(),
                "```", "", cmd.description.rstrip(), "", *_options(cmd, EVERY), "", "Examples:", "", "```sh",
                *(e.strip() for e in examples), "```"]
    return "\n".join(out) + "\n"


def outputs() -> dict[Path, str]:
    """docs/cli.md and its text."""
    return {DOC: render()}


def main(argv: list[str] | None = None) -> int:
    return generate("gen_cli_doc", __doc__, outputs, argv)


if __name__ == "__main__":
    raise SystemExit(main())

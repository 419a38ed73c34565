"""The README's fenced blocks and shell commands, as tests/test_readme.py runs them; the quickstarts'
app snippets as the kit tests compile them (tests/test_swift_litert_runner.py: the Swift one in an
app target beside the kit)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


@dataclass(frozen=True)
class Block:
    """One fenced block of the README: its language, the rest of its info string, the headings it
    sits under, its text."""

    lang: str
    info: str
    section: str  # the `## ` heading
    title: str  # the `### ` heading ("" outside one)
    text: str


def readme_blocks() -> list[Block]:
    """Every fenced block, in order."""
    out, section, title, fence = [], "", "", None
    lines: list[str] = []
    for line in README.read_text(encoding="utf-8").splitlines():
        if fence is None:
            if line.startswith("## "):
                section, title = line[3:].strip(), ""
            elif line.startswith("### "):
                title = line[4:].strip()
            elif line.startswith("```"):
                fence, lines = line[3:].strip(), []
            continue
        if line.startswith("```"):
            lang, _, info = fence.partition(" ")
            out.append(Block(lang, info.strip(), section, title, "\n".join(lines) + "\n"))
            fence = None
        else:
            lines.append(line)
    assert fence is None, "README.md: a fenced block is not closed"
    return out


def shell_commands(text: str) -> list[str]:
    """A shell block's commands: continued lines joined, a here-document kept with its command,
    comments and blank lines dropped."""
    cmds, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        while line.endswith("\\") and i < len(lines):
            line = line[:-1] + " " + lines[i].strip()
            i += 1
        line = re.sub(r"\s+# [^'\"]*$", "", line)  # a trailing comment (none holds a quote)
        heredoc = re.search(r"<<-?'?(\w+)'?", line)
        if heredoc:
            body = []
            while lines[i] != heredoc.group(1):
                body.append(lines[i])
                i += 1
            line = "\n".join([line, *body, lines[i]])
            i += 1
        cmds.append(line)
    return cmds


def quickstarts() -> dict[str, list[Block]]:
    """The quickstarts' blocks by title, in the README's order."""
    out: dict[str, list[Block]] = {}
    for b in readme_blocks():
        if b.section == "Quickstarts":
            out.setdefault(b.title, []).append(b)
    return out


def kotlin_snippet() -> str:
    """The Android quickstart's app code, in a function of an app file (its one plain kotlin block)."""
    (app,) = [b for b in quickstarts()["An Android app"] if b.lang == "kotlin" and not b.info]
    return ("package readme\n\nimport android.content.Context\nimport android.util.Log\nimport dev.edgem3.*\n\n"
            "suspend fun quickstart(context: Context) {\n" + app.text + "}\n")


def swift_snippet() -> str:
    """The iOS quickstart's app code, in a function of an app file (its one swift block)."""
    (app,) = [b for b in quickstarts()["An iOS app"] if b.lang == "swift"]
    return "func quickstart() async throws {\n" + app.text + "}\n"

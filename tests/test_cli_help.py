"""The command line explains itself (issue 55 item 3): --version, help for every command and
option, closed sets named in help and in errors, one spelling per shared flag, docs/cli.md current."""

from __future__ import annotations

import argparse
import importlib.metadata

import pytest

from edge_m3.cli import COMMANDS, _build_parser, main
from edge_m3.harness.bench import CACHE_MODES
from edge_m3.runtime.registry import RUNTIMES, WeightCache
from edge_m3.spec import COLBERT_STORES, DENSE_STORES, FORMATS, HEADS, QUANTS, SCORE_MODES

CHECK_CACHE = (WeightCache.MEMORY.kind, WeightCache.OFF.kind)


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = _build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _action(command: str, flag: str) -> argparse.Action:
    return next(a for a in _commands()[command]._actions if flag in a.option_strings)


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"edge-m3 {importlib.metadata.version('edge-m3')}\n"


def test_top_help_is_for_users(capsys: pytest.CaptureFixture[str]) -> None:
    """What edge-m3 does and its commands by job; not the developers' docstring."""
    with pytest.raises(SystemExit):
        main(["-h"])
    out = capsys.readouterr().out
    assert "OptionError" not in out and "typed options object" not in out
    assert "commands, by job:" in out
    for name in _commands():
        assert name in out


def test_every_command_and_option_explains_itself() -> None:
    """A one-line help, a description, examples that run the command, and help for every option."""
    commands = _commands()
    assert set(commands) == set(COMMANDS)
    helps = {c.dest: c.help for c in next(a for a in _build_parser()._actions
                                          if isinstance(a, argparse._SubParsersAction))._choices_actions}
    for name, cmd in commands.items():
        assert helps[name] and "\n" not in helps[name], name
        assert cmd.description, name
        assert isinstance(cmd.formatter_class, type) and issubclass(
            cmd.formatter_class, argparse.RawDescriptionHelpFormatter), name
        lines = (cmd.epilog or "").splitlines()
        assert lines[0] == "examples:" and len(lines) >= 2, name
        assert all(line.strip().startswith(f"edge-m3 {name} ") for line in lines[1:]), name
        for action in cmd._actions:
            assert action.help, (name, action.dest)
        assert f"edge-m3 {name}" in cmd.format_help()


# (argv ending in the closed-set option and a value it refuses, before any heavy work; the
# accepted values its error must name).
REFUSED = [
    (["build", "--kits", "none", "--quant", "int7"], QUANTS),
    (["build", "--kits", "none", "--heads", "pooler"], HEADS),
    (["build", "--kits", "none", "--formats", "coreml"], FORMATS),
    (["embed", "b", "x", "--runtime", "tpu"], tuple(RUNTIMES)),
    (["embed", "b", "--out", "o.jsonl", "--outputs", "pooler"], HEADS),
    (["embed", "b", "--out", "o.jsonl", "--engine", "spark"], ("local", "ray")),
    (["verify", "b", "--reference", "BAAI/bge-m3", "--runtime", "tpu"], tuple(RUNTIMES)),
    (["check", "b", "--runtime", "tpu"], tuple(RUNTIMES)),
    (["check", "b", "--weight-cache", "disk"], CHECK_CACHE),
    (["bench", "b", "--runtimes", "tpu"], tuple(RUNTIMES)),
    (["bench", "b", "--weight-cache", "disk"], CACHE_MODES),
    (["index", "b", "c.txt", "--out", "ix", "--runtime", "tpu"], tuple(RUNTIMES)),
    (["index", "b", "c.txt", "--out", "ix", "--dense", "fp8"], DENSE_STORES),
    (["index", "b", "c.txt", "--out", "ix", "--colbert", "fp8"], COLBERT_STORES),
    (["search", "ix", "--queries", "q.txt", "--mode", "bm25"], SCORE_MODES),
    (["search", "ix", "--queries", "q.txt", "--runtime", "tpu"], tuple(RUNTIMES)),
    (["add", "ix", "c.txt", "--runtime", "tpu"], tuple(RUNTIMES)),
]


@pytest.mark.parametrize(("argv", "accepted"), REFUSED, ids=[" ".join(a[:1] + a[-2:]) for a, _ in REFUSED])
def test_a_refused_value_names_the_accepted_ones(argv: list[str], accepted: tuple[str, ...],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """One line on stderr, exit 2, every accepted value named; and the option's help names them too."""
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("edge-m3: error: "), err
    assert all(value in err for value in accepted), err
    help_ = _action(argv[0], argv[-2]).help or ""
    assert all(value in help_ for value in accepted), help_


SHARED = ["--runtime", "--threads", "--id-column", "--text-column", "--no-chunk", "--bundle",
          "--repeats", "--warmup", "--report", "-q", "-v"]


@pytest.mark.parametrize("flag", SHARED)
def test_a_shared_flag_is_one_definition(flag: str) -> None:
    """Spelled, typed and explained the same on every command that shows it (defaults may differ
    for --threads and --report; bench's --threads is a list, --runtime a list on verify and check)."""
    seen = []
    for name, cmd in _commands().items():
        for action in cmd._actions:
            if flag in action.option_strings and action.help != argparse.SUPPRESS:
                if name == "bench" and flag == "--threads":
                    continue
                seen.append((name, action))
    assert len(seen) >= 2, flag
    lists = {"verify", "check"} if flag == "--runtime" else set()
    for group in ([s for s in seen if s[0] in lists], [s for s in seen if s[0] not in lists]):
        if not group:
            continue
        first = group[0][1]
        for name, action in group[1:]:
            assert action.option_strings == first.option_strings, (flag, name)
            assert action.type == first.type and type(action) is type(first), (flag, name)
            if flag not in ("--threads", "--report"):
                assert action.help == first.help, (flag, name)


def test_the_list_commands_take_both_runtime_spellings() -> None:
    """verify and check say --runtime, bench --runtimes (all comma lists): each takes the other
    spelling too, not shown."""
    parser = _build_parser()
    assert parser.parse_args(["bench", "b", "--runtime", "litert"]).runtimes == "litert"
    assert parser.parse_args(["check", "b", "--runtimes", "litert"]).runtime == "litert"
    assert parser.parse_args(["verify", "b", "--reference", "r", "--runtimes", "litert"]).runtime == "litert"
    assert "--runtime " not in _commands()["bench"].format_usage()
    assert "--runtimes" not in _commands()["check"].format_help()


@pytest.mark.parametrize("argv", [["-q", "embed", "b", "x"], ["embed", "-q", "b", "x"],
                                  ["embed", "b", "x", "--quiet"]])
def test_quiet_goes_before_or_after_the_command(argv: list[str]) -> None:
    a = _build_parser().parse_args(argv)
    assert a.quiet is True and a.verbose is False


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_takes_quiet_and_verbose(command: str) -> None:
    positional = {"build": [], "embed": ["b"], "verify": ["b", "--reference", "r"], "check": ["b"],
                  "coverage": ["b", "t"], "bench": ["b"], "index": ["b", "c", "--out", "o"],
                  "search": ["ix", "--queries", "q"], "add": ["ix", "c"], "remove": ["ix", "ids"],
                  "compact": ["ix"]}[command]
    parser = _build_parser()
    assert parser.parse_args([command, *positional]).quiet is False
    a = parser.parse_args([command, *positional, "-v", "-q"])
    assert a.quiet is True and a.verbose is True
    a = parser.parse_args(["--verbose", command, *positional])
    assert a.verbose is True and a.quiet is False

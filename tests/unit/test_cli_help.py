"""The command line explains itself: every command named in `kube-reloader --help`, every
option of every parser with a help text, every controller flag with its default, and a
mistyped command answered with the nearest one."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from kube_reloader import cli
from kube_reloader.cli import flagset

#: the commands whose parser is walked (`agent` builds its parser inside `main`)
WALKED = ("run", "lint", "explain", "impact", "audit", "agent", "dev-cluster")


class Caught(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__(parser.prog)
        self.parser = parser


def parser_of(command: str, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The parser `kube-reloader COMMAND` really builds, caught when it starts parsing."""

    def catch(self: argparse.ArgumentParser, *_args: object, **_kw: object) -> None:
        raise Caught(self)

    with monkeypatch.context() as m:
        m.setattr(argparse.ArgumentParser, "parse_args", catch)
        m.setattr(argparse.ArgumentParser, "parse_known_args", catch)
        with pytest.raises(Caught) as caught:
            cli.main([command, "x/y"])
    return caught.value.parser


def walk(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.Action]]:
    """Every action of the parser and of its sub-commands, with the parser's name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from walk(sub)
        yield parser.prog, action


def expanded_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    return parser._get_formatter()._expand_help(action)


@pytest.mark.parametrize(
    "command",
    WALKED,
)
def test_every_option_of_every_parser_has_a_help_text(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    parser = parser_of(command, monkeypatch)
    assert parser.description, f"{parser.prog} has no description"
    missing = [
        f"{prog} {'/'.join(a.option_strings) or a.dest}"
        for prog, a in walk(parser)
        if not (a.help or "").strip()
    ]
    assert missing == []


def test_the_top_level_help_names_every_command_with_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    for command, text in cli.COMMANDS.items():
        assert any(ln.split() and ln.split()[0] == command and text in ln for ln in lines), command
    assert set(WALKED) | {"version", "help"} == set(cli.COMMANDS)


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_every_command_the_help_names_answers_help(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main([command, "--help"] if command not in ("version", "help") else ["help", command])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("usage: kube-reloader")


@pytest.mark.parametrize("tool", ["run", "explain", "impact"])
def test_every_controller_flag_shows_its_default(tool: str) -> None:
    parser = parser_of_tool(tool)
    flags = {a.dest for a in flagset.build_parser()._actions if a.option_strings}
    without = [
        "/".join(a.option_strings)
        for a in parser._actions
        if a.dest in flags - {"help"} and "(default: " not in expanded_help(parser, a)
    ]
    assert without == []


def parser_of_tool(name: str) -> argparse.ArgumentParser:
    from kube_reloader.cli import explain, impact

    builds = {"run": flagset.build_parser, "explain": explain.build_parser}
    return builds.get(name, impact.build_parser)()


def test_a_boolean_flag_shows_the_pflag_form_and_a_list_says_none() -> None:
    text = flagset.build_parser().format_help()
    assert "--auto-reload-all[=BOOL]" in text
    assert "--freeze[=BOOL]" in text
    assert "(default: none)" in text  # an empty string slice, not `[]`
    assert "(default: [])" not in text
    assert "(default: None)" not in text


TYPOS = [
    (["lnt", "x"], "did you mean 'lint'?"),
    (["explian", "deploy/x"], "did you mean 'explain'?"),
    (["dev-clustr", "up"], "did you mean 'dev-cluster'?"),
    (["zzzz"], "commands: run, lint, explain"),
    (["help", "imapct"], "did you mean 'impact'?"),
]


@pytest.mark.parametrize(("argv", "hint"), TYPOS)
def test_a_mistyped_command_is_one_line_with_the_nearest_command_and_exit_2(
    argv: list[str], hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert hint in err
    assert err.count("\n") == 1
    assert "unrecognized arguments" not in err


def test_the_controller_with_flags_only_still_parses_them_and_a_bad_flag_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # flags with their value apart, as Stakater's chart may pass them: parsed, then the
    # (missing) kubeconfig stops the start, not an "unknown command"
    argv = ["--namespaces-to-ignore", "kube-system", "--kubeconfig", "/nonexistent/kubeconfig"]
    assert cli.main(argv) == 1
    assert "kubeconfig" in capsys.readouterr().err
    assert cli.main(["--no-such-flag"]) == 1
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


def test_help_without_a_command_is_the_controllers_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "commands:" in out
    assert "--auto-reload-all" in out

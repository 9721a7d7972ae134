"""`engram COMMAND` builds only COMMAND's sub-parser (the whole parser cost ~15 ms of every call): it must parse and
explain itself exactly as the whole parser does, and anything that is not a command still gets the whole parser."""

from __future__ import annotations

import argparse

import pytest

from engram_core.cli import commands
from engram_core.cli.commands import build_parser


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


ALL = _subparsers(build_parser())


def test_a_command_builds_only_its_own_sub_parser() -> None:
    assert set(_subparsers(build_parser("recall"))) == {"recall"}
    assert len(ALL) > 20


@pytest.mark.parametrize("name", sorted(ALL))
def test_each_command_parses_and_helps_as_the_whole_parser_does(name: str) -> None:
    alone = _subparsers(build_parser(name))[name]
    assert alone.format_help() == ALL[name].format_help()
    assert [a.dest for a in alone._actions] == [a.dest for a in ALL[name]._actions]


@pytest.mark.parametrize(
    "argv",
    [
        ["recall", "why [/] fails", "--limit", "3", "--scope", "project", "--json"],
        ["store", "a", "b", "--type", "procedural", "--tags", "x,y"],
        ["evolve", "--rollback"],
        ["import", "f.jsonl", "--dates", "age", "--skip-bad"],
        ["stop", "--timeout", "5"],
    ],
)
def test_the_same_arguments_give_the_same_namespace(argv: list[str]) -> None:
    assert vars(build_parser(argv[0]).parse_args(argv)) == vars(build_parser().parse_args(argv))


def test_an_unknown_command_is_refused_with_every_command_listed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        commands.main(["recal", "x"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "recal" in err and "recall" in err and "export" in err


def test_a_wrong_option_of_a_built_command_is_still_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        commands.main(["recall", "x", "--limt", "3"])
    assert exc.value.code == 2
    assert "--limt" in capsys.readouterr().err

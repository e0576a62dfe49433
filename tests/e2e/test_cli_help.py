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


#: Libraries that take seconds to import; `geomlens --help` needs none of them.
HEAVY = ("torch", "transformers", "nnsight", "transformer_lens", "sae_lens", "matplotlib",
         "scipy", "sklearn", "pandas", "datasets")  # fmt: skip


def _heavy_imports(arguments: list[str], before: str = "") -> set[str]:
    """The heavy libraries a fresh interpreter has imported after ``geomlens ARGUMENTS``."""
    import subprocess
    import sys

    code = (
        f"{before}\n"
        "import sys\n"
        "from geomlens.cli import app\n"
        "try:\n"
        f"    app({arguments!r}, prog_name='geomlens')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('IMPORTED', ' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    line = next(x for x in ran.stdout.splitlines() if x.startswith("IMPORTED"))
    return set(line.split()[1:]) & set(HEAVY)


@pytest.mark.parametrize(
    "arguments", [["--help"], ["run", "--help"], ["report", "--help"], ["list"]]
)
def test_the_help_imports_no_heavy_library(arguments):
    assert _heavy_imports(arguments) == set(), "imported for help alone"


def test_list_without_plugins_names_every_built_in():
    """The light listing (no torch) still shows every built-in and its aliases."""
    from geomlens.analyses.registry import ANALYSES, builtin_analyses

    shown = CliRunner().invoke(app, ["list"], env=WIDE, terminal_width=400)
    assert shown.exit_code == 0, shown.output
    listed = [line.split()[0] for line in shown.output.splitlines() if not line.startswith(" ")]
    # Every built-in, in order (an analysis another test registered on this worker may be listed too).
    assert [name for name in listed if name in builtin_analyses()] == builtin_analyses()
    for alias in ANALYSES.aliases():
        assert alias in shown.output


def test_the_heavy_import_check_sees_a_planted_import():
    assert "torch" in _heavy_imports(["--help"], before="import torch")


@pytest.mark.parametrize("path", _commands(), ids=lambda path: " ".join(path) or "geomlens")
def test_a_flag_is_shown_as_a_flag_not_as_taking_a_value(path):
    """`--quick <bool>` read as if --quick took a value; a flag is shown bare, and a repeatable
    option by the value it takes each time (`--analysis <str>`, not `<list[str]>`)."""
    shown = CliRunner().invoke(app, [*path, "--help"], env=WIDE).output
    assert "<bool>" not in shown, shown
    assert "<list[" not in shown, shown

"""The ``geomlens`` Typer app itself; the command modules add their commands to it."""

from typing import Any

import typer
from typer.core import TyperArgument, TyperOption


def _element_type(text: str | None) -> str | None:
    """A repeatable parameter takes one value each time: "<str>", not "<list[str]>"."""
    if isinstance(text, str) and text.startswith("<list[") and text.endswith("]>"):
        return f"<{text[len('<list[') : -len(']>')]}>"
    return text


def _flags_shown_as_flags() -> None:
    """``--help`` shows a flag as a flag: Typer writes "<bool>" beside every boolean option
    (``--quick <bool>``), as if it took a value, and "<list[str]>" beside a repeatable option
    or argument, as if it took a Python list."""
    shown = TyperOption.display_type_rich
    if getattr(shown, "geomlens_flags", False):
        return
    shown_argument = TyperArgument.display_type_rich

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        if self.is_flag and self.metavar is None:
            return None
        return _element_type(shown(self, ctx))

    def argument_type_rich(self: TyperArgument, ctx: Any) -> str | None:
        return _element_type(shown_argument(self, ctx))

    display_type_rich.geomlens_flags = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]
    TyperArgument.display_type_rich = argument_type_rich  # type: ignore[method-assign,assignment]


_flags_shown_as_flags()

app = typer.Typer(
    help="Representation-geometry analyses for any Hugging Face model, with theory curves.",
    pretty_exceptions_show_locals=False,
    # Markdown: a docstring's hard-wrapped lines join into one paragraph, as written.
    rich_markup_mode="markdown",
)


@app.callback(invoke_without_command=True)
def _main(context: typer.Context) -> None:
    """A bare ``geomlens`` prints the help and succeeds (asking for help is not an error)."""
    if context.invoked_subcommand is None:
        typer.echo(context.get_help())
        raise typer.Exit(code=0)

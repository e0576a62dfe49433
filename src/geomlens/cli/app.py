"""The ``geomlens`` Typer app itself; the command modules add their commands to it."""

import typer

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

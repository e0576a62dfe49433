"""The ``geomlens new-plugin`` command (mounted on the main CLI by ``geomlens.cli``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def new_plugin_command(
    name: Annotated[str, typer.Argument(help="Analysis name, e.g. linear-cka.")],
    directory: Annotated[
        Path, typer.Option("--dir", help="Folder to create geomlens-NAME in.")
    ] = Path("."),
) -> None:
    """Scaffold a plugin package: pyproject with the entry point, an analysis, its tests."""
    from geomlens.scaffold import new_plugin

    try:
        root = new_plugin(name, directory)
    except (ValueError, FileExistsError) as error:
        typer.secho(f"error: {error}", fg=typer.colors.RED, err=True)
        raise typer.Exit(code=2) from error
    typer.echo(f"wrote {root}")
    typer.echo(f'next: cd {root} && pip install -e ".[test]" && geomlens list && pytest')

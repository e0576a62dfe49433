"""Command-line options shared by every command that loads a model (run, check, sites, report,
sae train).

One definition each, so that the same flag means the same thing, with the same default, in
every command."""

from __future__ import annotations

import ast
from typing import Annotated, Any

import typer

from geomlens.run_defaults import DEFAULT_BACKEND, DEFAULT_MODEL

__all__ = [
    "DEFAULT_BACKEND",
    "DEFAULT_MODEL",
    "BackendOption",
    "BatchSizeOption",
    "DeviceOption",
    "MaxLengthOption",
    "ModelArgument",
    "ModelOption",
    "SeedOption",
    "DtypeOption",
    "TrustRemoteCodeOption",
    "parse_option",
]

ModelOption = Annotated[
    str,
    typer.Option(
        "--model", "-m", help="HF model name or local path (default: bundled all-MiniLM-L6-v2)."
    ),
]
#: MODEL as a positional argument (check, sites).
ModelArgument = Annotated[str, typer.Argument(help="HF model name or local path.")]
BackendOption = Annotated[str, typer.Option("--backend", "-b", help="transformer-lens or nnsight.")]
DeviceOption = Annotated[
    str | None,
    typer.Option("--device", help="cpu, cuda, cuda:1, mps (default: where torch puts it)."),
]
TrustRemoteCodeOption = Annotated[
    bool,
    typer.Option(
        "--trust-remote-code",
        help="Run Python code shipped with the model's files (off by default; recorded in results).",
    ),
]
BatchSizeOption = Annotated[int, typer.Option("--batch-size", help="Inputs per forward pass.")]
MaxLengthOption = Annotated[
    int | None,
    typer.Option("--max-length", help="Truncate inputs to this many tokens (default: keep all)."),
]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed of every random choice.")]
DtypeOption = Annotated[
    str | None,
    typer.Option("--dtype", help="Model weights: float32 (default), bfloat16 or float16."),
]


def parse_option(text: str) -> tuple[str, Any]:
    """One ``--option KEY=VALUE`` (run, sweep): a Python literal where VALUE is one, else the
    text; ``-`` in KEY reads as ``_`` (``n-bootstrap=50`` is ``n_bootstrap``)."""
    from geomlens.cli.errors import fail

    key, equals, raw = text.partition("=")
    if not equals or not key.strip():
        raise fail(f"--option takes KEY=VALUE (e.g. pooling=last); got {text!r}.")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    return key.strip().replace("-", "_"), value

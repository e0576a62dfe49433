"""Command-line options shared by every command that loads a model (run, check, sites, report).

One definition each, so that the same flag means the same thing, with the same default, in
every command."""

from __future__ import annotations

from typing import Annotated

import typer

ModelOption = Annotated[
    str,
    typer.Option(
        "--model", "-m", help="HF model name or local path (default: bundled all-MiniLM-L6-v2)."
    ),
]
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

"""The ``geomlens`` command: list analyses, run one on a model, check a model, theory curves."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    help="Representation-geometry analyses for any Hugging Face model, with theory curves.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

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


def _fail(message: str) -> typer.Exit:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(code=2)


def _parse_option(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise _fail(f"--option takes KEY=VALUE (e.g. pooling=last); got {text!r}.")
    key, raw = text.split("=", 1)
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    return key.strip().replace("-", "_"), value


def load_data(path: Path | None, limit: int | None) -> Any:
    """Texts from a .txt (one per line), .jsonl (objects with 'text' and label columns) or
    .json file; the bundled standard-library corpus when no path is given."""
    if path is None:
        from geomlens.data.corpus import stdlib_paragraphs

        return stdlib_paragraphs(limit or 64)
    if not path.exists():
        raise _fail(f"data file {path} does not exist.")
    if path.suffix == ".txt":
        texts = [
            line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
        ]
        return texts[:limit] if limit else texts
    if path.suffix in (".jsonl", ".json"):
        text = path.read_text(encoding="utf-8")
        rows = (
            json.loads(text)
            if path.suffix == ".json"
            else [json.loads(line) for line in text.splitlines() if line.strip()]
        )
        rows = rows[:limit] if limit else rows
        if not rows or "text" not in rows[0]:
            raise _fail(
                f"{path} must hold objects with a 'text' field (and optional label fields)."
            )
        return {key: [row.get(key) for row in rows] for key in rows[0]}
    raise _fail(f"data file {path} must be .txt (one text per line), .jsonl or .json.")


@app.command("list")
def list_command(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show every option.")] = False,
) -> None:
    """List the registered analyses (built-ins and installed plugins)."""
    import dataclasses

    from geomlens.registry import ANALYSES, analysis_class, list_analyses

    for name in list_analyses():
        cls = analysis_class(name)
        summary = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        aliases = [a for a, target in ANALYSES.aliases().items() if target == name]
        alias_text = f"  (aliases: {', '.join(aliases)})" if aliases else ""
        typer.echo(f"{name}{alias_text}  {summary}")
        if verbose:
            for field in dataclasses.fields(cls.Config):
                typer.echo(
                    f"    {field.name} = {field.default!r}: {field.metadata.get('help', '')}"
                )
    for plugin, error in sorted(ANALYSES.load_errors.items()):
        typer.secho(f"plugin {plugin} failed to load: {error}", fg=typer.colors.YELLOW, err=True)


@app.command("run")
def run_command(
    analysis: Annotated[str, typer.Argument(help="Analysis name (see `geomlens list`).")],
    model: ModelOption = "all-MiniLM-L6-v2",
    backend: BackendOption = "nnsight",
    site: Annotated[
        list[str] | None,
        typer.Option("--site", "-s", help="Site(s), e.g. blocks.3.hook_resid_post."),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option("--data", help=".txt / .jsonl / .json inputs (default: bundled corpus)."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", help="Use at most this many inputs.")
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Where to write the result JSON.")
    ] = Path("result.json"),
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Also write the analysis's figure here.")
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Inputs per forward pass.")] = 16,
    max_length: Annotated[
        int | None, typer.Option("--max-length", help="Truncate inputs to this many tokens.")
    ] = 128,
    device: DeviceOption = None,
    option: Annotated[
        list[str] | None, typer.Option("--option", help="Analysis option KEY=VALUE (repeatable).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """Run one analysis on a model and write its result as JSON."""
    import geomlens as gl

    options = dict(_parse_option(o) for o in option or [])
    if site:
        options["site"] = site[0] if len(site) == 1 else site
    try:
        from geomlens.engine import build_analyses

        (built,) = build_analyses(analysis, options)
        adapter = gl.load(model, backend=backend, device=device)
        # With no --data, each analysis runs on its own shipped data (stimuli, concept sets, …).
        inputs = load_data(data, limit) if data is not None else built.default_data(adapter)
        result = gl.run(
            built,
            adapter,
            inputs,
            batch_size=batch_size,
            max_length=max_length,
            seed=seed,
            progress=True,
        )
    except (ValueError, KeyError, TypeError, ImportError, OSError) as error:
        raise _fail(str(error)) from error
    result.to_json(out)
    typer.echo(f"wrote {out}")
    for name, value in list(result.metrics.items())[:20]:
        typer.echo(f"  {name} = {value:.6g}")
    if len(result.metrics) > 20:
        typer.echo(f"  … {len(result.metrics) - 20} more metrics in {out}")
    if plot is not None:
        result.plot(plot)
        typer.echo(f"wrote {plot}")


@app.command("check")
def check_command(
    model: Annotated[str, typer.Argument(help="HF model name or local path.")] = "all-MiniLM-L6-v2",
    backend: BackendOption = "nnsight",
    device: DeviceOption = None,
) -> None:
    """Conformance: every canonical site resolves, shapes agree, padded batch == one-by-one."""
    import geomlens as gl
    from geomlens.conformance import all_passed, check_adapter

    try:
        adapter = gl.load(model, backend=backend, device=device)
        checks = check_adapter(adapter)
    except (ValueError, KeyError, TypeError, ImportError, OSError) as error:
        raise _fail(str(error)) from error
    for check in checks:
        mark = (
            typer.style("PASS", fg=typer.colors.GREEN)
            if check.passed
            else typer.style("FAIL", fg=typer.colors.RED)
        )
        typer.echo(f"{mark}  {check.name}: {check.detail}")
    if not all_passed(checks):
        raise typer.Exit(code=1)


def _mount_theory() -> None:
    try:
        from geomlens.theory.cli import app as theory_app
    except ImportError:  # the theory CLI is optional until its module lands
        return
    app.add_typer(
        theory_app, name="theory", help="Reference curves of the theory (tables and plots)."
    )


_mount_theory()

"""``geomlens list`` and ``geomlens run``: the analyses, and one run of one of them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from geomlens.cli.data import first_rows, load_data
from geomlens.cli.errors import (
    USER_ERRORS,
    check_batch_size,
    check_positive,
    check_writable_file,
    error_message,
    fail,
    one_line_errors,
)
from geomlens.cli.options import (
    DEFAULT_BACKEND,
    DEFAULT_MODEL,
    BackendOption,
    BatchSizeOption,
    DeviceOption,
    DtypeOption,
    MaxLengthOption,
    ModelOption,
    SeedOption,
    TrustRemoteCodeOption,
    parse_option,
)
from geomlens.run_defaults import DEFAULT_BATCH_SIZE, DEFAULT_MAX_LENGTH


def list_command(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show every option.")] = False,
) -> None:
    """List the registered analyses (built-ins and installed plugins)."""
    from geomlens.analyses.declaration import option_lines
    from geomlens.analyses.registry import ANALYSES, declarations

    # Declarations only: listing imports no analysis (nor torch) unless a plugin's entry point
    # names its class rather than its declaration.
    for declared in declarations():
        _echo_declaration(declared)
        if verbose:
            for line in option_lines(declared.config):
                typer.echo(f"    {line}")
    # A plugin that fails to import is listed with its error (and the listing exits 1), so a
    # user who installed it sees why it is missing instead of an unexplained absence.
    for plugin, error in sorted(ANALYSES.load_errors.items()):
        typer.secho(f"{plugin}  [plugin failed to load: {error}]", fg=typer.colors.YELLOW)
    if ANALYSES.load_errors:
        raise typer.Exit(code=1)


def _echo_declaration(declared: Any) -> None:
    aliases = sorted(declared.aliases)
    alias_text = f"  (aliases: {', '.join(aliases)})" if aliases else ""
    typer.echo(f"{declared.name}{alias_text}  {declared.summary}")
    typer.echo(f"    default data: {declared.default_data}")


class RunCommand(TyperCommand):
    """``geomlens run``, whose ``--help`` after an analysis's name (``geomlens run resolution
    --help``) also lists that analysis's options (given as ``--option KEY=VALUE``), read from
    its declaration (no torch)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta["geomlens_run_args"] = list(args)  # before --help, which stops the parsing
        return super().parse_args(ctx, args)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        super().format_help(ctx, formatter)
        named = [a for a in ctx.meta.get("geomlens_run_args", []) if not a.startswith("-")]
        if not named:
            return
        from geomlens.analyses.declaration import option_lines
        from geomlens.analyses.registry import declaration

        try:
            declared = declaration(named[0])
        except Exception as error:  # an unknown name: say so under the help, one line
            typer.echo(f"\n{str(error).splitlines()[0]}")
            return
        typer.echo(f"\nOptions of {declared.name} (give each as --option KEY=VALUE):")
        for line in option_lines(declared.config):
            typer.echo(f"  {line}")


def run_command(
    analysis: Annotated[str, typer.Argument(help="Analysis name (see `geomlens list`).")],
    model: ModelOption = DEFAULT_MODEL,
    backend: BackendOption = DEFAULT_BACKEND,
    site: Annotated[
        list[str] | None,
        typer.Option("--site", "-s", help="Site(s), e.g. blocks.3.hook_resid_post."),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            help=".txt / .jsonl / .json inputs (default: the analysis's own shipped data, e.g. "
            "year stimuli for resolution, concept sets for abstraction, calibration, held-out and "
            "OOD text for sae-features; `geomlens list` names each).",
        ),
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
    batch_size: BatchSizeOption = DEFAULT_BATCH_SIZE,
    max_length: MaxLengthOption = DEFAULT_MAX_LENGTH,
    device: DeviceOption = None,
    option: Annotated[
        list[str] | None,
        typer.Option(
            "--option",
            help="Analysis option KEY=VALUE (repeatable). VALUE is read as a Python literal "
            "(3, 0.5, True, None, ['a', 'b']) or else as a plain string: site=a,b is the one "
            "string 'a,b'; give a list as \"site=['a', 'b']\" or repeat --site.",
        ),
    ] = None,
    seed: SeedOption = 0,
    trust_remote_code: TrustRemoteCodeOption = False,
    dtype: DtypeOption = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint", help="Save states in this folder; a rerun with the same flags resumes."
        ),
    ] = None,
    checkpoint_every: Annotated[
        int, typer.Option("--checkpoint-every", help="Batches between checkpoints.")
    ] = 50,
    linearize: Annotated[
        str | None,
        typer.Option(
            "--linearize",
            help="Run with the MLP activation of LAYERS linearised, LAYERS[:identity|tangent], "
            "e.g. 4 or -2:tangent (see docs/abstraction.md).",
        ),
    ] = None,
) -> None:
    """Run one analysis on a model and write its result as JSON.

    Under ``torchrun --nproc-per-node K -m geomlens run …`` each process runs a shard of the
    data and rank 0 writes the result (see docs/scale.md)."""
    import geomlens as gl
    from geomlens.engine.distributed import init_from_environment, local_device

    # Everything the user typed is checked here, before a model is loaded or any work done.
    check_positive("--limit", limit, "the number of inputs to use")
    check_positive("--max-length", max_length, "tokens kept per input; omit it to keep all")
    check_batch_size(batch_size)
    check_positive("--checkpoint-every", checkpoint_every, "batches between checkpoints")
    if dtype is not None and dtype not in ("float32", "bfloat16", "float16"):
        raise fail(f"--dtype must be float32, bfloat16 or float16; got {dtype!r}.")
    check_writable_file("--out", out, (".json",))
    if plot is not None:
        check_writable_file("--plot", plot, _figure_suffixes())
    if linearize is not None:
        from geomlens.cli.linearize import parse_linearize_flag

        with one_line_errors((ValueError,)):
            parse_linearize_flag(linearize)
    options = dict(parse_option(o) for o in option or [])
    from geomlens.results import check_not_an_input

    read = {
        "--data": data,
        "--checkpoint": checkpoint,
        "--model": model,
        "--option sae": options.get("sae"),
    }
    with one_line_errors((ValueError,)):
        for flag, written in (("--out", out), ("--plot", plot)):
            if written is not None:
                check_not_an_input(flag, written, read)
    if site:
        if "site" in options:
            raise fail("give the site either with --site or with --option site=…, not both.")
        options["site"] = site[0] if len(site) == 1 else site
    with one_line_errors(interrupted=f"interrupted; nothing was written to {out}."):
        from geomlens.analyses.plotting import has_plot
        from geomlens.engine import build_analyses

        (built,) = build_analyses(analysis, options)
        if plot is not None and not has_plot(type(built)):
            raise fail(f"analysis {built.name!r} draws no figure; run it without --plot.")
        dataset = load_data(data, limit) if data is not None else None
        shard = init_from_environment()  # joins torchrun's process group, if any
        adapter = gl.load(
            model,
            backend=backend,
            device=local_device(device),
            dtype=dtype,
            trust_remote_code=trust_remote_code,
        )
        if dataset is None:
            # With no --data, each analysis runs on its own shipped data (stimuli, concept
            # sets, …); --limit keeps its first rows.
            dataset = first_rows(built.default_data(adapter), limit)
        from geomlens.cli.linearize import linearized_from_flag

        with linearized_from_flag(adapter, linearize):
            result = gl.run(
                built,
                adapter,
                dataset,
                batch_size=batch_size,
                max_length=max_length,
                seed=seed,
                progress=True,
                checkpoint=checkpoint,
                checkpoint_every=checkpoint_every,
            )
    if not shard.is_main:  # every rank holds the result; rank 0 alone writes it
        return
    result.to_json(out)
    _print_run_summary(result, built, out, used_default_data=data is None)
    if plot is not None:
        try:
            gl.plot(result, plot)
        except (*USER_ERRORS, RuntimeError) as error:  # the result is safe; say so
            raise fail(
                f"wrote {out}, but drawing {plot} failed ({type(error).__name__}: "
                f"{error_message(error)}); draw it later with gl.plot(Result.from_json({str(out)!r}))."
            ) from error
        typer.echo(f"wrote {plot}")


def _figure_suffixes() -> tuple[str, ...]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    # The common formats first: the first one is the one suggested in errors.
    kinds = sorted(FigureCanvasAgg.get_supported_filetypes(), key=lambda k: (k != "png", k))
    return tuple(f".{kind}" for kind in kinds)


def _print_run_summary(result: Any, built: Any, out: Path, *, used_default_data: bool) -> None:
    """Which data ran, whether it resumed, and the headline metrics of every layer."""
    from geomlens.formatting import quantity
    from geomlens.report.page import headline_table
    from geomlens.report.plan import default_data_description

    provenance = result.provenance
    source = (
        default_data_description(type(built)) if used_default_data else provenance["data_source"]
    )
    typer.echo(f"data: {source} ({quantity(provenance['num_examples'], 'rows')})")
    if provenance.get("resumed_rows"):
        typer.echo(
            f"resumed from {provenance['checkpoint']}: {quantity(provenance['resumed_rows'], 'rows')}"
            " were already done"
        )
    elif "checkpoint" in provenance:
        typer.echo(f"checkpointed in {provenance['checkpoint']} (a fresh start)")
    typer.echo(f"wrote {out}")
    table = headline_table(result)
    if table is None:
        for name, value in list(result.metrics.items())[:20]:
            typer.echo(f"  {name} = {value:.6g}")
        more = len(result.metrics) - 20
    else:
        if table["range"]:  # the stimulus range every number holds for, said first
            typer.echo(f"  measured {table['range']}: every number below holds for that range")
        labels = [row["label"] for row in table["rows"]]
        width = max(len(label) for label in labels)
        typer.echo("  " + " " * width + "  " + "  ".join(c["label"] for c in table["columns"]))
        for row in table["rows"]:
            cells = "  ".join(
                cell["text"].rjust(len(column["label"]))
                for cell, column in zip(row["cells"], table["columns"])
            )
            typer.echo(f"  {row['label']:<{width}}  {cells}")
        for label, value in table["other"][:10]:
            typer.echo(f"  {label} = {value}")
        shown = len(table["rows"]) * len(table["columns"]) + min(len(table["other"]), 10)
        more = len(result.metrics) - shown
    if more > 0:
        typer.echo(f"  … {more} more metrics in {out}")

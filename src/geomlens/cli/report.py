"""The ``geomlens report`` command (mounted on the main CLI by ``geomlens.cli``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from geomlens.cli.options import (
    DEFAULT_BACKEND,
    DEFAULT_MODEL,
    BackendOption,
    BatchSizeOption,
    DeviceOption,
    MaxLengthOption,
    ModelOption,
    SeedOption,
)
from geomlens.run_defaults import DEFAULT_BATCH_SIZE, DEFAULT_MAX_LENGTH


def print_summary(report) -> None:
    """The summary table: one line per analysis, then where the page is."""
    from geomlens.report.readings import headline

    section = report.causal_lm
    everything = [*report.outcomes, *(section.outcomes if section is not None else [])]
    width = max((len(o.name) for o in everything), default=8)

    def lines(outcomes) -> None:
        for outcome in outcomes:
            status = "ok" if outcome.error is None and not outcome.figure_error else "FAILED"
            text = headline(outcome.result) if outcome.result is not None else outcome.error
            if outcome.error is None and outcome.figure_error:
                text = f"its figure could not be drawn: {outcome.figure_error}"
            typer.echo(
                f"{outcome.name:<{width}}  {status:<6}  {outcome.rows:>4}  "
                f"{outcome.seconds:>7.1f}  {text}"
            )

    typer.echo(f"{'analysis':<{width}}  status  rows  seconds  result")
    lines(report.outcomes)
    if section is not None:
        typer.echo(f"causal-LM section on {section.model}:")
        if section.unavailable:
            typer.echo(f"  not run: {section.unavailable}")
        lines(section.outcomes)


def rerender(source: Path, out: Path | None) -> None:
    """``geomlens report --from DIR --out NEW``: the page of ``DIR`` drawn again into ``NEW``."""
    from geomlens.cli.errors import one_line_errors
    from geomlens.report.saved import render_saved_report

    if out is None:
        typer.echo("--from needs --out: the new folder the page is re-rendered into.", err=True)
        raise typer.Exit(code=2)
    started = time.perf_counter()
    with one_line_errors():
        report = render_saved_report(source, out)
    typer.echo(f"wrote {report.index} from {source} ({time.perf_counter() - started:.0f} s)")
    if report.problems:
        typer.secho("the page has problems: " + "; ".join(report.problems), fg="red", err=True)
        raise typer.Exit(code=1)


def report_command(
    model: ModelOption = DEFAULT_MODEL,
    backend: BackendOption = DEFAULT_BACKEND,
    device: DeviceOption = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Folder for index.html, figures and JSON (default: report, or report-quick "
            "with --quick, so a quick look never replaces a full report).",
        ),
    ] = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="A small part of each data set: a first look.")
    ] = False,
    analysis: Annotated[
        list[str] | None,
        typer.Option("--analysis", "-a", help="Run only these analyses (repeatable; plugins too)."),
    ] = None,
    batch_size: BatchSizeOption = DEFAULT_BATCH_SIZE,
    max_length: MaxLengthOption = DEFAULT_MAX_LENGTH,
    seed: SeedOption = 0,
    causal_lm: Annotated[
        str | None,
        typer.Option(
            "--causal-lm",
            help="Causal LM of the report's causal-LM section (default: smollm2-135m-instruct "
            "when no --model or --analysis is given); 'none' leaves the section out.",
        ),
    ] = None,
    from_: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="Re-render the page of this report folder from its saved results into --out "
            "(no model is loaded; the other options are not used).",
        ),
    ] = None,
) -> None:
    """Run every built-in analysis on the model and write a web page of the results."""
    if from_ is not None:
        rerender(from_, out)
        return
    from geomlens.analyses.registry import report_analyses
    from geomlens.cli.errors import check_batch_size, check_positive, check_seed, one_line_errors
    from geomlens.report.causal_lm import section_model
    from geomlens.report.runner import (
        build_report,
        check_report_options,
        default_folder,
        existing_report,
    )

    # Every option is checked before anything is loaded or written (an earlier report in the
    # folder stays as it was when one is wrong).
    check_batch_size(batch_size)
    check_positive("--max-length", max_length)
    check_seed(seed)
    out = out if out is not None else default_folder(quick)
    with one_line_errors():
        check_report_options(
            out,
            list(analysis) if analysis else report_analyses(),
            section_model(model, analysis, causal_lm),
            batch_size=batch_size,
            max_length=max_length,
            seed=seed,
            flag="--out",
        )
    replaced = existing_report(out)
    if replaced:
        typer.echo(f"overwriting {replaced} in {out}")

    started = time.perf_counter()
    with one_line_errors(interrupted=f"interrupted; the report in {out} was not finished."):
        report = build_report(
            model,
            backend=backend,
            device=device,
            out=out,
            quick=quick,
            analyses=analysis,
            batch_size=batch_size,
            max_length=max_length,
            seed=seed,
            causal_lm=causal_lm,
        )
    print_summary(report)
    typer.echo(f"wrote {report.index} ({time.perf_counter() - started:.0f} s)")
    problems = report.problems
    if problems:
        typer.secho(
            f"the report failed ({len(problems)} part(s) did not come out): " + "; ".join(problems),
            fg=typer.colors.RED,
            err=True,
        )
        raise typer.Exit(code=1)

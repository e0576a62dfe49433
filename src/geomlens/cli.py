"""The ``geomlens`` command: list analyses, run one on a model, check a model, theory curves."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from geomlens.defaults import DEFAULT_BATCH_SIZE, DEFAULT_MAX_LENGTH

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


from geomlens.cli_options import (  # noqa: E402  (after the app, as before)
    BackendOption,
    BatchSizeOption,
    DeviceOption,
    MaxLengthOption,
    ModelOption,
    SeedOption,
    TrustRemoteCodeOption,
)


def _fail(message: str) -> typer.Exit:
    """Print one line ``error: …`` on stderr; the caller raises the returned exit (code 2)."""
    # One line: a multi-line message (a model-loading error with advice) is joined up.
    typer.secho(f"error: {' '.join(message.split())}", fg=typer.colors.RED, err=True)
    return typer.Exit(code=2)


def _message(error: BaseException) -> str:
    # str(KeyError("x")) is "'x'" with quotes; the message itself reads better.
    if isinstance(error, KeyError) and type(error).__str__ is KeyError.__str__ and error.args:
        return str(error.args[0])
    return str(error)


#: What the run command turns into a one-line error (exit 2) rather than a traceback.
USER_ERRORS = (ValueError, KeyError, TypeError, ImportError, OSError)


def _check_positive(flag: str, value: int | None, meaning: str) -> None:
    if value is not None and value < 1:
        raise _fail(f"{flag} must be at least 1 ({meaning}); got {value}.")


def _check_writable_file(flag: str, path: Path, suffixes: tuple[str, ...]) -> None:
    """Refuse, before any work, an output path that is a folder, has the wrong suffix, or lies
    in a folder we cannot write."""
    if path.is_dir():
        raise _fail(
            f"{flag} {path} is a directory; give a file path such as {path / ('result' + suffixes[0])}."
        )
    if path.suffix.lower() not in suffixes:
        raise _fail(
            f"{flag} {path} must end in {', '.join(suffixes)} (the format written follows it); "
            f"e.g. {path.with_suffix(suffixes[0])}."
        )
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise _fail(f"{flag} {path}: cannot write in {folder}; choose a writable location.")


def _parse_option(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise _fail(f"--option takes KEY=VALUE (e.g. pooling=last); got {text!r}.")
    key, raw = text.split("=", 1)
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    return key.strip().replace("-", "_"), value


def _rows_from_json(path: Path, text: str) -> Any:
    """A .json file holds a list of strings, a list of objects with a 'text' field, or one
    object of equal-length columns ({"text": [...], "concept": [...]})."""
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as error:
        raise _fail(f"{path} is not valid JSON ({error}).") from error
    if isinstance(rows, dict):
        if "text" not in rows and "token_ids" not in rows:
            raise _fail(f"{path} holds an object without a 'text' column; {JSON_FORMS}")
        return rows
    if not isinstance(rows, list):
        raise _fail(f"{path} holds a {type(rows).__name__}; {JSON_FORMS}")
    return rows


JSON_FORMS = (
    "a .json data file must hold a list of strings, a list of objects with a 'text' field, or "
    'an object of columns such as {"text": [...], "concept": [...]}.'
)


def _streamed_file(path: Path, limit: int | None) -> Any:
    """A .txt / .jsonl file read line by line; its first row is checked now, before any model
    is loaded (a later bad line stops the run with the line named)."""
    from geomlens.data.streaming import EmptySourceError, stream_file

    data = stream_file(path, limit=limit)
    try:
        data.first_row()
    except EmptySourceError:
        raise _fail(f"data file {path} holds no inputs; give at least one text.") from None
    except ValueError as error:
        raise _fail(f"{path}: {error}") from error
    return data


def load_data(path: Path, limit: int | None) -> Any:
    """The inputs in ``path``, its source recorded.

    ``.txt``: one text per line (blank lines skipped). ``.jsonl``: one object per line with a
    'text' field and optional label columns. Both are streamed: read line by line as the run
    goes, so a corpus of any size fits. ``.json``: a list of strings, a list of such objects,
    or one object of columns, read whole into a Dataset.
    """
    from geomlens.data.dataset import as_dataset

    if not path.exists():
        raise _fail(f"data file {path} does not exist.")
    if path.is_dir():
        raise _fail(f"--data {path} is a directory; give a .txt, .jsonl or .json file.")
    if path.suffix not in (".txt", ".jsonl", ".json"):
        raise _fail(f"data file {path} must be .txt (one text per line), .jsonl or .json.")
    if path.suffix in (".txt", ".jsonl"):
        return _streamed_file(path, limit)
    rows = _rows_from_json(path, path.read_text(encoding="utf-8"))
    if isinstance(rows, dict):
        rows = {key: list(values)[:limit] if limit else values for key, values in rows.items()}
    else:
        rows = rows[:limit] if limit else rows
        if not rows:
            raise _fail(f"data file {path} holds no inputs; give at least one text.")
        if all(isinstance(row, dict) for row in rows):
            if not all("text" in row for row in rows):
                raise _fail(
                    f"every object in {path} needs a 'text' field (plus optional label fields)."
                )
            rows = {key: [row.get(key) for row in rows] for key in rows[0]}
        elif not all(isinstance(row, str) for row in rows):
            raise _fail(f"{path} mixes texts with other values; {JSON_FORMS}")
    try:
        dataset = as_dataset(rows)
    except ValueError as error:
        raise _fail(f"{path}: {error}") from error
    dataset.source = f"file {path} ({len(dataset)} inputs)"
    return dataset


@app.command("list")
def list_command(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show every option.")] = False,
) -> None:
    """List the registered analyses (built-ins and installed plugins)."""
    import dataclasses

    from geomlens.registry import ANALYSES, analysis_class, list_analyses
    from geomlens.report.plan import default_data_description

    for name in list_analyses():
        cls = analysis_class(name)
        summary = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        aliases = [a for a, target in ANALYSES.aliases().items() if target == name]
        alias_text = f"  (aliases: {', '.join(aliases)})" if aliases else ""
        typer.echo(f"{name}{alias_text}  {summary}")
        typer.echo(f"    default data: {default_data_description(cls)}")
        if verbose:
            for field in dataclasses.fields(cls.Config):
                # Mutable defaults ({} / []) live in default_factory, not default.
                default = (
                    field.default_factory()
                    if field.default is dataclasses.MISSING
                    and field.default_factory is not dataclasses.MISSING
                    else field.default
                )
                limits = _declared_limits(field.metadata)
                typer.echo(
                    f"    {field.name} = {default!r}: {field.metadata.get('help', '')}{limits}"
                )
    # A plugin that fails to import is listed with its error (and the listing exits 1), so a
    # user who installed it sees why it is missing instead of an unexplained absence.
    for plugin, error in sorted(ANALYSES.load_errors.items()):
        typer.secho(f"{plugin}  [plugin failed to load: {error}]", fg=typer.colors.YELLOW)
    if ANALYSES.load_errors:
        raise typer.Exit(code=1)


def _declared_limits(metadata: Any) -> str:
    """`` [≥ 2]`` / `` [0 … 1]`` / `` [one of 'a', 'b']`` from an option's declared range."""
    low, high, choices = metadata.get("low"), metadata.get("high"), metadata.get("choices")
    if choices is not None:
        return f" [one of {', '.join(map(repr, choices))}]"
    if low is not None and high is not None:
        return f" [{low:g} … {high:g}]"
    if low is not None:
        return f" [≥ {low:g}]"
    if high is not None:
        return f" [≤ {high:g}]"
    return ""


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
    dtype: Annotated[
        str | None,
        typer.Option("--dtype", help="Model weights: float32 (default), bfloat16 or float16."),
    ] = None,
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
    from geomlens.distributed import init_from_environment, local_device

    # Everything the user typed is checked here, before a model is loaded or any work done.
    _check_positive("--limit", limit, "the number of inputs to use")
    _check_positive("--max-length", max_length, "tokens kept per input; omit it to keep all")
    _check_positive("--batch-size", batch_size, "inputs per forward pass")
    _check_positive("--checkpoint-every", checkpoint_every, "batches between checkpoints")
    if dtype is not None and dtype not in ("float32", "bfloat16", "float16"):
        raise _fail(f"--dtype must be float32, bfloat16 or float16; got {dtype!r}.")
    _check_writable_file("--out", out, (".json",))
    if plot is not None:
        _check_writable_file("--plot", plot, _figure_suffixes())
    if linearize is not None:
        from geomlens.hooks.linearize import parse_linearize_flag

        try:
            parse_linearize_flag(linearize)
        except ValueError as error:
            raise _fail(str(error)) from error
    options = dict(_parse_option(o) for o in option or [])
    if site:
        if "site" in options:
            raise _fail("give the site either with --site or with --option site=…, not both.")
        options["site"] = site[0] if len(site) == 1 else site
    try:
        from geomlens.engine import build_analyses
        from geomlens.plotting import has_plot

        (built,) = build_analyses(analysis, options)
        if plot is not None and not has_plot(type(built)):
            raise _fail(f"analysis {built.name!r} draws no figure; run it without --plot.")
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
            dataset = _first_rows(built.default_data(adapter), limit)
        from geomlens.hooks.linearize import linearized_from_flag

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
    except USER_ERRORS as error:
        raise _fail(_message(error)) from error
    except KeyboardInterrupt:
        typer.secho(f"interrupted; nothing was written to {out}.", fg=typer.colors.RED, err=True)
        raise typer.Exit(code=130) from None
    if not shard.is_main:  # every rank holds the result; rank 0 alone writes it
        return
    result.to_json(out)
    _print_run_summary(result, built, out, used_default_data=data is None)
    if plot is not None:
        try:
            gl.plot(result, plot)
        except (*USER_ERRORS, RuntimeError) as error:  # the result is safe; say so
            raise _fail(
                f"wrote {out}, but drawing {plot} failed ({type(error).__name__}: "
                f"{_message(error)}); draw it later with gl.plot(Result.from_json({str(out)!r}))."
            ) from error
        typer.echo(f"wrote {plot}")


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


def _figure_suffixes() -> tuple[str, ...]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    # The common formats first: the first one is the one suggested in errors.
    kinds = sorted(FigureCanvasAgg.get_supported_filetypes(), key=lambda k: (k != "png", k))
    return tuple(f".{kind}" for kind in kinds)


def _first_rows(data: Any, limit: int | None) -> Any:
    """``data`` as a Dataset cut to its first ``limit`` rows (all when ``limit`` is None)."""
    from geomlens.data.dataset import Dataset, as_dataset

    dataset = as_dataset(data)
    if limit is None or limit >= len(dataset):
        return dataset
    return Dataset(
        texts=dataset.texts[:limit] if dataset.texts is not None else None,
        token_ids=dataset.token_ids[:limit] if dataset.token_ids is not None else None,
        num_rows=limit if dataset.num_rows is not None else None,
        columns={name: values[:limit] for name, values in dataset.columns.items()},
        source=f"{dataset.describe_source()}, first {limit}",
    )


@app.command("check")
def check_command(
    model: Annotated[str, typer.Argument(help="HF model name or local path.")] = "all-MiniLM-L6-v2",
    backend: BackendOption = "nnsight",
    device: DeviceOption = None,
    trust_remote_code: TrustRemoteCodeOption = False,
) -> None:
    """Conformance, per site: resolves, shape and width, padded batch == one-by-one, equal to
    the model's own hidden states, sub-layers add up (docs/architectures.md).

    Without MODEL it checks the bundled all-MiniLM-L6-v2. It names the model it checked, and
    says which checks do not apply (post-LayerNorm blocks, e.g. BERT, normalise the sums, so
    their sub-layers do not add up by design).
    """
    import geomlens as gl
    from geomlens.conformance import all_passed, check_adapter

    try:
        adapter = gl.load(
            model, backend=backend, device=device, trust_remote_code=trust_remote_code
        )
        typer.echo(f"checking {adapter.model_id} ({adapter.backend} backend, {adapter.device})")
        checks = check_adapter(adapter)
    except USER_ERRORS as error:
        raise _fail(_message(error)) from error
    for check in checks:
        mark = (
            typer.style("PASS", fg=typer.colors.GREEN)
            if check.passed
            else typer.style("FAIL", fg=typer.colors.RED)
        )
        typer.echo(f"{mark}  {check.name}: {check.detail}")
    layout = getattr(adapter, "residual_layout", lambda: None)()
    if layout not in ("sequential", "parallel"):
        why = (
            "post-LayerNorm blocks normalise the sums"
            if layout == "post_ln"
            else "the architecture table does not say how its sub-layers compose"
        )
        typer.echo(f"SKIP  sub-layers add up: not checked, {why}")
    if not all_passed(checks):
        raise typer.Exit(code=1)


@app.command("sites")
def sites_command(
    model: Annotated[str, typer.Argument(help="HF model name or local path.")] = "all-MiniLM-L6-v2",
    backend: BackendOption = "nnsight",
    device: DeviceOption = None,
    trust_remote_code: TrustRemoteCodeOption = False,
) -> None:
    """List the model's capture sites in forward order (names for --site)."""
    import geomlens as gl

    try:
        adapter = gl.load(
            model, backend=backend, device=device, trust_remote_code=trust_remote_code
        )
    except USER_ERRORS as error:
        raise _fail(_message(error)) from error
    sites = adapter.sites()
    typer.echo(f"{adapter.model_id} ({adapter.backend}): {len(sites)} sites, in forward order")
    for name in sites:
        typer.echo(f"  {name}")


def _mount_theory() -> None:
    try:
        from geomlens.theory.cli import app as theory_app
    except ImportError:  # the theory CLI is optional until its module lands
        return
    app.add_typer(
        theory_app, name="theory", help="Reference curves of the theory (tables and plots)."
    )


_mount_theory()


def _mount_report() -> None:
    from geomlens.report.cli import report_command

    app.command("report")(report_command)
    from geomlens.scaffold.cli import new_plugin_command

    app.command("new-plugin")(new_plugin_command)


_mount_report()


def _mount_sae() -> None:
    from geomlens.sae.cli import app as sae_app

    app.add_typer(
        sae_app, name="sae", help="Sparse autoencoders: train offline (sae-lens), cached."
    )


_mount_sae()

"""``geomlens sweep`` (analyses across a model's checkpoints) and ``geomlens experiment``
(the training experiments whose checkpoints come with their exact theory)."""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from geomlens.cli.errors import check_batch_size, check_seed, fail, one_line_errors
from geomlens.cli.options import DeviceOption, DtypeOption, parse_option

experiment_app = typer.Typer(
    help="Train a theory's network with checkpoints and its setup in run.json (then sweep it).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    rich_markup_mode="markdown",
)


def sweep_command(
    analyses: Annotated[
        list[str], typer.Argument(help="Analysis name(s), fused in one pass per checkpoint.")
    ],
    series: Annotated[
        str | None,
        typer.Option(
            "--series",
            help="The checkpoints: a folder of checkpoint-N / step-N / epoch-N / global_step-N "
            "sub-folders, a folder a `geomlens experiment` wrote, or a hub repository with "
            "--revisions.",
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Folder for the sweep (created).")
    ] = None,
    revisions: Annotated[
        str | None,
        typer.Option(
            "--revisions",
            help="Hub revisions: 'pythia', 'stanford-crfm', or names separated by commas.",
        ),
    ] = None,
    select: Annotated[
        str | None,
        typer.Option(
            "--select",
            help="Thin the series: log:N (N checkpoints per seed spread evenly in log(1 + step), "
            "all when fewer) or every:K.",
        ),
    ] = None,
    site: Annotated[
        list[str] | None, typer.Option("--site", "-s", help="Site(s) to measure (repeatable).")
    ] = None,
    data: Annotated[
        Path | None, typer.Option("--data", help=".txt / .jsonl / .json inputs.")
    ] = None,
    backend: Annotated[
        str | None, typer.Option("--backend", help="transformer-lens or nnsight (default).")
    ] = None,
    theory: Annotated[str, typer.Option("--theory", help="auto, exact, laws or none.")] = "auto",
    time: Annotated[
        str,
        typer.Option(
            "--time",
            help="x axis: auto, step or lr-sum (Σ learning rate, from a geomlens experiment's "
            "run.json or a Trainer's trainer_state.json).",
        ),
    ] = "auto",
    seed: Annotated[int, typer.Option("--seed", help="Seed of every analysis.")] = 0,
    device: DeviceOption = None,
    dtype: DtypeOption = None,
    device_map: Annotated[
        str | None,
        typer.Option("--device-map", help="'auto' spreads a checkpoint too large for one device."),
    ] = None,
    batch_size: Annotated[
        int | None, typer.Option("--batch-size", help="Inputs per forward pass.")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Measure every checkpoint again (ignore the cache).")
    ] = False,
    option: Annotated[
        list[str] | None,
        typer.Option("--option", help="Analysis option KEY=VALUE (repeatable)."),
    ] = None,
    split: Annotated[
        str,
        typer.Option(
            "--split",
            help="Under torchrun, how the ranks share the checkpoints: claims (claim files in an "
            "--out every rank sees), by-rank (checkpoint i is rank i mod K's; each node keeps "
            "its Results in its own --out and rank 0 collects them) or auto (claims when --out "
            "is shared, else by-rank).",
        ),
    ] = "auto",
    checkpoint: Annotated[
        Path | None,
        typer.Option("--checkpoint", hidden=True, help="Not a sweep option (see --series)."),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Accepted and changes nothing: resuming is automatic (rerun the same command "
            "into the same --out; only what is missing or changed is measured).",
        ),
    ] = False,
) -> None:
    """Run analyses on every checkpoint of a series; write Results, a trajectory table and
    figures with the theory overlaid.

    Resuming is automatic: a rerun into the same --out (after Ctrl-C, a crash or new
    checkpoints) measures only what is missing or changed; --force measures everything again.

    Under ``torchrun --nproc-per-node K -m geomlens sweep …`` the processes share the
    checkpoints (--split) and rank 0 writes the table (see docs/dynamics.md)."""
    if checkpoint is not None:
        raise fail(
            "a sweep reads its checkpoints with --series FOLDER; --checkpoint is where "
            "`geomlens run` keeps a resumable run's state."
        )
    if series is None:
        raise fail("give the checkpoints with --series FOLDER (or a hub name with --revisions).")
    if out is None:
        raise fail("give --out DIR: the folder the sweep writes its Results and table into.")
    _check_sweep_flags(seed, batch_size, split)
    options = dict(parse_option(o) for o in option or [])
    if site:
        options["site"] = site[0] if len(site) == 1 else list(site)
    import geomlens as gl

    with (
        one_line_errors(
            interrupted=f"interrupted; the Results in {out} are whole, rerun to resume."
        ),
        _command_line_words(),
    ):
        import torch.distributed as dist

        if _world_size() > 1 and not dist.is_initialized():
            dist.init_process_group("nccl" if _cuda() else "gloo")
        placement = _placement(device, dtype, device_map)
        chosen = gl.series(
            series, revisions=_revisions(revisions), backend=backend, select=select, **placement
        )
        if batch_size is not None:
            options["batch_size"] = batch_size
        loaded = None
        if data is not None:
            from geomlens.cli.data import load_data

            loaded = load_data(data, None)
        outcome = gl.sweep(
            analyses, chosen, loaded, out=out, theory=theory, time=time, seed=seed, force=force,
            split=split, **options,
        )  # fmt: skip
    if dist.is_initialized() and dist.get_rank() != 0:
        return
    measured = outcome.measured_by_all
    typer.echo(
        f"measured {measured} of {len(chosen)} checkpoints ({len(chosen) - measured} cached); "
        f"wrote {out}/trajectory.csv, {out}/sweep.json and one figure per analysis"
    )
    for line in summary_lines(outcome.theory, outcome.rows):
        typer.echo(line)


def _check_sweep_flags(seed: int, batch_size: int | None, split: str) -> None:
    """What `geomlens run` checks first, and --split, checked before a checkpoint is listed or
    loaded."""
    from geomlens.dynamics.sweep import SPLITS

    if split not in SPLITS:
        raise fail(f"--split must be one of {', '.join(SPLITS)}; got {split!r}.")
    check_seed(seed)
    if batch_size is not None:
        check_batch_size(batch_size)


def _revisions(revisions: str | None) -> str | list[str] | None:
    """--revisions: a table's name as it is, else the names separated by commas."""
    from geomlens.dynamics.series import REVISION_TABLES

    if revisions is None or revisions in REVISION_TABLES:
        return revisions
    return [r.strip() for r in revisions.split(",") if r.strip()]


def _placement(device: str | None, dtype: str | None, device_map: str | None) -> dict[str, str]:
    """The load options given (under torchrun, ``--device cuda`` is this rank's GPU)."""
    placement = {
        k: v
        for k, v in (("device", device), ("dtype", dtype), ("device_map", device_map))
        if v is not None
    }
    if "device" in placement and "LOCAL_RANK" in os.environ and device == "cuda":
        placement["device"] = f"cuda:{int(os.environ['LOCAL_RANK'])}"  # this rank's GPU
    return placement


def summary_lines(theory: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """What the sweep's theory says in a few lines: the exact α's peak, α_∞ and residual (and
    where the checkpoints miss the peak), the toy network's distance to its front, and the
    checkpoints whose weights repeat an earlier one's."""
    lines = []
    exact = theory.get("exact")
    blocks = (
        [exact]
        if isinstance(exact, dict) and "alpha_max" in exact
        else list(exact.values())
        if isinstance(exact, dict)
        else []
    )
    for block in blocks[:1]:
        resolved = "resolved" if block["peak_resolved"] else "not resolved by the checkpoints"
        clock = block.get("clock_ratio")
        lines.append(
            f"exact theory: α_max {_shown(block['alpha_max'], '.4f')} at t = "
            f"{_shown(block['peak_time'], '.3g')} ({resolved}), α_∞ "
            f"{_shown(block['alpha_infinity'], '.4f')}, largest |measured − exact| "
            f"{_shown(block['max_abs_residual'], '.2e')}, clock ratio {_shown(clock, '.4f')}"
        )
        if "peak_note" in block:
            lines.append(block["peak_note"].split(";")[0])
    toy = theory.get("toy_front")
    if isinstance(toy, dict) and toy.get("points"):
        points = toy["points"]
        best = min(points, key=lambda p: p["front_distance"])
        lines.append(
            f"toy front: distance to the linear-decay front {points[0]['front_distance']:.4f} at "
            f"{points[0]['checkpoint']} → {points[-1]['front_distance']:.4f} at "
            f"{points[-1]['checkpoint']} (smallest {best['front_distance']:.4f} at "
            f"{best['checkpoint']})"
        )
    lines.extend(_stage_lines(theory, rows))
    twins = sorted({(r["checkpoint"], r["duplicate_of"]) for r in rows if r.get("duplicate_of")})
    if twins:
        shown = ", ".join(f"{a} = {b}" for a, b in twins[:4]) + (" …" if len(twins) > 4 else "")
        lines.append(
            f"{len(twins)} checkpoint(s) hold the same weights as an earlier one ({shown}): "
            "flagged duplicate_of in the table, not counted as independent points"
        )
    return lines


def _stage_lines(theory: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """Each analysis's first headline curve at its last site: peak, plateau end, settling
    (the mean over seeds where there are several), beside the exact theory's where known."""
    from geomlens.dynamics.stages import stage_table
    from geomlens.dynamics.trajectory import followed_metrics

    chosen: dict[str, dict[str, Any]] = {}
    for entry in stage_table(rows, theory):
        order = followed_metrics(entry["analysis"])
        rank = order.index(entry["metric"]) if entry["metric"] in order else len(order)
        kept = chosen.get(entry["analysis"])
        if kept is None or rank <= kept["rank"]:
            chosen[entry["analysis"]] = {**entry, "rank": rank}
    return [_stage_line(entry) for entry in chosen.values()]


def _stage_line(entry: dict[str, Any]) -> str:
    stages = entry.get("across_seeds") or next(iter(entry["seeds"].values()))

    def at(name: str) -> str:
        value = stages[name]["mean"] if "across_seeds" in entry else stages[name]
        return "—" if value is None else f"{value:.3g}"

    line = (
        f"stages of {entry['metric']} at {entry['site']}: peak {at('peak_value')} at t = "
        f"{at('peak_time')}, plateau ends {at('plateau_end')}, settles {at('settled_time')}"
    )
    known = entry.get("theory")
    if known:
        length = known["plateau_length"]
        line += f" (exact: peak at t = {known['peak_time']:.3g}, plateau length " + (
            f"{length:.3g})" if length is not None else "unbounded)"
        )
    return line


#: Python keywords of gl.sweep / gl.series that are options of `geomlens sweep`.
_KEYWORD = re.compile(r"\b(revisions|time|theory|select|out|data|seed|site)=(?:'([^']*)'|(\w+))?")


def _cli_words(message: str) -> str:
    """A message of the Python API in the command line's words: ``time='step'`` → ``--time
    step``, ``revisions=`` → ``--revisions``."""
    return _KEYWORD.sub(
        lambda m: (
            f"--{m.group(1)}" + (f" {m.group(2) or m.group(3)}" if m.group(2) or m.group(3) else "")
        ),
        message,
    )


@contextlib.contextmanager
def _command_line_words() -> Iterator[None]:
    """Errors raised inside speak the command line's spelling (see :func:`_cli_words`)."""
    try:
        yield
    except ValueError as error:
        raise ValueError(_cli_words(str(error))) from error


def _shown(value: Any, form: str) -> str:
    """A summary number as ``form``; "n/a" where the series cannot give it (one checkpoint)."""
    return format(value, form) if isinstance(value, (int, float)) else "n/a"


def _world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


#: The folder a training experiment writes (its checkpoints and run.json).
RunFolderOption = Annotated[
    Path, typer.Option("--out", "-o", help="Folder for checkpoints and run.json.")
]
#: Several runs of one experiment, each in its own OUT/seed-K folder (see :func:`_seed_folders`).
SeedsOption = Annotated[
    str | None, typer.Option("--seeds", help="Several runs, e.g. 0,1,2: written to OUT/seed-K/.")
]


@experiment_app.command("abstraction-dynamics")
def abstraction_dynamics_command(
    out: RunFolderOption,
    depth: Annotated[int, typer.Option("--depth", help="Hidden layers L (1: two-layer net).")] = 1,
    init_scale: Annotated[
        float, typer.Option("--init-scale", help="κ of the aligned start.")
    ] = 1e-3,
    lr: Annotated[float, typer.Option("--lr", help="Learning rate η (time t = Σ η).")] = 0.01,
    steps: Annotated[int, typer.Option("--steps", help="Gradient-descent steps.")] = 3000,
    checkpoints: Annotated[
        str, typer.Option("--checkpoints", help="Which steps to save: log:N or every:K.")
    ] = "every:10",
    gamma: Annotated[float, typer.Option("--gamma", help="γ: the readout's ridge is 1/γ.")] = 2.0,
    input_modes: Annotated[
        str, typer.Option("--input-modes", help="Σx eigenvalues G,S,C,SC.")
    ] = "1,2,1,0.5",
    target_modes: Annotated[
        str, typer.Option("--target-modes", help="Σy eigenvalues G,S,C,SC.")
    ] = "1,1,1,0.2",
    seeds: SeedsOption = None,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the start (the data are fixed).")
    ] = 0,
) -> None:
    """The minimal two-factor linear network of the abstraction-dynamics paper (exact ridge
    readout), trained with checkpoints; `geomlens sweep abstraction --series OUT` overlays the
    exact α(t)."""
    from geomlens.experiments.abstraction_dynamics import (
        EXPERIMENT,
        AbstractionDynamicsConfig,
        train,
    )

    with one_line_errors(interrupted=_interrupted(out)):
        inputs = _modes("--input-modes", input_modes)
        targets = _modes("--target-modes", target_modes)
        configs = [
            (
                AbstractionDynamicsConfig(
                    depth=depth,
                    init_scale=init_scale,
                    gamma=gamma,
                    learning_rate=lr,
                    steps=steps,
                    checkpoints=checkpoints,
                    seed=run,
                    input_modes=inputs,
                    target_modes=targets,
                ),
                target,
            )  # fmt: skip
            for run, target in _seed_folders(out, seeds, seed)
        ]
        _check_run_folders([target for _, target in configs], EXPERIMENT)
        for config, target in configs:
            _wrote_run(train(config, target, progress=True), target)


@experiment_app.command("toy-network")
def toy_network_command(
    out: RunFolderOption,
    epochs: Annotated[int, typer.Option("--epochs", help="Training epochs.")] = 60,
    checkpoints: Annotated[
        str, typer.Option("--checkpoints", help="Which epochs to save: every:K or log:N.")
    ] = "every:1",
    seeds: SeedsOption = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the start and the trials.")] = 0,
) -> None:
    """The toy ReLU network of the generalisation–identification paper (its configuration),
    saved every epoch; `geomlens sweep resolution --series OUT` places (p_S, p_I) against the
    front."""
    from geomlens.experiments.checkpoint_steps import check_saved_steps
    from geomlens.experiments.toy_network import EXPERIMENT, train
    from geomlens.theory.toy import ToyConfig

    with one_line_errors(interrupted=_interrupted(out)):
        targets = _seed_folders(out, seeds, seed)
        for run, _ in targets:
            check_seed(run, "--seed")
        runs = [(ToyConfig(epochs=epochs, seed=run), target) for run, target in targets]
        check_saved_steps(checkpoints, epochs, "epochs")
        _check_run_folders([target for _, target in runs], EXPERIMENT)
        for config, target in runs:
            _wrote_run(train(config, target, checkpoints=checkpoints), target)


def _interrupted(out: Path) -> str:
    return (
        f"interrupted; the checkpoints written so far are in {out} without a run.json: rerun "
        "into the same --out to start again."
    )


def _check_run_folders(targets: list[Path], experiment: str) -> None:
    """Every run's folder is checked before the first run starts (seeds and run folders alike,
    each a ``--seed`` would have been refused for)."""
    from geomlens.experiments.run_folder import check_run_folder

    for target in targets:
        check_run_folder(target, experiment)


def _modes(flag: str, text: str) -> tuple[float, float, float, float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise ValueError(f"{flag} takes four numbers G,S,C,SC; got {text!r}") from None
    if len(values) != 4 or not all(math.isfinite(v) and v >= 0 for v in values):
        raise ValueError(f"{flag} takes four finite numbers >= 0, G,S,C,SC; got {text!r}")
    return values[0], values[1], values[2], values[3]


def _seed_folders(out: Path, seeds: str | None, seed: int) -> list[tuple[int, Path]]:
    """Each run's seed and folder: OUT itself for one ``--seed``, OUT/seed-K for each of
    ``--seeds`` (all read before the first run starts)."""
    if not seeds:
        return [(seed, out)]
    return [(run, out / f"seed-{run}") for run in _seed_list(seeds)]


def _wrote_run(record: dict[str, Any], target: Path) -> None:
    typer.echo(f"wrote {len(record['checkpoints'])} checkpoints and run.json to {target}")


def _seed_list(text: str) -> list[int]:
    try:
        seeds = [int(v) for v in text.split(",")]
    except ValueError:
        raise ValueError(f"--seeds takes integers separated by commas; got {text!r}") from None
    if len(set(seeds)) != len(seeds) or any(s < 0 for s in seeds):
        raise ValueError(f"--seeds takes distinct integers >= 0; got {text!r}")
    return seeds

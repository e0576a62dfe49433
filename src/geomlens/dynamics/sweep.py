"""``gl.sweep``: run analyses on every checkpoint of a series, cached, and put theory beside them.

Each checkpoint runs through the ordinary fused ``gl.run``, so every analysis, backend, site kind
and intervention works unchanged. With ``out=DIR`` the sweep writes:

- ``DIR/checkpoints/<label>/<analysis>.json``: one Result per checkpoint and analysis, written
  atomically, whose provenance carries the checkpoint (label, step, time, seed) and the cache
  key: the analysis and its resolved options, the data digest, the sites, the seed, the run
  options and the weights (a hub commit, or the SHA-256 of the weight files or tensors). A
  rerun measures only what is missing or whose key changed (``force=True``: everything);
- ``DIR/trajectory.json`` and ``DIR/trajectory.csv``: the long table, rebuilt from the Result
  files alone (:mod:`geomlens.dynamics.trajectory`), and ``trajectory_seeds.csv`` with an
  interval across seeds when the series has several;
- ``DIR/sweep.json``: the series, the arguments, the theory level, its parameters and their
  origin, and the theory's summary (α_max, α_∞, whether the peak is resolved, the clock check);
- ``DIR/<analysis>.png``: one figure per analysis (:mod:`geomlens.dynamics.figures`).

Under ``torchrun`` (an initialised process group) the ranks share the checkpoints (``split``):
where every rank sees one DIR (a shared filesystem), each claims a checkpoint with a claim file
in ``DIR/.claims/<run>/``, measures it whole and writes its Results there; where they do not (a
multi-node job whose DIR is each node's local disk), checkpoint i is rank i mod K's, each rank
keeps its own Results in its own DIR and sends them to rank 0, which writes them into its DIR.
Either way rank 0 assembles the table once every rank is done, and its DIR holds the whole
sweep.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import time as clock
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from geomlens import engine
from geomlens.analyses.registry import analysis_class
from geomlens.dynamics import trajectory as table
from geomlens.dynamics.overlay import LEVELS, ExactAbstraction
from geomlens.dynamics.series import Checkpoint, Series
from geomlens.dynamics.series import series as make_series
from geomlens.output_folder import (
    check_owned_folder,
    owned_path,
    place_owned,
    sha256_of,
    write_owned,
)
from geomlens.results import Result, plain

#: Options of ``gl.run`` itself (not of an analysis) that change what is measured.
RUN_OPTIONS = ("batch_size", "padding_side", "max_length")
TIME_AXES = ("auto", "step", "lr-sum")
#: How the ranks under torchrun share the checkpoints: ``claims`` (claim files in a DIR every
#: rank sees), ``by-rank`` (checkpoint i is rank i mod K's; no file is shared) or ``auto``
#: (claims when every rank sees a file rank 0 wrote into DIR, else by-rank).
SPLITS = ("auto", "by-rank", "claims")
FORMAT = 1
#: Seconds per checkpoint past which the progress line names the analyses' cheaper options.
SLOW_SECONDS = 2.0
#: What the folder's manifest says wrote it (a report's or an experiment's folder is refused).
OWNER = "sweep"


@dataclass
class SweepResult:
    """What a sweep returns: the trajectory table, the theory summary, and what it measured.

    ``measured`` lists the (checkpoint, analyses) this process ran a forward pass for (empty
    for a rerun that found everything cached) and ``measured_by_all`` counts the checkpoints
    every process measured (under torchrun); ``results`` maps a checkpoint label to its
    Results by analysis.
    """

    rows: list[dict[str, Any]]
    theory: dict[str, Any]
    out: Path | None
    measured: list[tuple[str, list[str]]] = field(default_factory=list)
    results: dict[str, dict[str, Result]] = field(default_factory=dict)
    across_seeds: list[dict[str, Any]] = field(default_factory=list)
    measured_by_all: int = 0

    @property
    def stages(self) -> list[dict[str, Any]]:
        """Each headline curve's peak, plateau and settling (``dynamics.stages``)."""
        from geomlens.dynamics.stages import stage_table

        return stage_table(self.rows, self.theory)

    def to_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame(self.rows, columns=list(table.COLUMNS))


def sweep(
    analyses: str | Sequence[str],
    series: Any,
    data: Any = None,
    *,
    out: str | os.PathLike[str] | None = None,
    time: str = "auto",
    theory: str = "auto",
    seed: int = 0,
    force: bool = False,
    progress: bool | None = None,
    figures: bool = True,
    backend: str | None = None,
    select: str | None = None,
    split: str = "auto",
    **options: Any,
) -> SweepResult:
    """Run ``analyses`` on every checkpoint of ``series`` and return the trajectory.

    ``series``: a :class:`Series` or anything ``gl.series`` takes (a folder, a list of folders
    or modules, a hub name needs ``gl.series(name, revisions=...)``). ``data``: as for
    ``gl.run``; None takes the data a geomlens experiment declares (else each analysis's
    default). ``time``: the x axis, ``"auto"`` (Σ lr where the series records it, else the
    step), ``"step"`` or ``"lr-sum"``. ``theory``: ``"auto"`` (``exact`` when the series declares
    its setup, else ``laws``), ``"exact"``, ``"laws"`` or ``"none"`` (see
    :mod:`geomlens.dynamics.overlay`). ``split``: how the ranks under torchrun share the
    checkpoints, one of :data:`SPLITS` (see the module docstring). Other keywords are
    ``gl.run`` options (``site=``, ``pooling=``, ``batch_size=``, …) and apply at every
    checkpoint.
    """
    names = _checked_names(analyses, theory, time)
    if split not in SPLITS:
        raise ValueError(f"Unknown split {split!r}; use one of {', '.join(SPLITS)}.")
    _check_run_arguments(seed, options)
    checkpoints = _checkpoints_of(series, backend, select, time)
    if data is None:
        data = checkpoints.default_data()
    _fill_series_defaults(names, checkpoints, options)
    run_options = {k: options.pop(k) for k in RUN_OPTIONS if k in options}
    configs, own_options = _resolve_options(names, options)
    level, exact = _theory_level(theory, names, checkpoints)
    data_digest, keys_of = _cache_keys(
        names, checkpoints, data, options, run_options, configs, seed
    )
    folder = Path(out).expanduser() if out is not None else None
    _check_before_writing(folder, checkpoints, names, keys_of)
    rank, world = _process()
    if world > 1 and folder is None:
        raise ValueError("A sweep under torchrun needs out=DIR: the ranks share it.")
    record = _sweep_record(
        names, checkpoints, options=options, run_options=run_options, configs=configs,
        seed=seed, data_digest=data_digest, time=time, level=level,
    )  # fmt: skip
    _barrier(world)  # every rank has checked DIR before rank 0 writes into it
    share = _Share(folder, rank, world, split, checkpoints)  # a refused split writes nothing
    if folder is not None and rank == 0:
        # Written first (every argument checked by now), so that a killed sweep's folder is
        # recognised as one and resumed.
        _write_json(folder, "sweep.json", record)
    in_memory: dict[str, dict[str, Result]] = {}
    measured = _measure_all(
        checkpoints, names, data, folder=folder, keys_of=keys_of, share=share,
        in_memory=in_memory, force=force, configs=configs, own_options=own_options,
        run_options=run_options, seed=seed, rank=rank,
        show=(progress if progress is not None else True) and rank == 0,
    )  # fmt: skip
    share.finish(checkpoints, names, in_memory)
    measured_by_all = _sum_over_ranks(len(measured), world)
    if rank != 0:
        return _follower_result(folder, measured, measured_by_all, world)
    results_by_label = _collect(folder, checkpoints, names, in_memory)
    rows, summary = _trajectory_rows(results_by_label, checkpoints, names, time, level, exact)
    seeds = table.across_seeds(rows) if len(checkpoints.seeds) > 1 else []
    record["duplicates"] = checkpoints.duplicates()
    outcome = SweepResult(rows, summary, folder, measured, results_by_label, seeds, measured_by_all)
    if folder is not None:
        record.update(state="complete", theory=summary)
        _write_outputs(folder, record, outcome, names, figures)
    _rows_from_rank_0(outcome.rows, world)
    return outcome


def _checked_names(analyses: str | Sequence[str], theory: str, time: str) -> list[str]:
    """The analyses' names, each known, with the theory level and time axis checked: every
    argument that needs no checkpoint fails before a checkpoint is listed or loaded."""
    names = [analyses] if isinstance(analyses, str) else list(analyses)
    if not names:
        raise ValueError("No analysis given; name one or more (see `geomlens list`).")
    for name in names:
        analysis_class(name)  # an unknown name fails here, listing the known ones
    if theory not in LEVELS:
        raise ValueError(f"Unknown theory level {theory!r}; use one of {', '.join(LEVELS)}.")
    if time not in TIME_AXES:
        raise ValueError(f"Unknown time axis {time!r}; use one of {', '.join(TIME_AXES)}.")
    return names


def _check_run_arguments(seed: Any, options: Mapping[str, Any]) -> None:
    """The seed and the batch size, checked as ``geomlens run`` does: before anything is
    listed, loaded or written."""
    from geomlens.engine.feed import check_seed

    check_seed(seed)
    size = options.get("batch_size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise ValueError(f"batch_size must be an integer >= 1 (inputs per pass); got {size!r}.")


def _checkpoints_of(series: Any, backend: str | None, select: str | None, time: str) -> Series:
    """The series' checkpoints (``select``-ed); ``time='lr-sum'`` needs Σ lr at every one, so a
    series without it is refused before anything is measured."""
    checkpoints = series if isinstance(series, Series) else make_series(series, backend=backend)
    if select is not None:
        checkpoints = checkpoints.select(select)
    if time == "lr-sum":
        checkpoints = checkpoints.with_lr_sum()
        if any(c.time is None for c in checkpoints):
            raise ValueError(
                "time='lr-sum' needs a series that records Σ lr per checkpoint (a geomlens "
                "experiment's run.json, or Trainer folders whose trainer_state.json logs the "
                "learning rate); use time='step'."
            )
    return checkpoints


def _check_before_writing(
    folder: Path | None, checkpoints: Series, names: Sequence[str], keys_of: _Keys
) -> None:
    """``--out`` checked, and every hub revision's commit resolved before sweep.json is written,
    so that a sweep that cannot reach the hub (offline, a revision not in the cache) fails
    having written nothing."""
    if folder is not None:
        _check_out(folder, checkpoints, names)
    for checkpoint in checkpoints:
        if checkpoint.kind == "hub":
            keys_of.digest(checkpoint)


def _cache_keys(
    names: Sequence[str],
    checkpoints: Series,
    data: Any,
    options: Mapping[str, Any],
    run_options: Mapping[str, Any],
    configs: dict[str, dict[str, Any]],
    seed: int,
) -> tuple[str, _Keys]:
    """The data digest and the cache keys: what a stored Result must match to be reused."""
    # Without data, the first analysis's shipped data (as `geomlens run` does), made from the
    # first checkpoint loaded; its digest names the analysis and its options.
    data_digest = (
        _data_digest(data)
        if data is not None
        else "default:" + _digest([names[0], configs[names[0]]["config"]])
    )
    shared = {
        "data": data_digest,
        "sites": _plain(options.get("site")),
        "seed": seed,
        "run_options": _plain(run_options),
    }
    return data_digest, _Keys(checkpoints, configs, shared)


def _follower_result(
    folder: Path | None, measured: list[tuple[str, list[str]]], measured_by_all: int, world: int
) -> SweepResult:
    """A rank other than 0 waits for rank 0 to write the table and takes its rows (sent, not
    read from DIR: a node's own DIR may not be rank 0's)."""
    rows = _rows_from_rank_0(None, world)
    return SweepResult(rows, {}, folder, measured, measured_by_all=measured_by_all)


def _rows_from_rank_0(rows: list[dict[str, Any]] | None, world: int) -> list[dict[str, Any]]:
    """Rank 0's trajectory rows on every rank (sent once rank 0 has written the table)."""
    if world == 1:
        return rows or []
    import torch.distributed as dist

    sent = [rows]
    dist.broadcast_object_list(sent, src=0)
    return sent[0] or []


def _fill_series_defaults(
    names: Sequence[str], checkpoints: Series, options: dict[str, Any]
) -> None:
    """Fill ``options`` in place with what the series declares (its sites, its options) where
    the caller gave none; an option no analysis takes is left out rather than refused."""
    if "site" not in options and checkpoints.default_sites():
        options["site"] = checkpoints.default_sites()
    for name, value in checkpoints.default_options().items():
        if name not in options and _takes_option(names, name):
            options[name] = value


def _sweep_record(
    names: list[str],
    checkpoints: Series,
    *,
    options: Mapping[str, Any],
    run_options: Mapping[str, Any],
    configs: Mapping[str, Mapping[str, Any]],
    seed: int,
    data_digest: str,
    time: str,
    level: str,
) -> dict[str, Any]:
    """The content of ``sweep.json`` while measuring (``state``, ``theory`` are updated once
    the sweep completes); its key order is the file's."""
    return {
        "format": FORMAT,
        "state": "measuring",
        "analyses": names,
        "options": _plain(options),
        "run_options": _plain(run_options),
        "configs": {n: configs[n]["config"] for n in names},
        "seed": seed,
        "data_digest": data_digest,
        "time": time,
        "series": checkpoints.describe(),
        "theory": {"level": level},
    }


def _measure_all(
    checkpoints: Series,
    names: list[str],
    data: Any,
    *,
    folder: Path | None,
    keys_of: _Keys,
    share: _Share,
    in_memory: dict[str, dict[str, Result]],
    force: bool,
    configs: dict[str, dict[str, Any]],
    own_options: dict[str, Any],
    run_options: dict[str, Any],
    seed: int,
    rank: int,
    show: bool,
) -> list[tuple[str, list[str]]]:
    """Measure every checkpoint with an analysis missing (or all, ``force``) that this process
    takes (``share``), filling ``in_memory`` (and the folder); the (label, analyses) measured,
    in order.
    ``data`` None: the first analysis's shipped data, made once from the first checkpoint. A
    checkpoint whose weights equal an earlier one's takes that one's Results (not loaded, not
    measured, not counted as measured) when they are at hand."""
    from tqdm.auto import tqdm

    twins = checkpoints.duplicates()
    measured: list[tuple[str, list[str]]] = []
    hinted = not show
    done = (
        0
        if force
        else sum(1 for c in checkpoints if not _missing(folder, c, names, keys_of(c), in_memory))
    )
    bar = tqdm(
        total=len(checkpoints), initial=done, desc="checkpoints", unit="ckpt", disable=not show
    )
    try:
        for checkpoint in checkpoints:
            keys = keys_of(checkpoint)
            missing = names if force else _missing(folder, checkpoint, names, keys, in_memory)
            if not missing:
                continue
            if not share.take(checkpoint):
                bar.update(1)  # another rank measures it: the bar counts every rank's
                continue
            copied = _twin_results(checkpoints, twins.get(checkpoint.label), missing, keys_of,
                                   folder, in_memory)  # fmt: skip
            if copied is not None:
                _store(copied, checkpoint, keys, keys_of, folder, in_memory, rank)
                bar.update(1)
                continue
            started = clock.perf_counter()
            adapter = checkpoints.load(checkpoint)
            if data is None:
                data = analysis_class(names[0])(
                    **_options_of(names[0], configs, own_options)
                ).default_data(adapter)
            chosen = {
                k: v
                for k, v in own_options.items()
                if k in set().union(*(configs[n]["fields"] for n in missing))
            }
            results = _run_checkpoint(
                checkpoint, missing, adapter, data, seed=seed, **run_options, **chosen
            )
            _store({n: results[n] for n in missing}, checkpoint, keys, keys_of, folder,
                   in_memory, rank)  # fmt: skip
            measured.append((checkpoint.label, list(missing)))
            del adapter
            bar.update(1)
            hinted = _show_speed(bar, clock.perf_counter() - started, hinted, names, configs)
    finally:
        bar.close()
    return measured


def _store(
    results: Mapping[str, Result],
    checkpoint: Checkpoint,
    keys: Mapping[str, str],
    keys_of: _Keys,
    folder: Path | None,
    in_memory: dict[str, dict[str, Result]],
    rank: int,
) -> None:
    """Stamp each Result with the checkpoint and its key, write it, and keep it in memory."""
    for name, result in results.items():
        result.provenance["sweep"] = {
            **checkpoint.describe(),
            "key": keys[name],
            "weights": keys_of.digest(checkpoint),
            "rank": rank,
        }
        _seal(result)
        if folder is not None:
            write_owned(folder, _result_name(checkpoint, name), result.to_json() + "\n", OWNER)
        in_memory.setdefault(checkpoint.label, {})[name] = result


def _twin_results(
    checkpoints: Series,
    twin: str | None,
    names: Sequence[str],
    keys_of: _Keys,
    folder: Path | None,
    in_memory: Mapping[str, Mapping[str, Result]],
) -> dict[str, Result] | None:
    """Copies of the Results of ``twin`` (the earlier checkpoint with the same weights), each
    marked ``duplicate_of``, when every one of ``names`` is at hand under its current key (in
    memory or in the folder); None otherwise (the checkpoint is then measured)."""
    import copy

    if twin is None:
        return None
    original = next(c for c in checkpoints if c.label == twin)
    keys = keys_of(original)
    found = {}
    for name in names:
        result = in_memory.get(twin, {}).get(name)
        if result is None and folder is not None and _result_path(folder, original, name).is_file():
            result = Result.from_json(_result_path(folder, original, name))
        if result is None or result.provenance.get("sweep", {}).get("key") != keys[name]:
            return None
        found[name] = copy.deepcopy(result)
        found[name].provenance["duplicate_of"] = twin
    return found


def _show_speed(
    bar: Any, seconds: float, hinted: bool, names: Sequence[str], configs: Mapping[str, Any]
) -> bool:
    """The seconds per checkpoint on the bar, and once (the first slow checkpoint) the
    cheaper options; whether they have been named (or need not be)."""
    bar.set_postfix_str(f"{seconds:.2f} s/checkpoint")
    if hinted or seconds <= SLOW_SECONDS:
        return hinted
    hint = _cheaper_hint(names, configs)
    if hint:
        bar.write(f"{seconds:.1f} s per checkpoint; {hint}", file=sys.stderr)
    return True


def _cheaper_hint(names: Sequence[str], configs: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The numeric options a ``--quick`` report sets lower than this sweep does (fewer bootstrap
    draws, fewer samples), in the command line's words (None when there are none)."""
    from geomlens.analyses.registry import declaration

    cheaper = []
    for name in names:
        try:
            quick = declaration(name).quick
        except (KeyError, ImportError):
            continue
        for option, value in quick.items():
            current = configs[name]["config"].get(option)
            if _numeric(value) and _numeric(current) and current > value:
                cheaper.append(f"--option {option}={value}")
    if not cheaper:
        return None
    return (
        f"cheaper: {' '.join(dict.fromkeys(cheaper))} (the settings of a --quick report; "
        "Results already written are kept, a rerun with other options measures again)"
    )


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _run_checkpoint(
    checkpoint: Checkpoint, names: list[str], adapter: Any, data: Any, **options: Any
) -> dict[str, Result]:
    """``engine.run`` on one checkpoint; activations that hold NaN or Inf name the checkpoint
    (its weights are the likely cause), not only the site and the batch."""
    from geomlens.hooks.finite_check import NonFiniteActivationError

    try:
        results = engine.run(names, adapter, data, distributed=False, progress=False, **options)
    except NonFiniteActivationError as error:
        where = f" ({checkpoint.source})" if checkpoint.source else ""
        raise NonFiniteActivationError(
            f"Checkpoint {checkpoint.label}{where}: {error} Check that checkpoint's weights "
            "(a diverged step holds NaN weights), or leave it out of the series."
        ) from error
    assert isinstance(results, dict)
    return results


def _content_digest(result: Result) -> str:
    """A digest of everything a stored Result says but the digest itself, read as from its
    file (so that the Result as written and as read back agree)."""
    document = Result.from_json(result.to_json()).to_dict()
    document.get("provenance", {}).get("sweep", {}).pop("content", None)
    return _digest(document)


def _seal(result: Result) -> None:
    """Record the Result's own content digest in it: a Result edited since is measured again."""
    result.provenance["sweep"].pop("content", None)
    result.provenance["sweep"]["content"] = _content_digest(result)


def _sealed(result: Result) -> bool:
    recorded = result.provenance.get("sweep", {}).get("content")
    return isinstance(recorded, str) and recorded == _content_digest(result)


def _trajectory_rows(
    results_by_label: Mapping[str, Mapping[str, Result]],
    checkpoints: Series,
    names: Sequence[str],
    time: str,
    level: str,
    exact: Mapping[int | None, ExactAbstraction],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The long table's rows, in checkpoint then analysis order, and the theory summary; at
    level ``none`` the theory columns are emptied, and a toy front adds its own columns."""
    pairs = []
    duplicates = checkpoints.duplicates()
    for checkpoint in checkpoints:
        for name in names:
            result = results_by_label[checkpoint.label][name]
            info = _info(result, checkpoint, time)
            info["duplicate_of"] = duplicates.get(checkpoint.label)
            pairs.append((info, result))
    rows = table.build_rows(pairs, exact=exact, laws=level in ("laws", "exact"))
    if level == "none":
        for row in rows:
            for column in (
                "theory_exact",
                "residual_exact",
                "theory_layer_law",
                "residual_layer_law",
            ):
                row[column] = None
    summary = _theory_summary(level, exact, rows, checkpoints)
    if "toy_front" in summary:
        from geomlens.dynamics.toy_overlay import add_front_columns

        add_front_columns(rows)
    return rows, summary


# --- options, keys, cache ---------------------------------------------------------------------


def _resolve_options(
    names: Sequence[str], options: Mapping[str, Any]
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Each analysis's resolved config (its defaults filled in) and its option names; an option
    no analysis takes is refused here, before anything is written."""
    configs: dict[str, dict[str, Any]] = {}
    used: set[str] = set()
    for name in names:
        cls = analysis_class(name)
        fields = {f.name for f in dataclasses.fields(cls.Config)}
        mine = {k: v for k, v in options.items() if k in fields}
        used.update(mine)
        configs[name] = {"config": _plain(cls.Config(**mine).to_dict()), "fields": fields}
    unused = sorted(set(options) - used)
    if unused:
        raise ValueError(
            f"Option(s) {', '.join(map(repr, unused))} are not options of "
            f"{', '.join(map(repr, names))}."
        )
    return configs, dict(options)


def _takes_option(names: Sequence[str], option: str) -> bool:
    return any(
        option in {f.name for f in dataclasses.fields(analysis_class(n).Config)} for n in names
    )


def _options_of(
    name: str, configs: Mapping[str, Mapping[str, Any]], options: Mapping[str, Any]
) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k in configs[name]["fields"]}


class _Keys:
    """The cache key of (checkpoint, analysis); the weights digest is computed once each."""

    def __init__(self, series: Series, configs: dict[str, dict[str, Any]], shared: dict[str, Any]):
        self.series, self.configs, self.shared = series, configs, shared
        self._digests: dict[str, str] = {}

    def digest(self, checkpoint: Checkpoint) -> str:
        if checkpoint.label not in self._digests:
            self._digests[checkpoint.label] = self.series.weights_digest(checkpoint)
        return self._digests[checkpoint.label]

    def __call__(self, checkpoint: Checkpoint) -> dict[str, str]:
        weights = self.digest(checkpoint)
        # The step, Σ lr and seed as read now: a trainer_state.json changed since is measured
        # (and recorded) again, not shown with the step of the cached Result.
        when = {k: checkpoint.describe().get(k) for k in ("label", "step", "time", "seed")}
        return {
            name: _digest(
                {
                    "analysis": name,
                    "config": entry["config"],
                    "weights": weights,
                    "checkpoint": when,
                    **self.shared,
                }
            )  # fmt: skip
            for name, entry in self.configs.items()
        }


def _digest(value: Any) -> str:
    text = json.dumps(_plain(value), sort_keys=True, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _data_digest(data: Any) -> str:
    """A digest of the data's content (arrays by their bytes); a file by its bytes, also when
    it is streamed (``--data`` .txt / .jsonl); other streams by their rows, read once here (a
    one-shot generator is never taken from the cache)."""
    from geomlens.data.streaming import StreamedData

    if isinstance(data, (str, os.PathLike)) and Path(data).is_file():
        return "file:" + sha256_of(Path(data))
    if isinstance(data, StreamedData):
        path = getattr(data.source, "path", None)
        if isinstance(path, Path):
            return _digest({"file": sha256_of(path), "limit": data.limit})
        if data._one_shot:
            return "uncached:" + uuid.uuid4().hex
        try:
            return _digest({"rows": list(data.rows()), "limit": data.limit})
        except (TypeError, ValueError):
            return "uncached:" + uuid.uuid4().hex
    try:
        return _digest(data)
    except (TypeError, ValueError):
        return "repr:" + hashlib.sha256(repr(data).encode()).hexdigest()


def _array_digest(value: np.ndarray) -> dict[str, Any]:
    """An array in a sweep's options, written by its content (it may be large)."""
    return {"array": hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest(),
            "shape": list(value.shape), "dtype": str(value.dtype)}  # fmt: skip


def _plain(value: Any) -> Any:
    """Options as JSON-ready values for sweep.json and the digests (arrays by content)."""
    return plain(value, array=_array_digest)


def _result_name(checkpoint: Checkpoint, name: str) -> str:
    """A Result's name inside the sweep's folder (``checkpoints/<label>/<analysis>.json``)."""
    return f"checkpoints/{checkpoint.label}/{name}.json"


def _result_path(folder: Path, checkpoint: Checkpoint, name: str) -> Path:
    """Where a Result is: always inside ``folder`` (a label is a name, never a path)."""
    return owned_path(folder, _result_name(checkpoint, name))


def _missing(
    folder: Path | None,
    checkpoint: Checkpoint,
    names: Sequence[str],
    keys: Mapping[str, str],
    in_memory: Mapping[str, Mapping[str, Result]],
) -> list[str]:
    """The analyses whose Result for ``checkpoint`` is absent or was made with another key."""
    missing = []
    for name in names:
        stored = in_memory.get(checkpoint.label, {}).get(name)
        if stored is None and folder is not None:
            path = _result_path(folder, checkpoint, name)
            if path.is_file():
                try:
                    stored = Result.from_json(path)
                except ValueError:
                    stored = None
        if (
            stored is None
            or stored.provenance.get("sweep", {}).get("key") != keys[name]
            or not _sealed(stored)
        ):
            missing.append(name)
    return missing


def _collect(
    folder: Path | None,
    checkpoints: Series,
    names: Sequence[str],
    in_memory: dict[str, dict[str, Result]],
) -> dict[str, dict[str, Result]]:
    """Every Result of the sweep: read back from the files (the table is rebuilt from them
    alone), or the ones measured in memory when there is no folder."""
    collected: dict[str, dict[str, Result]] = {}
    for checkpoint in checkpoints:
        for name in names:
            if folder is not None:
                result = Result.from_json(_result_path(folder, checkpoint, name))
            else:
                result = in_memory[checkpoint.label][name]
            collected.setdefault(checkpoint.label, {})[name] = result
    return collected


def _info(result: Result, checkpoint: Checkpoint, time: str) -> dict[str, Any]:
    recorded = result.provenance.get("sweep", {})
    step = int(recorded.get("step", checkpoint.step))
    lr_sum = recorded.get("time", checkpoint.time)
    shown = float(step) if time == "step" or (time == "auto" and lr_sum is None) else float(lr_sum)
    return {
        "label": recorded.get("label", checkpoint.label),
        "seed": recorded.get("seed", checkpoint.seed),
        "step": step,
        "time": shown,
        "clock": float(lr_sum) if lr_sum is not None else float(step),
        "training": dict(checkpoint.training or {}),
    }


def _check_out(folder: Path, checkpoints: Series, names: Sequence[str]) -> None:
    from geomlens.results import check_not_an_input

    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {folder} is a file; give a folder for the sweep.")
    inputs = {
        f"checkpoint {c.label}": c.source for c in checkpoints if c.kind in ("folder", "experiment")
    }
    check_not_an_input("--out", folder / "sweep.json", inputs)
    # The report folder's rules: a new or empty folder, or one holding only what a sweep wrote
    # (its manifest proves it); a Result of this sweep edited since is measured again.
    results = [_result_name(c, name) for c in checkpoints for name in names]
    check_owned_folder(folder, "sweep", OWNER, replaceable=results)


# --- theory -----------------------------------------------------------------------------------


def _theory_level(
    requested: str, names: Sequence[str], series: Series
) -> tuple[str, dict[int | None, ExactAbstraction]]:
    exact: dict[int | None, ExactAbstraction] = {}
    for seed, record in series.experiments.items():
        if record.get("theory", {}).get("kind") == "abstraction-exact":
            exact[seed] = ExactAbstraction.from_record(
                record, origin=f"run.json of {series.source}"
            )
    declared = bool(exact) or any(
        r.get("theory", {}).get("kind") == "toy-front" for r in series.experiments.values()
    )
    if requested == "exact" and not declared:
        raise ValueError(
            "theory='exact' needs a series that declares its setup (a geomlens experiment's "
            "run.json); use theory='laws' or 'none' for any other model."
        )
    if requested == "auto":
        requested = "exact" if declared else "laws"
    return requested, (exact if requested == "exact" else {})


def _theory_summary(
    level: str,
    exact: Mapping[int | None, ExactAbstraction],
    rows: Sequence[Mapping[str, Any]],
    series: Series,
) -> dict[str, Any]:
    summary: dict[str, Any] = {"level": level}
    if level == "laws":
        summary["note"] = (
            "parameter-free laws as diagnostics: the per-layer artanh law through the first and "
            "last layer, and α after each MLP nonlinearity against α before it; they need not "
            "hold on a trained transformer (the linear-network theory does not cover one)"
        )
    if exact:
        per_seed = {}
        for seed, theory in exact.items():
            last = theory.sites[-1] if theory.sites else None
            mine = [
                r for r in rows
                if r["seed"] == seed and r["analysis"] == "abstraction" and r["metric"] == "alpha"
                and r["site"] == last and r["task"] == _first_task(rows)
            ]  # fmt: skip
            clocks = [_clock_of(series, r["checkpoint"]) for r in mine]
            values = [r["value"] if r["value"] is not None else np.nan for r in mine]
            per_seed[str(seed)] = {**theory.parameters(), **theory.summary(clocks, values)}
        summary["exact"] = per_seed[next(iter(per_seed))] if len(per_seed) == 1 else per_seed
        layer_residuals = [
            abs(r["residual_layer_law"]) for r in rows if r["residual_layer_law"] is not None
        ]
        summary["max_abs_residual_layer_law"] = max(layer_residuals) if layer_residuals else None
    toy = [r for r in series.experiments.values() if r.get("theory", {}).get("kind") == "toy-front"]
    if toy and level == "exact":
        from geomlens.dynamics.toy_overlay import toy_summary

        summary["toy_front"] = toy_summary(rows)
    return summary


def _first_task(rows: Sequence[Mapping[str, Any]]) -> str:
    return str(rows[0]["task"]) if rows else ""


def _clock_of(series: Series, label: str) -> float:
    for checkpoint in series:
        if checkpoint.label == label:
            return float(checkpoint.time if checkpoint.time is not None else checkpoint.step)
    raise KeyError(label)


# --- outputs ----------------------------------------------------------------------------------


def _write_outputs(
    folder: Path, record: dict[str, Any], outcome: SweepResult, names: Sequence[str], figures: bool
) -> None:
    document = {"columns": list(table.COLUMNS), "rows": outcome.rows}
    if outcome.across_seeds:
        document["across_seeds"] = outcome.across_seeds
        write_owned(
            folder,
            "trajectory_seeds.csv",
            table.to_csv(outcome.across_seeds, table.ACROSS_SEEDS_COLUMNS),
            OWNER,
        )
    text = json.dumps(document, indent=1, allow_nan=False) + "\n"
    write_owned(folder, "trajectory.json", text, OWNER)
    write_owned(folder, "trajectory.csv", table.to_csv(outcome.rows), OWNER)
    record["stages"] = outcome.stages
    _write_json(folder, "sweep.json", record)
    if figures:
        import tempfile

        from geomlens.dynamics.figures import draw_analysis

        with tempfile.TemporaryDirectory(prefix=".geomlens-figures.", dir=folder) as drawn:
            for name in names:
                draw_analysis(outcome, name, Path(drawn) / f"{name}.png", record)
                place_owned(folder, Path(drawn) / f"{name}.png", f"{name}.png", OWNER)


def _write_json(folder: Path, name: str, value: Any) -> None:
    write_owned(folder, name, json.dumps(value, indent=1, allow_nan=False) + "\n", OWNER)


# --- processes --------------------------------------------------------------------------------


def _process() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _sum_over_ranks(count: int, world: int) -> int:
    if world == 1:
        return count
    import torch.distributed as dist

    counts: list[Any] = [None] * world
    dist.all_gather_object(counts, count)
    return sum(counts)


def _barrier(world: int) -> None:
    if world > 1:
        import torch.distributed as dist

        dist.barrier()


class _Share:
    """How this rank takes its checkpoints under torchrun (a single process takes them all).

    ``claims``: one claim file per checkpoint in ``DIR/.claims/<run>/``; the rank that creates
    it (O_EXCL) measures the checkpoint. ``by-rank``: checkpoint i (in the series' order) is
    rank i mod K's; once measured, each rank sends its checkpoints' Results to rank 0, which
    writes those it lacks into its DIR. ``auto`` chooses claims when every rank sees the file
    rank 0 wrote into ``DIR/.claims/<run>/``, else by-rank; ``claims`` on a DIR some rank does
    not see is refused (every node would measure every checkpoint)."""

    def __init__(
        self, folder: Path | None, rank: int, world: int, split: str, checkpoints: Series
    ) -> None:
        self.rank, self.world, self.folder = rank, world, folder
        self.directory: Path | None = None
        self.mode = "alone"
        #: Whether each rank read back the file rank 0 wrote into DIR (auto and claims only).
        self.seen: list[Any] = []
        self.owner = {c.label: i % world for i, c in enumerate(checkpoints)}
        if world == 1 or folder is None:
            return
        if split == "by-rank":
            self.mode = split
            return
        import torch.distributed as dist

        run = [uuid.uuid4().hex if rank == 0 else None]
        dist.broadcast_object_list(run, src=0)
        self.directory = folder / ".claims" / str(run[0])
        self.directory.mkdir(parents=True, exist_ok=True)
        shared = self._every_rank_sees_rank_0(str(run[0]))
        if split == "claims" and not shared:
            self._remove_own_directory()
            blind = ", ".join(str(r) for r, yes in enumerate(self.seen) if not yes)
            raise ValueError(
                f"--split claims needs an --out every rank sees (a shared filesystem); rank(s) "
                f"{blind} do not see the files rank 0 writes into {folder}. Use --split by-rank "
                "(or auto): each node keeps its Results and rank 0 collects them."
            )
        self.mode = "claims" if shared else "by-rank"

    def _every_rank_sees_rank_0(self, run: str) -> bool:
        """Whether the file rank 0 writes into this run's claim folder is read back by every
        rank (``self.seen``: each rank's answer)."""
        import torch.distributed as dist

        assert self.directory is not None
        probe = self.directory / "rank-0"
        if self.rank == 0:
            probe.write_text(run, encoding="utf-8")
        _barrier(self.world)
        mine = probe.is_file() and probe.read_text(encoding="utf-8") == run
        self.seen = [None] * self.world
        dist.all_gather_object(self.seen, mine)
        return all(self.seen)

    def take(self, checkpoint: Checkpoint) -> bool:
        if self.mode == "by-rank":
            return self.owner[checkpoint.label] == self.rank
        if self.mode != "claims":
            return True
        assert self.directory is not None
        path = self.directory / (checkpoint.label.replace("/", "__") + ".claim")
        try:
            handle = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        os.write(handle, f"rank {self.rank} pid {os.getpid()}\n".encode())
        os.close(handle)
        return True

    def finish(
        self,
        checkpoints: Series,
        names: Sequence[str],
        in_memory: dict[str, dict[str, Result]],
    ) -> None:
        """Every rank done; by-rank, rank 0's DIR given every rank's Results; the claim folders
        removed (by each rank from its own DIR where the DIRs differ)."""
        if self.mode == "alone":
            return
        _barrier(self.world)
        if self.mode == "by-rank":
            self._send_to_rank_0(checkpoints, names, in_memory)
            self._remove_own_directory()
        elif self.rank == 0:
            self._remove_own_directory()

    def _send_to_rank_0(
        self,
        checkpoints: Series,
        names: Sequence[str],
        in_memory: dict[str, dict[str, Result]],
    ) -> None:
        """Each rank's Results of its own checkpoints (measured now or cached in its DIR), as
        their files' text, written by rank 0 into its DIR where it lacks them."""
        import torch.distributed as dist

        assert self.folder is not None
        mine: dict[str, str] = {}
        for checkpoint in checkpoints:
            if self.owner[checkpoint.label] != self.rank:
                continue
            for name in names:
                result = in_memory.get(checkpoint.label, {}).get(name)
                relative = _result_name(checkpoint, name)
                mine[relative] = (
                    result.to_json() + "\n"
                    if result is not None
                    else owned_path(self.folder, relative).read_text(encoding="utf-8")
                )
        gathered: list[Any] = [None] * self.world
        dist.all_gather_object(gathered, mine)
        if self.rank != 0:
            return
        for rank, texts in enumerate(gathered):
            for relative, text in texts.items():
                here = owned_path(self.folder, relative)
                if rank != 0 and not (here.is_file() and here.read_text(encoding="utf-8") == text):
                    write_owned(self.folder, relative, text, OWNER)

    def _remove_own_directory(self) -> None:
        import contextlib
        import shutil

        if self.directory is None:
            return
        shutil.rmtree(self.directory, ignore_errors=True)
        parent = self.directory.parent
        with contextlib.suppress(OSError):  # another rank's run, or removed by one already
            if parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()

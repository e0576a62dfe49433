"""The analysis contract, executable: ``check_analysis(analysis, adapter, data)``.

As scikit-learn's ``check_estimator`` does for estimators, this runs an analysis the ways the
engine will (one pass, two halves merged, a checkpoint's state saved and resumed, twice for
determinism) and checks what every analysis must give:

- **merge**: the halves of the data, run apart and merged, give the one pass's result;
- **state**: ``state_dict`` survives a checkpoint's round trip (``torch.save`` bytes) and a run
  resumed from it gives the one pass's result;
- **no batch tensor kept**: no activation or input tensor of a batch outlives the batch because
  the analysis holds it (it must reduce what it needs and let the batch go);
- **deterministic**: two runs give the same result;
- **JSON**: the result survives ``to_json`` / ``from_json`` unchanged;
- **plot**: an analysis with a figure draws it from the JSON copy (reading only what survives).

It raises :class:`AnalysisContractError` listing every check that failed, and returns the names
of the checks run. Give it a small data set (a few batches): it makes six passes over it.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.multiprocessing.reductions import StorageWeakRef

from geomlens.analyses.base import Analysis, Batch
from geomlens.analyses.plotting import has_plot
from geomlens.data.dataset import Dataset
from geomlens.engine import prepare_data, run, stream
from geomlens.engine.distributed import from_bytes, to_bytes
from geomlens.models.adapter import Adapter
from geomlens.results import Result

#: Relative tolerance of "the same result" for merged and resumed runs (sums in another order).
MERGE_TOLERANCE = 1e-6
#: Relative tolerance of "the same result" for two identical runs.
DETERMINISM_TOLERANCE = 1e-9

CHECKS = ("merge", "state", "no-batch-tensor-kept", "deterministic", "json", "plot")


class AnalysisContractError(AssertionError):
    """An analysis broke the contract; the message has one line per failed check."""


def check_analysis(
    analysis: Analysis | type[Analysis],
    adapter: Adapter,
    data: Any,
    *,
    batch_size: int | None = None,
    seed: int = 0,
    **options: Any,
) -> list[str]:
    """Check ``analysis`` (an instance, whose config is used, or a class with ``options``)
    against the contract on ``adapter`` and ``data``; return the names of the checks run.

    ``batch_size`` defaults to a quarter of the rows, so that each half is whole batches.
    """
    make = _maker(analysis, options)
    dataset = prepare_data(data, adapter)
    if not isinstance(dataset, Dataset):
        raise ValueError("check_analysis needs sized data (a list, a mapping, a Dataset).")
    rows = len(dataset)
    if rows < 4:
        raise ValueError(f"check_analysis needs at least 4 rows of data; got {rows}.")
    batch_size = batch_size or -(-rows // 4)
    # The halves split between batches, so each half forms the batches the one pass forms.
    half = max(1, (rows // batch_size) // 2) * batch_size
    if half >= rows:
        raise ValueError(
            f"batch_size={batch_size} leaves no second half of {rows} rows; use a smaller one."
        )
    first, second = np.arange(half), np.arange(half, rows)
    settings: dict[str, Any] = {"batch_size": batch_size, "seed": seed, "progress": False}

    def feed(instance: Analysis, selected: np.ndarray | None = None) -> Analysis:
        torch.manual_seed(seed)  # as gl.run does before its pass
        stream([instance], adapter, dataset, rows=selected, **settings)
        return instance

    failures: list[str] = []
    whole, cls, kept = _one_pass_keeping_watch(make, adapter, dataset, settings)
    if kept:
        failures.append(
            f"no-batch-tensor-kept: the analysis still holds {kept} tensor(s) of a finished "
            "batch (activations or inputs); reduce what update() needs and keep that instead."
        )

    merged = feed(make(), first)
    merged.merge(feed(make(), second))
    failures += _differences(
        "merge", "two halves merged", merged.finalize(), whole, MERGE_TOLERANCE
    )

    saved = feed(make(), first)
    resumed = make()
    assert saved.context is not None  # the pass set it up
    resumed.setup(saved.context)
    resumed.load_state_dict(from_bytes(to_bytes(saved.state_dict()), adapter.device))
    feed(resumed, second)
    failures += _differences(
        "state", "a run resumed from state_dict", resumed.finalize(), whole, MERGE_TOLERANCE
    )

    again = feed(make()).finalize()
    failures += _differences("deterministic", "a second run", again, whole, DETERMINISM_TOLERANCE)

    loaded, json_failures = _through_json(whole)
    failures += json_failures
    if loaded is not None and has_plot(cls):
        try:
            cls.plot(loaded)
        except Exception as error:  # any failure to draw from the JSON copy breaks the contract
            failures.append(
                f"plot: drawing the result read back from JSON failed ({type(error).__name__}: "
                f"{error}); plot may read only result.metrics, .tables, .config, .provenance."
            )
    if failures:
        name = cls.__name__
        raise AnalysisContractError(
            f"{name} breaks the analysis contract:\n- " + "\n- ".join(failures)
        )
    return list(CHECKS)


def _maker(analysis: Analysis | type[Analysis], options: dict[str, Any]) -> Callable[[], Analysis]:
    """Fresh instances with the same config."""
    if isinstance(analysis, Analysis):
        if options:
            raise ValueError("Give options with an analysis class, not with an instance.")
        cls, config = type(analysis), analysis.config
        return lambda: cls(dataclasses.replace(config))
    if isinstance(analysis, type) and issubclass(analysis, Analysis):
        return lambda: analysis(**options)
    raise TypeError(
        f"check_analysis takes an Analysis subclass or instance; got {type(analysis).__name__}."
    )


def _one_pass_keeping_watch(
    make: Callable[[], Analysis], adapter: Adapter, dataset: Dataset, settings: dict[str, Any]
) -> tuple[Result, type[Analysis], int]:
    """The one pass through ``gl.run`` (config and provenance recorded as users get them), and
    how many batch tensors stay alive only because the analysis holds them: alive while it
    lives, freed once it is dropped (what the adapter itself keeps does not count)."""
    watched, result, storages = _watched_run(make, adapter, dataset, settings)
    gc.collect()
    alive = [ref for ref in storages if not ref.expired()]
    cls = type(watched)
    del watched
    gc.collect()
    return result, cls, sum(ref.expired() for ref in alive)


def _watched_run(
    make: Callable[[], Analysis], adapter: Adapter, dataset: Dataset, settings: dict[str, Any]
) -> tuple[Analysis, Result, list[StorageWeakRef]]:
    """One ``gl.run`` of a fresh instance, with a weak reference to every tensor of every batch
    (activations and inputs) taken as the batch reaches the analysis."""
    watched = make()
    storages: list[StorageWeakRef] = []
    own_update = watched.update

    def update(batch: Batch) -> None:
        inputs = batch.inputs
        tensors = [*batch.activations.values(), inputs.attention_mask]
        optional = (inputs.input_ids, inputs.position_ids, inputs.span_mask)
        tensors += [t for t in optional if t is not None]
        storages.extend(StorageWeakRef(t.untyped_storage()) for t in tensors)
        own_update(batch)

    watched.update = update  # type: ignore[method-assign]
    torch.manual_seed(settings["seed"])
    result = run(watched, adapter, dataset, **settings)
    del watched.update  # the instance's own method again (this frame's references end here)
    assert isinstance(result, Result)
    return watched, result, storages


def _through_json(result: Result) -> tuple[Result | None, list[str]]:
    try:
        text = result.to_json()
        loaded = Result.from_json(text)
    except Exception as error:
        return None, [f"json: the result does not survive to_json/from_json ({error})."]
    if json.loads(loaded.to_json()) != json.loads(text):
        return loaded, ["json: the result read back from JSON differs from the one written."]
    return loaded, []


def _differences(
    check: str, what: str, got: Result, expected: Result, tolerance: float
) -> list[str]:
    """One failure line naming the first metric or table cell that differs, or none."""
    problem = first_difference(got, expected, tolerance)
    return [] if problem is None else [f"{check}: {what} differs from one pass: {problem}."]


def first_difference(
    got: Result, expected: Result, tolerance: float = MERGE_TOLERANCE
) -> str | None:
    """Where two results differ (metrics within ``tolerance`` relative to their size, tables
    cell by cell), or None when they agree. Compared as JSON reads them (NaN as null)."""
    a, b = json.loads(got.to_json()), json.loads(expected.to_json())
    if set(a["metrics"]) != set(b["metrics"]):
        missing = sorted(set(b["metrics"]) ^ set(a["metrics"]))
        return f"metrics {missing} are in one result only"
    for name, value in b["metrics"].items():
        if not _close(a["metrics"][name], value, tolerance):
            return f"metric {name} is {a['metrics'][name]!r}, not {value!r}"
    if set(a["tables"]) != set(b["tables"]):
        return f"tables {sorted(set(a['tables']) ^ set(b['tables']))} are in one result only"
    for table, rows in b["tables"].items():
        if len(a["tables"][table]) != len(rows):
            return f"table {table} has {len(a['tables'][table])} rows, not {len(rows)}"
        for number, (got_row, row) in enumerate(zip(a["tables"][table], rows)):
            for key in set(row) | set(got_row):
                if not _close(got_row.get(key), row.get(key), tolerance):
                    return (
                        f"table {table} row {number} {key} is {got_row.get(key)!r}, not "
                        f"{row.get(key)!r}"
                    )
    return None


def _close(a: Any, b: Any, tolerance: float) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if a == b:
            return True
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return abs(a - b) <= tolerance * max(1.0, abs(a), abs(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, tolerance) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(_close(a[k], b[k], tolerance) for k in a)
    return a == b

"""The trajectory table: one row per (checkpoint, analysis, site, task, metric), rebuilt from
the Result files a sweep wrote (nothing is measured again), with the theory beside it.

Columns (``COLUMNS``): the checkpoint's label, seed, step and time; the analysis, site, task
and metric; the value and its interval (``ci_low``/``ci_high``, null when the analysis gives
none); ``theory_exact`` / ``residual_exact`` (the exact theory of a declared setup) and
``theory_layer_law`` / ``residual_layer_law`` (the per-layer artanh law, or the attenuation
bound after an MLP nonlinearity). A residual is the value minus the theory. ``duplicate_of``
names the earlier checkpoint whose weights this one's equal (such a row is not an independent
point: it is left out of the interval across seeds and drawn as a mark, not a point of the
line). ``train_loss``, ``learning_rate`` and ``tokens_seen`` are the training record at the
checkpoint (a Trainer's ``trainer_state.json``, an experiment's ``run.json``), empty where the
run kept none. Rows are sorted, so the table is the same whatever order the checkpoints were
measured in.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from geomlens.dynamics.overlay import (
    ExactAbstraction,
    attenuation_bounds,
    layer_law,
    site_layer,
)
from geomlens.results import Result

#: The training record at each checkpoint (from the series; empty where the run kept none).
TRAINING_COLUMNS = ("train_loss", "learning_rate", "tokens_seen")
#: The range of bounded metrics (cosines, probabilities, accuracies): an interval across seeds
#: is clipped to it.
RANGES: dict[str, tuple[float, float]] = {
    "alpha": (-1.0, 1.0),
    "ccgp": (0.0, 1.0),
    "within_context_accuracy": (0.0, 1.0),
    "p_similarity": (0.0, 1.0),
    "p_identification": (0.0, 1.0),
}
#: Where a row sits: the time and what was measured (both tables start with these).
_WHEN_AND_WHAT = ("step", "time", "analysis", "site", "task", "metric")
COLUMNS = (
    "checkpoint",
    "seed",
    *_WHEN_AND_WHAT,
    "value",
    "ci_low",
    "ci_high",
    "theory_exact",
    "residual_exact",
    "theory_layer_law",
    "residual_layer_law",
    "duplicate_of",
    *TRAINING_COLUMNS,
)
#: The "site" of a metric of no site (``summary.<name>``): a row of it has this site.
SUMMARY_SITE = "summary"
#: Metrics whose per-layer law and attenuation bound are drawn (abstraction cosines).
ALPHA_METRICS = ("alpha",)
ACROSS_SEEDS_COLUMNS = (*_WHEN_AND_WHAT, "mean", "ci_low", "ci_high", "sd", "seeds")


def result_rows(result: Result) -> list[dict[str, Any]]:
    """(site, task, metric, value, ci_low, ci_high) rows of one Result: from its ``per_task``
    table when it has one with site and task columns, else from ``<site>.<metric>`` metrics."""
    headlines = followed_metrics(result.analysis)
    table = result.tables.get("per_task")
    rows: list[dict[str, Any]] = []
    if table and all("site" in r and "task" in r for r in table):
        for row in table:
            names = headlines or tuple(_numeric_columns(row))
            for name in names:
                if name in row:
                    rows.append(_row(row["site"], str(row["task"]), name, row))
        return rows
    sites = result.provenance.get("sites") or []
    by_site: dict[str, dict[str, Any]] = {}
    for key, value in result.metrics.items():
        site, _, name = key.rpartition(".")
        # A metric of the whole model (``summary.<name>``, llc's λ̂) is followed when declared.
        followed_summary = site == SUMMARY_SITE and name.partition("_ci_")[0] in headlines
        if site in sites or site in by_site or followed_summary:
            by_site.setdefault(site, {})[name] = value
    for site, values in by_site.items():
        names = headlines or tuple(_numeric_columns(values))
        for name in names:
            if name in values:
                rows.append(_row(site, "", name, values))
    return rows


def followed_metrics(analysis: str) -> tuple[str, ...]:
    """The metrics a trajectory follows for ``analysis``: its declaration's ``sweep_metrics``
    (empty, as for an analysis not installed here: every numeric column of its rows)."""
    from geomlens.analyses.registry import declaration

    try:
        return declaration(analysis).sweep_metrics
    except (KeyError, ImportError):  # unknown here, or its plugin failed to load
        return ()


def _numeric_columns(row: Mapping[str, Any]) -> list[str]:
    return [
        k
        for k, v in row.items()
        if isinstance(v, (int, float))
        and not isinstance(v, bool)
        and not k.endswith(("_ci_low", "_ci_high"))
    ]


def _row(site: str, task: str, name: str, values: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "site": site,
        "task": task,
        "metric": name,
        "value": _number(values.get(name)),
        "ci_low": _number(values.get(f"{name}_ci_low")),
        "ci_high": _number(values.get(f"{name}_ci_high")),
    }


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def build_rows(
    measured: Iterable[tuple[Mapping[str, Any], Result]],
    *,
    exact: Mapping[int | None, ExactAbstraction] | None = None,
    laws: bool = True,
) -> list[dict[str, Any]]:
    """The trajectory table from ``(checkpoint info, Result)`` pairs; ``exact`` maps a seed to
    the exact theory of its run (the per-layer law then goes through the input's α). An info
    holds label, seed, step, time (the x axis) and clock (the theory's time, Σ lr)."""
    rows: list[dict[str, Any]] = []
    for info, result in measured:
        training = info.get("training") or {}
        base = {
            "checkpoint": info["label"],
            "seed": info.get("seed"),
            "step": int(info["step"]),
            "time": float(info["time"]),
            "clock": float(info.get("clock", info["time"])),
            "duplicate_of": info.get("duplicate_of"),
            **{name: _number(training.get(name)) for name in TRAINING_COLUMNS},
        }
        for row in result_rows(result):
            rows.append({**base, "analysis": result.analysis, **row})
    _add_theory(rows, exact or {}, laws)
    rows.sort(key=_order)
    return [{column: row.get(column) for column in COLUMNS} for row in rows]


def _order(row: Mapping[str, Any]) -> tuple[Any, ...]:
    seed = row["seed"] if row["seed"] is not None else -1
    layer = site_layer(row["site"])
    return (seed, row["step"], row["analysis"], layer if layer is not None else -1, row["site"],
            row["task"], row["metric"])  # fmt: skip


def _add_theory(
    rows: list[dict[str, Any]], exact: Mapping[int | None, ExactAbstraction], laws: bool
) -> None:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        key = (row["checkpoint"], row["analysis"], row["task"], row["metric"])
        groups.setdefault(key, []).append(row)
    for group in groups.values():
        values = {r["site"]: r["value"] for r in group if r["value"] is not None}
        first = group[0]
        theory = exact.get(first["seed"]) if first["metric"] in ALPHA_METRICS else None
        if theory is not None:
            for row in group:
                layer = theory.layer_of(row["site"])
                if layer is None:
                    continue
                row["theory_exact"] = float(theory.alpha([row["clock"]], layer)[0])
                last = values.get(theory.sites[-1]) if theory.sites else None
                if last is not None and row["value"] is not None:
                    row["theory_layer_law"] = _exact_layer_law(theory, last, layer)
        elif laws and first["metric"] in ALPHA_METRICS:
            law = layer_law(values)
            law.update(attenuation_bounds(values))
            for row in group:
                if row["site"] in law:
                    row["theory_layer_law"] = law[row["site"]]
        for row in group:
            for level in ("exact", "layer_law"):
                theory_value = row.get(f"theory_{level}")
                if theory_value is not None and row["value"] is not None:
                    row[f"residual_{level}"] = row["value"] - theory_value


def _exact_layer_law(theory: ExactAbstraction, last_alpha: float, layer: int) -> float:
    from geomlens.theory.abstraction import depth_per_layer

    return float(depth_per_layer(theory.alpha_x, np.asarray(last_alpha), theory.depth)[layer])


def across_seeds(
    rows: Sequence[Mapping[str, Any]], confidence: float = 0.95
) -> list[dict[str, Any]]:
    """Mean over seeds at each step with a t interval (``confidence``), for series of several
    seeds of one schedule; steps that only some seeds have use those seeds. A checkpoint that
    duplicates another's weights is not counted, and the interval of a bounded metric
    (:data:`RANGES`) is clipped to its range."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        if row["value"] is None or row.get("duplicate_of"):
            continue
        key = (row["step"], row["analysis"], row["site"], row["task"], row["metric"])
        groups.setdefault(key, []).append(row)
    summary = []
    for (step, analysis, site, task, metric), group in sorted(
        groups.items(),
        key=lambda item: (item[0][0], item[0][1], _site_key(item[0][2]), *item[0][3:]),
    ):
        values = np.array([r["value"] for r in group], dtype=float)
        mean = float(values.mean())
        sd = float(values.std(ddof=1)) if len(values) > 1 else None
        half = (
            float(stats.t.ppf(0.5 + confidence / 2, len(values) - 1) * sd / math.sqrt(len(values)))
            if sd is not None
            else None
        )
        low, high = RANGES.get(metric, (-math.inf, math.inf))
        summary.append(
            {
                "step": step,
                "time": float(np.mean([r["time"] for r in group])),
                "analysis": analysis,
                "site": site,
                "task": task,
                "metric": metric,
                "mean": mean,
                "ci_low": max(mean - half, low) if half is not None else None,
                "ci_high": min(mean + half, high) if half is not None else None,
                "sd": sd,
                "seeds": len(values),
            }
        )
    return summary


def _site_key(site: str) -> tuple[int, str]:
    layer = site_layer(site)
    return (layer if layer is not None else -1, site)


def to_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] = COLUMNS) -> str:
    """CSV text: numbers written with repr (round-trip exact), nulls as empty cells."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else _cell(row[c]) for c in columns])
    return buffer.getvalue()


def _cell(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)

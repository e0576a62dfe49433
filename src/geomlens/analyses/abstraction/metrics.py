"""The abstraction analysis's metrics: words, units, headlines and the guards a number passes
before it is read (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

import math
from typing import Any

from geomlens.analyses.spec import MetricSpec as M
from geomlens.analyses.spec import interval_ends
from geomlens.formatting import number


def _site_value(result: Any, key: str, name: str, metric: str) -> float:
    """``<site>.<metric>`` of the site of ``key`` (``<site>.<name>``), NaN when absent."""
    site = key[: -len(name) - 1] if key.endswith("." + name) else key.rpartition(".")[0]
    value = result.metrics.get(f"{site}.{metric}")
    return math.nan if value is None else float(value)


def alpha_above_null(result: Any, key: str) -> str | None:
    """α is read only where it is defined and above the 95th percentile of its label-shuffle
    null (where the result has one)."""
    alpha = _site_value(result, key, "alpha", "alpha")
    if math.isnan(alpha):
        return "not defined (a difference vector vanishes, or no task defines it)"
    p95 = _site_value(result, key, "alpha", "alpha_null_p95")
    if not math.isnan(p95) and alpha <= p95:
        return (
            f"{number(alpha)}, within its label-shuffle null (95th percentile {number(p95)}): "
            "no shared direction measured here"
        )
    return None


def corrected_defined(result: Any, key: str) -> str | None:
    """The corrected α needs two or more rows in every cell of some task."""
    value = _site_value(result, key, "alpha_corrected", "alpha_corrected")
    if math.isnan(value):
        return (
            "not defined (no task has two or more rows in every cell, or every such task's "
            "reliability is below 0.2: too low to correct)"
        )
    return None


#: The words of a corrected α past ±1 whose 95 % interval still holds ±1 (they begin so).
AT_THE_CEILING = "at a cosine's ceiling"


def corrected_a_cosine(result: Any, key: str) -> str | None:
    """The corrected α is a mean cosine divided by a reliability, so no cosine has a value past
    ±1; no such number is printed. When its 95 % interval still holds that end, the estimate is
    past it by noise in the correction: read as at the ceiling (the directions are as parallel
    as this data can tell), not as a number. When the interval lies wholly past it, the
    correction overshoots on these rows: not read."""
    value = _site_value(result, key, "alpha_corrected", "alpha_corrected")
    if not (math.isfinite(value) and abs(value) > 1.0):
        return None
    end = math.copysign(1.0, value)
    low = _site_value(result, key, "alpha_corrected", "alpha_corrected_ci_low")
    high = _site_value(result, key, "alpha_corrected", "alpha_corrected_ci_high")
    if math.isfinite(low) and math.isfinite(high) and low <= end <= high:
        which = "above 1" if end > 0 else "below −1"
        return (
            f"{AT_THE_CEILING} (the estimate lies {which}, where no cosine lies, but its 95 % "
            f"interval holds {number(end)}: the directions are as parallel as this data can tell)"
        )
    return (
        "not read: the estimate and its whole 95 % interval lie outside [−1, 1], where a "
        "cosine lies (the noise correction overshoots on these rows)"
    )


METRIC_SPECS: tuple[M, ...] = (
    M(
        "alpha_corrected",
        "abstraction α corrected for noise (independent of the rows per cell)",
        headline=True,
        guards=(corrected_defined, corrected_a_cosine),
    ),
    *interval_ends("alpha_corrected", headline=True),
    M(
        "alpha_corrected_reliability",
        "reliability of the directions (corrected α refused below 0.2)",
        headline=True,
    ),
    M(
        "alpha",
        "abstraction α (raw, at the set rows per concept value and context)",
        headline=True,
        guards=(alpha_above_null,),
    ),
    *interval_ends("alpha", headline=True),
    M("alpha_null_p95", headline=True),
    M("rows_per_cell", "rows per concept value and context", headline=True),
    M("alpha_null", "α with shuffled labels"),
)

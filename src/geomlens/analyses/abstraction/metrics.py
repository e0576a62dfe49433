"""The abstraction analysis's metrics: words, units, headlines and the guards a number passes
before it is read (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

import math
from typing import Any

from geomlens.analyses.spec import MetricSpec as M
from geomlens.analyses.spec import interval_ends
from geomlens.analyses.words.guards import a_cosine
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


def corrected_a_cosine(result: Any, key: str) -> str | None:
    """The corrected α is a mean cosine divided by a reliability: past ±1 it is read through
    :func:`~geomlens.analyses.words.guards.a_cosine` (at the ceiling, or not read)."""
    site = key[: -len(".alpha_corrected")] if key.endswith(".alpha_corrected") else None
    return a_cosine(result, f"{site}.alpha_corrected" if site else key)


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
        "abstraction α (raw: it grows with the rows averaged per concept value and context)",
        headline=True,
        guards=(alpha_above_null,),
    ),
    *interval_ends("alpha", headline=True),
    M("alpha_null_p95", headline=True),
    M("rows_per_cell", "rows per concept value and context", headline=True),
    M("alpha_null", "α with shuffled labels"),
)

"""Guards of the similarity and resolution metrics: a scale the stimulus grid does not resolve is
shown as what it is ("< d₁", beyond the range, a search bound), never as a number.

Each guard gets the result and the metric's key ``<site>.<name>`` (see
:data:`geomlens.analyses.spec.Guard`) and reads the companion metrics the analysis writes
beside the number: ``<key>_censored`` (−1 below the grid's first distance d₁, +1 beyond the
range searched or measured), ``<site>.first_distance``, ``<site>.max_distance`` and
``<site>.search_high``.
"""

from __future__ import annotations

import math
from typing import Any

from geomlens.formatting import distance_unit, number, quantity

#: Scales whose upper censoring is the fit's search bound (the others: the stimulus range).
SEARCHED = ("epsilon", "epsilon_fast")


def _site_metric(result: Any, key: str, name: str) -> float:
    site = key.rsplit(".", 1)[0]
    value = result.metrics.get(f"{site}.{name}")
    return math.nan if value is None else float(value)


def _censored(result: Any, key: str) -> float:
    value = result.metrics.get(f"{key}_censored")
    return math.nan if value is None else float(value)


def _grid(result: Any, key: str) -> str:
    """'a 1-year grid' / 'a grid of spacing 2': the grid the scale was measured on."""
    first = _site_metric(result, key, "first_distance")
    unit = distance_unit(result)
    if unit.endswith("s") and unit != "s":
        return f"a {number(first)}-{unit[:-1]} grid"
    return f"a grid of spacing {quantity(first, unit)}"


def unresolved_scale(result: Any, key: str) -> str | None:
    """ "< d₁ …: unresolved" for a scale below the grid's first distance, "> bound …" for one
    at the search bound or beyond the stimulus range; None for a resolved scale."""
    censored = _censored(result, key)
    if math.isnan(censored) or censored == 0:
        return None
    unit = distance_unit(result)
    if censored < 0:
        first = _site_metric(result, key, "first_distance")
        return f"< d₁ = {quantity(first, unit)} (unresolved on {_grid(result, key)})"
    name = key.rsplit(".", 1)[1].split("_ci_")[0]
    if name in SEARCHED:
        high = _site_metric(result, key, "search_high")
        return f"> {quantity(high, unit)} (the fit's search bound: unresolved)"
    largest = _site_metric(result, key, "max_distance")
    return f"> {quantity(largest, unit)} (beyond the stimulus range: unresolved)"


def bounded_ball(result: Any, key: str) -> str | None:
    """⟨b⟩ of an unresolved half-width: only its bound, "≤ b(d₁)" or "≥ b(largest d)"."""
    censored = _censored(result, key)
    if math.isnan(censored) or censored == 0:
        return None
    own = result.metrics.get(f"{key}_bound")  # a scale's own bound (mean_b_fast, _slow)
    bound = float(own) if own is not None else _site_metric(result, key, "mean_b_bound")
    if not math.isfinite(bound):
        return "unresolved (its half-width is not resolved, and no bound on ⟨b⟩ was measured)"
    if censored < 0:
        return f"≤ {number(bound)} (each ball holds its centre only: unresolved)"
    return f"≥ {number(bound)} (half-width beyond the stimulus range: unresolved)"


def floor_by_construction(result: Any, key: str) -> str | None:
    """Δ = 0 with the far level below 0 is 0 by construction (Δ = max(L, 0)), not a
    measured absence of noise: say so instead of "0 (interval 0 to 0)"."""
    value = result.metrics.get(key)
    offset = _site_metric(result, key, "offset")
    if value is None or not math.isfinite(float(value)) or float(value) > 0:
        return None
    if math.isfinite(offset) and offset < 0:
        return (
            f"0 by construction (the far level {number(offset)} is below 0, the centring "
            "offset; Δ = max(level, 0))"
        )
    return None


def few_pairs(minimum: int = 10) -> Any:
    """A guard: a bin mean from fewer than ``minimum`` pairs is shown with its count only."""

    def guard(result: Any, key: str) -> str | None:
        pairs = result.metrics.get(f"{key}_pairs")
        if pairs is None or not math.isfinite(float(pairs)) or pairs >= minimum:
            return None
        only = f"{int(pairs)} pair" + ("" if int(pairs) == 1 else "s")
        return f"not read: a mean over {only} only (fewer than {minimum})"

    return guard

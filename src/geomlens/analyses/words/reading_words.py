"""Words and helpers shared by the analyses' plain-words readings (each analysis folder's
``reading.py``). A reading is written from a result's public metric names only, never from an
analysis's internals, so it reads a result loaded back from JSON as well as a fresh one.

One path from a number to a sentence: a reading writes a measured number only through its
metric (:func:`metric_value`, :func:`metric_interval`) or through a derived quantity declared
with its own spec (:func:`derived_value`: a share, a difference, a mean over a table's rows),
so every number passes its spec's units, digits and guards. Counts of things (rows, sets) are
written by :func:`count`. This module does not export the bare number formatters, and the
contract's ``reading-through-metrics`` check (:mod:`geomlens.testing`) fails a reading, a
built-in's or a plugin's, that imports one or formats a number itself."""

from __future__ import annotations

import math
from collections.abc import Mapping

from geomlens.analyses.spec import MetricSpec
from geomlens.analyses.words.guards import within
from geomlens.analyses.words.metric_words import (
    derived_value,
    metric_interval,
    metric_refused,
    metric_value,
)
from geomlens.formatting import human_name, layer_label, percent
from geomlens.results import Result

__all__ = [
    "SHARE_OF_FIRST_DROP", "across_texts_words", "as_words", "count", "derived_value",
    "direction", "extremes", "human_name", "layer_label", "mean_of", "metric_interval",
    "metric_refused", "metric_value", "missing", "per_site", "ranked", "regimes_spanned",
    "site_row",
]  # fmt: skip


def count(amount: float | None, noun: str, plural: str | None = None) -> str:
    """A count of things (``12 rows``, ``1 set``): a whole number with the noun in its number;
    ``noun=""``: the number alone ("2" in "rises in 2 and falls in 1 of 3 sets"). Not for
    measurements, which go through their metric (:func:`metric_value`); a count that is not a
    whole number is a mistake in the reading and raises."""
    if amount is None or (isinstance(amount, float) and math.isnan(amount)):
        return f"an unknown number of {plural or noun + 's'}" if noun else "an unknown number"
    if float(amount) != round(float(amount)):
        raise ValueError(f"count({amount!r}, {noun!r}): a count is a whole number")
    whole = int(round(float(amount)))
    if not noun:
        return f"{whole:,}"
    return f"{whole:,} {noun if whole == 1 else plural or noun + 's'}"


#: The share of g's first drop (1 − g(d₁)) that a change of text alone accounts for: a derived
#: quantity with its own spec, so a value outside [0, 1] is refused, never printed as a share.
SHARE_OF_FIRST_DROP = MetricSpec(
    "text_share_of_first_drop",
    "share of the first drop the text alone accounts for",
    format=lambda value: percent(value, 2),
    guards=(within(0.0, 1.0, "a share"),),
)


def per_site(result: Result, metric: str) -> dict[str, float]:
    """``{site: value}`` of the metrics named ``<site>.<metric>``, in the result's order."""
    suffix = "." + metric
    return {
        key[: -len(suffix)]: value for key, value in result.metrics.items() if key.endswith(suffix)
    }


def extremes(values: dict[str, float]) -> tuple[str, str]:
    finite = {k: v for k, v in values.items() if not math.isnan(v)}
    if not finite:
        return "", ""
    return max(finite, key=finite.__getitem__), min(finite, key=finite.__getitem__)


def missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def across_texts_words(
    result: Result, site: str, nearest: float, sources: tuple[str, ...] = ()
) -> str:
    """What g at d = 0 across texts (``<site>.g0_across_texts``) says about the first drop of
    g to ``nearest``: the text's share of that drop, through :data:`SHARE_OF_FIRST_DROP`'s
    guards and those of ``sources`` (the metrics ``nearest`` comes from)."""
    across_key = f"{site}.g0_across_texts"
    across = float(result.metrics.get(across_key, math.nan))
    drop = 1.0 - nearest
    said = (
        f"The same stimulus in another text has similarity {metric_value(result, across_key)} "
        "(d = 0 across texts, against 1 on the diagonal)"
    )
    if missing(across) or missing(nearest) or drop <= 0:
        return f"{said}; g does not drop by the nearest distance, so no share of it is read."
    share = (1.0 - across) / drop
    shown = derived_value(
        result,
        f"{site}.{SHARE_OF_FIRST_DROP.name}",
        share,
        SHARE_OF_FIRST_DROP,
        (across_key, *sources),
    )
    if shown.startswith(("not read", "measurement failure")):
        return (
            f"{said}: less alike than two stimuli at the nearest distance in one text, so the "
            f"text's part of the drop is not a share of it ({shown})."
        )
    return f"{said}: the text alone accounts for about {shown} of the drop to the nearest distance."


def as_words(shown: str) -> str:
    """A metric as :func:`~geomlens.analyses.words.metric_words.metric_value` shows it, to
    follow "is": a guard's bound "< d₁ = 1 year (…)" reads "below d₁ = 1 year (…)", so no
    sentence writes "= <"."""
    for sign, words in (("<", "below"), (">", "above"), ("≤", "at most"), ("≥", "at least")):
        if shown.startswith(sign):
            return f"{words} {shown[len(sign) :].lstrip()}"
    return shown


def ranked(values: Mapping[str, float], intervals: Mapping[str, tuple[float, float]]) -> str:
    """The site whose value is highest when its 95 % interval lies wholly above every other
    site's interval; "" when the intervals overlap (no site may be named as the highest)."""
    top, _ = extremes(dict(values))
    if not top or top not in intervals:
        return ""
    low = intervals[top][0]
    others = [hi for site, (_, hi) in intervals.items() if site != top and not missing(hi)]
    if missing(low) or any(low <= high for high in others):
        return ""
    return top


def site_row(result: Result, site: str) -> dict:
    """The ``sites`` table's row of ``site`` (which tasks its means average), or {}."""
    return next((r for r in result.tables.get("sites", []) if r.get("site") == site), {})


def direction(low: float | None, high: float | None, what: str) -> str:
    """How sure a stated direction is, from its interval."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return f"with no interval, so the direction of {what} is not established"
    if low > 0 or high < 0:
        return f"the interval excludes 0, so {what} is resolved at this level"
    return f"the interval includes 0, so the direction of {what} is not resolved"


def mean_of(rows: list[dict], column: str) -> float:
    values = [r[column] for r in rows if isinstance(r.get(column), (int, float))]
    values = [v for v in values if not math.isnan(v)]
    return sum(values) / len(values) if values else math.nan


def regimes_spanned(low: float | None, high: float | None) -> list[str]:
    """The resolution regimes (identification, trade-off, interference) a ⟨b⟩ interval
    reaches: one when a regime may be named, more when it may not, none without an interval."""
    from geomlens.theory.resolution import regime

    if low is None or high is None or missing(low) or missing(high):
        return []
    return list(dict.fromkeys([str(regime(low)), str(regime(high))]))

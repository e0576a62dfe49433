"""Words and helpers shared by the analyses' plain-words readings (each analysis folder's
``reading.py``). A reading is written from a result's public metric names only, never from an
analysis's internals, so it reads a result loaded back from JSON as well as a fresh one."""

from __future__ import annotations

import math

from geomlens.formatting import human_name, layer_label, number, percent
from geomlens.results import Result

__all__ = [
    "across_texts_words", "direction", "extremes", "human_name", "interval", "layer_label", "mean_of",
    "missing", "number", "per_site", "percent", "share_percent", "site_row",
]  # fmt: skip


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


def across_texts_words(across: float, nearest: float) -> str:
    """What g at d = 0 across texts says about the first drop of g."""
    drop = 1.0 - nearest
    share = (1.0 - across) / drop if drop > 0 else math.nan
    return (
        f"The same stimulus in another text has similarity {number(across)} (d = 0 across "
        f"texts, against 1 on the diagonal): the text alone accounts for about "
        f"{number(100 * share, 2)} % of the drop to the nearest distance."
    )


def share_percent(share: float) -> str:
    return "undefined" if missing(share) else f"{100 * share:.0f} %"


def site_row(result: Result, site: str) -> dict:
    """The ``sites`` table's row of ``site`` (which tasks its means average), or {}."""
    return next((r for r in result.tables.get("sites", []) if r.get("site") == site), {})


def interval(low: float | None, high: float | None) -> str:
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return "no interval"
    return f"95 % interval {number(low)} to {number(high)}"


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

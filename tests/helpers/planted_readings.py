"""A reading that writes its number around the metric's guards, planted for the contract's
``reading-through-metrics`` check (a module of its own: the check reads the module's imports)."""

from __future__ import annotations

from geomlens.formatting import number
from geomlens.results import Result


def formats_its_own_number(result: Result) -> list[str]:
    return [f"The mean norm is {number(result.metrics['mean_norm'])}."]

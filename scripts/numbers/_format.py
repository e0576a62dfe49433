"""Shared formatting of quoted numbers (a module starting with '_' registers no sections)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def finite(value: Any) -> bool:
    """A number (NaN is written as null in JSON)."""
    return isinstance(value, (int, float)) and math.isfinite(value)


def fmt(value: Any, digits: int = 2, *, integer: bool = False) -> str:
    """A number as quoted in the docs ('—' for a missing one)."""
    if not finite(value):
        return "—"
    text = f"{value:,.0f}" if integer else f"{value:.{digits}f}"
    return text.replace("-", "−")  # a typographic minus


def sig(value: Any, figures: int = 2) -> str:
    """A number to ``figures`` significant figures ('0.0043', '0.12', '1.5', '150'): for an
    error, whose size sets the precision it is worth quoting at ('—' for a missing one)."""
    if not finite(value):
        return "—"
    if value == 0:
        return "0"
    digits = figures - 1 - math.floor(math.log10(abs(value)))
    rounded = round(value, digits)
    # Rounding can carry into another decade (0.0996 → 0.10): count the figures again.
    if rounded != 0:
        digits = figures - 1 - math.floor(math.log10(abs(rounded)))
    text = f"{rounded:.{max(digits, 0)}f}"
    return text.replace("-", "−")


def span(values: Iterable[Any], digits: int = 2, *, integer: bool = False) -> str:
    """'low–high' of the finite values (one value if they agree at the shown precision)."""
    kept = [v for v in values if finite(v)]
    if not kept:
        return "—"
    low, high = fmt(min(kept), digits, integer=integer), fmt(max(kept), digits, integer=integer)
    if low == high:
        return low
    # "−0.21 to −0.19" reads better than "−0.21–−0.19".
    return f"{low} to {high}" if min(kept) < 0 else f"{low}–{high}"


def table(header: list[str], rows: Iterable[list[str]]) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)

"""The stimulus range a site's numbers hold for, as the metrics every headline names.

Stimuli on a line (one number each, or a list of one) report ``<site>.coordinate_low`` and
``<site>.coordinate_high`` (see :data:`geomlens.analyses.words.metric_words.RANGE_METRICS`):
g(d), and every scale read from it, belong to that range. Points in a plane or beyond have no
such range and report none."""

from __future__ import annotations

from typing import Any

import numpy as np

from geomlens.analyses.words.metric_words import RANGE_METRICS

__all__ = ["range_metrics"]


def range_metrics(site: str, coordinates: Any) -> dict[str, float]:
    """``{<site>.coordinate_low: …, <site>.coordinate_high: …}`` of ``coordinates`` on a line;
    empty for coordinates that are not on a line."""
    try:
        x = np.asarray(coordinates, dtype=float)
    except (TypeError, ValueError):  # ragged or not numbers: no range on a line
        return {}
    if x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    if x.ndim != 1 or x.size == 0:
        return {}
    low, high = RANGE_METRICS
    return {f"{site}.{low}": float(x.min()), f"{site}.{high}": float(x.max())}

"""The similarity analysis's metrics: words, units, headlines (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

from geomlens.analyses.spec import MetricSpec as M

METRIC_SPECS: tuple[M, ...] = (
    M("g_nearest", "g at the nearest distance", headline=True),
    M("g_farthest", "g at the farthest distance", headline=True),
    M("zero_crossing", "first distance where g < 0", "distance", headline=True),
)

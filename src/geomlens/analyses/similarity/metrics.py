"""The similarity analysis's metrics: words, units, headlines (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

from geomlens.analyses.scale_guards import few_pairs
from geomlens.analyses.spec import MetricSpec as M

#: A bin mean from fewer pairs than this is shown with its count, not read.
MIN_PAIRS = 10

METRIC_SPECS: tuple[M, ...] = (
    M("g_nearest", "g at the nearest distance", headline=True, guards=(few_pairs(MIN_PAIRS),)),
    M("g_farthest", "g at the farthest distance", headline=True, guards=(few_pairs(MIN_PAIRS),)),
    M("zero_crossing", "first distance where g < 0", "distance", headline=True),
)

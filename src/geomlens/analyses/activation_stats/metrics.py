"""The activation-stats analysis's metrics: words, units, headlines (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

from geomlens.analyses.spec import MetricSpec as M

METRIC_SPECS: tuple[M, ...] = (
    M("mean_norm", "mean token norm", headline=True),
    M("mean_variance", "mean variance per dimension", headline=True),
    M("dead_fraction", "share of never-positive dimensions", headline=True),
    M("rows", "rows", "rows"),
)

"""The activation-stats analysis's metrics: words, units, headlines (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

from geomlens.analyses.spec import MetricSpec as M
from geomlens.analyses.words.guards import within
from geomlens.formatting import number, percent

METRIC_SPECS: tuple[M, ...] = (
    M("mean_norm", "mean token norm", headline=True),
    M("mean_variance", "mean variance per dimension", headline=True),
    M(
        "dead_fraction",
        "share of never-positive dimensions",
        headline=True,
        format=percent,
        guards=(within(0.0, 1.0, "a share"),),
    ),
    M("rows", "rows", "rows"),
)

#: The last site's mean token norm over the first's, a ratio the reading derives.
NORM_GROWTH = M(
    "norm_growth",
    "growth of the mean token norm from the first site to the last",
    format=lambda value: f"a factor of {number(value)}",
)

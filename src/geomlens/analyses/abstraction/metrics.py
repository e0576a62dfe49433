"""The abstraction analysis's metrics: words, units, headlines (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

from geomlens.analyses.spec import MetricSpec as M

METRIC_SPECS: tuple[M, ...] = (
    M("alpha", "abstraction α", headline=True),
    M("alpha_ci_low", headline=True),
    M("alpha_ci_high", headline=True),
    M("alpha_null_p95", headline=True),
    M("alpha_null", "α with shuffled labels"),
)

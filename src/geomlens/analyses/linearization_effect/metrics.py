"""The linearization-effect analysis's metrics: words, units, headlines (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

from geomlens.analyses.spec import MetricSpec as M

METRIC_SPECS: tuple[M, ...] = (
    M("alpha_base", headline=True),
    M("alpha_linearized", headline=True),
    M("ccgp_base", headline=True),
    M("ccgp_linearized", headline=True),
    M("alpha", "abstraction α"),
    M("ccgp", "CCGP"),
)

"""The ccgp analysis's metrics: words, units, headlines (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

from geomlens.analyses.spec import MetricSpec as M

METRIC_SPECS: tuple[M, ...] = (
    M("ccgp", "CCGP", headline=True),
    M("ccgp_within_tasks", "CCGP over the tasks with a within-context accuracy", headline=True),
    M("within_context_accuracy", "within-context accuracy", headline=True),
)

"""The resolution analysis's metrics: words, units, headlines (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

from geomlens.analyses.guards import profile_grid, profile_span, resolved_scale
from geomlens.analyses.spec import MetricSpec as M
from geomlens.formatting import distance_unit

#: A scale is read only inside the measured g(d)'s span and at or above its grid spacing.
_SCALE = (resolved_scale(0.0, profile_span, profile_grid, unit=distance_unit),)

METRIC_SPECS: tuple[M, ...] = (
    M("epsilon", "resolution scale ε", "distance", headline=True, guards=_SCALE),
    M("epsilon_ci_low", "ε, 95 % interval low", "distance", headline=True),
    M("epsilon_ci_high", "ε, 95 % interval high", "distance", headline=True),
    M("delta", "noise floor Δ", headline=True),
    M("delta_ci_low", "Δ, 95 % interval low"),
    M("delta_ci_high", "Δ, 95 % interval high"),
    M("p_similarity", "similarity accuracy p_S", headline=True),
    M("p_identification", "identification accuracy p_I", headline=True),
    M("front_distance", "distance to the universal front", headline=True),
    M("half_width", "half width", "distance", guards=_SCALE),
    M("zero_crossing", "first distance where g < 0", "distance"),
)

"""The ccgp analysis's metrics: words, units, headlines (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

from geomlens.analyses.spec import MetricSpec as M
from geomlens.analyses.words.guards import probe_at_chance, within

#: A CCGP within the range coin flips reach on the same test rows is at chance, not a finding.
AT_CHANCE = probe_at_chance()

METRIC_SPECS: tuple[M, ...] = (
    M("ccgp", "CCGP", headline=True, guards=(AT_CHANCE,)),
    M("ccgp_within_tasks", "CCGP over the tasks with a within-context accuracy", headline=True),
    M("within_context_accuracy", "within-context accuracy", headline=True),
)

#: Means the reading takes over the concept sets with one row per value and context (which have
#: no within-context accuracy): derived quantities, written through their own specs.
ONE_ROW_SETS: dict[str, M] = {
    column: M(
        f"{column}_one_row_sets",
        f"{words}, the mean over the sets with one row per value and context",
        guards=(within(0.0, 1.0, "an accuracy"),),
    )
    for column, words in (("ccgp", "CCGP"), ("mixed_context_accuracy", "mixed-context accuracy"))
}

"""The similarity analysis's metrics: words, units, headlines (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

from geomlens.analyses.spec import MetricSpec as M
from geomlens.analyses.words.guards import at_chance
from geomlens.analyses.words.scale_guards import few_pairs
from geomlens.formatting import coordinate

#: A bin mean from fewer pairs than this is shown with its count, not read.
MIN_PAIRS = 10

#: The behavioural mode's choice accuracies with two candidates (chance 1/2; ``p_similarity``
#: and ``p_identification`` are the n = 2 ones, whose intervals are ``*_n2_ci_*``) and four
#: (chance 1/4): read only when the interval lies above chance (the analysis's own
#: ``above_chance``), else "at chance".
AT_CHANCE_N2 = at_chance(0.5, low="_n2_ci_low", high="_n2_ci_high", above=True)


def _choice_accuracy(test: str, n: int) -> M:
    """``p_<test>_n<n>``, the accuracy of the choice test with ``n`` candidates: read only when
    its interval lies above chance, 1/n."""
    return M(
        f"p_{test}_n{n}",
        f"{test} accuracy (choices, {n} candidates)",
        guards=(at_chance(1 / n, above=True),),
    )


#: The lowest and highest stimulus coordinate of a site (stimuli on a line): the range its
#: numbers hold for, which every headline names (see
#: :data:`geomlens.analyses.words.metric_words.RANGE_METRICS`). resolution reports them too.
RANGE_SPECS = (
    M("coordinate_low", "lowest stimulus coordinate (the range's low end)", format=coordinate),
    M("coordinate_high", "highest stimulus coordinate (the range's high end)", format=coordinate),
)

METRIC_SPECS: tuple[M, ...] = (
    M("g_nearest", "g at the nearest distance", headline=True, guards=(few_pairs(MIN_PAIRS),)),
    M("g_farthest", "g at the farthest distance", headline=True, guards=(few_pairs(MIN_PAIRS),)),
    M("zero_crossing", "first distance where g < 0", "distance", headline=True),
    M("stimuli", "stimuli", "stimuli"),
    M("p_similarity", "similarity accuracy p_S (choices, 2 candidates)", guards=(AT_CHANCE_N2,)),
    M(
        "p_identification",
        "identification accuracy p_I (choices, 2 candidates)",
        guards=(AT_CHANCE_N2,),
    ),
    *(_choice_accuracy(test, n) for n in (2, 4) for test in ("similarity", "identification")),
    *RANGE_SPECS,
)

#: The nearest and farthest distance g(d) is measured at (from the ``g_of_d`` table): derived
#: quantities the reading writes in the stimuli's unit.
MEASURED_DISTANCE = {
    end: M(f"{end}_distance", f"the {end} distance g is measured at", "distance")
    for end in ("nearest", "farthest")
}

"""The resolution analysis's metrics: words, units, headlines (see :class:`~geomlens.analyses.spec.MetricSpec`).

Every scale carries the guard that shows it as "< d₁" (below the grid's first distance),
a search bound or beyond the stimulus range instead of a number (see :mod:`geomlens.analyses.words.scale_guards`)."""

from __future__ import annotations

from typing import Any

from geomlens.analyses.similarity.metrics import RANGE_SPECS
from geomlens.analyses.spec import MetricSpec as M
from geomlens.analyses.spec import interval_ends
from geomlens.analyses.words.guards import at_chance, resolved_scale, within
from geomlens.analyses.words.metric_words import stimulus_range
from geomlens.analyses.words.scale_guards import (
    bounded_ball,
    floor_by_construction,
    unresolved_scale,
)
from geomlens.formatting import distance_unit, number, percent

#: A censored scale reads "< d₁ …" or "> bound …"; an uncensored one (a fitted ε may lie anywhere
#: up to the search bound, 4 × the largest distance) is refused outside the stimuli's distances
#: (0 to the largest) or below the grid's first distance: "unresolved" with the range.
_IN_RANGE = resolved_scale(0.0, "max_distance", "first_distance", unit=distance_unit)


def _in_range(result: Any, key: str) -> str | None:
    """:func:`resolved_scale` for a scale the result holds (NaN, no fit: "unresolved" with the
    range); a key the result does not hold stays missing."""
    if key not in result.metrics:
        return None
    return _IN_RANGE(result, key)


SCALE = (unresolved_scale, _in_range)


def _interval_resolved(result: Any, key: str) -> str | None:
    """A scale whose 95 % interval has an end the guards refuse (below the grid, beyond the
    range, at the search bound) is itself unresolved: the point alone would read as a finding
    that the resampling does not support."""
    if key not in result.metrics:
        return None
    for end in ("_ci_low", "_ci_high"):
        if key + end not in result.metrics:
            continue
        if any(guard(result, key + end) is not None for guard in SCALE):
            return "unresolved (an end of its 95 % interval is not resolved on these stimuli)"
    return None


def valley_range(result: Any, key: str) -> str | None:
    """The theory's p_S or p_I where its AIC valley is flat (the fits within ΔAIC 2 of the
    best move it by as much as its bootstrap interval, or by the printed 0.001): the range
    over those fits, not a point the optimiser picked within it."""
    site = key.rsplit(".", 1)[0]
    if result.metrics.get(f"{site}.p_theory_from_valley") != 1:
        return None
    low, high = result.metrics.get(f"{key}_low"), result.metrics.get(f"{key}_high")
    return f"{low:.3f} to {high:.3f} (every fit within ΔAIC 2 of the best: a flat valley, no point)"


def grows_with_range(result: Any, key: str) -> str | None:
    """``scale_depends_on_range`` = 1, read as what it means for every scale of the site: no
    single scale over the range measured (the half-width is that range's, not the model's
    resolution)."""
    if result.metrics.get(key) != 1:
        return None
    site = key.rsplit(".", 1)[0]
    return f"grows with the range: no single scale over {stimulus_range(result, site) or 'these stimuli'}"


def _same_scale(value: float) -> str:
    """``scale_depends_on_range`` = 0 in words (1 is :func:`grows_with_range`'s)."""
    return (
        "no: the central half and quarter of the range give the same"
        if value == 0
        else number(value)
    )


#: (p_S, p_I) of two candidates: chance is 1/2, read within ± 1.96 standard errors (``_se``) or,
#: for an exact enumeration (no sampling error, but a finite stimulus set), within ± 0.01.
AT_HALF = at_chance(0.5, tolerance=0.01)


def _form_at_chance(result: Any, key: str) -> str | None:
    """The half-width of one similarity form (``raw_`` / ``centred_``) inherits the verdict of
    that form's tests: when p_S and p_I are both at chance, g measures nothing to halve."""
    site, _, name = key.rpartition(".")
    form = name.split("_", 1)[0]
    if (
        all(
            AT_HALF(result, f"{site}.{form}_{test}") is not None
            for test in ("p_similarity", "p_identification")
        )
        and f"{site}.{form}_p_similarity" in result.metrics
    ):
        return "at chance: this similarity's tests measure nothing, so its half-width is not read"
    return None


#: A scale with an interval: its own guards, then its interval's.
SCALE_WITH_INTERVAL = (*SCALE, _interval_resolved)

METRIC_SPECS: tuple[M, ...] = (
    M("first_distance", "first distance d₁ (the grid's spacing)", "distance", headline=True),
    M("g_first", "g at the first distance d₁", headline=True),
    M("amplitude", "drop by the first distance, 1 − g(d₁)", headline=True),
    M("half_width", "half-width of the measured g", "distance", headline=True, guards=SCALE),
    *interval_ends("half_width", "half-width", "distance", guards=SCALE),
    M("epsilon", "resolution scale ε", "distance", headline=True, guards=SCALE_WITH_INTERVAL),
    *interval_ends("epsilon", "ε", "distance", headline=True, guards=SCALE),
    M("epsilon_fast", "fast scale ε_fast", "distance", guards=SCALE),
    M("delta", "noise floor Δ", headline=True, guards=(floor_by_construction,)),
    *interval_ends("delta", "Δ", guards=(floor_by_construction,)),
    M("mean_b", "mean ball ⟨b⟩ at the half-width", headline=True, guards=(bounded_ball,)),
    M("mean_b_grid_step", "change of ⟨b⟩ for one grid step of the half-width"),
    M("mean_b_fast", "⟨b⟩ at the fast scale", guards=(bounded_ball,)),
    M("mean_b_slow", "⟨b⟩ at the slow scale", guards=(bounded_ball,)),
    M("p_similarity", "similarity accuracy p_S", headline=True, guards=(AT_HALF,)),
    M("p_identification", "identification accuracy p_I", headline=True, guards=(AT_HALF,)),
    M("raw_p_similarity", "p_S, raw cosine", guards=(AT_HALF,)),
    M("raw_p_identification", "p_I, raw cosine", guards=(AT_HALF,)),
    M("centred_p_similarity", "p_S, centred cosine", guards=(AT_HALF,)),
    M("centred_p_identification", "p_I, centred cosine", guards=(AT_HALF,)),
    M(
        "p_similarity_theory",
        "p_S of the fitted g (the range over fits within ΔAIC 2 where that valley is flat)",
        guards=(valley_range,),
    ),
    M(
        "p_identification_theory",
        "p_I of the fitted g (the range over fits within ΔAIC 2 where that valley is flat)",
        guards=(valley_range,),
    ),
    *(
        M(f"p_{test}_theory_{end}", f"{symbol} of the fitted g, {word} over fits within ΔAIC 2")
        for test, symbol in (("similarity", "p_S"), ("identification", "p_I"))
        for end, word in (("low", "lowest"), ("high", "highest"))
    ),
    M("front_distance", "distance to the universal front", headline=True),
    M(
        "raw_half_width",
        "half-width, raw cosine",
        "distance",
        headline=True,
        guards=(_form_at_chance, *SCALE),
    ),
    M(
        "centred_half_width",
        "half-width, centred cosine",
        "distance",
        headline=True,
        guards=(_form_at_chance, *SCALE),
    ),
    M("raw_g_first", "g(d₁), raw cosine"),
    M("centred_g_first", "g(d₁), centred cosine"),
    M("zero_crossing", "first distance where g < 0", "distance"),
    M(
        "scale_depends_on_range",
        "whether the scale depends on the stimulus range",
        headline=True,
        format=_same_scale,
        guards=(grows_with_range,),
        caveat=True,
    ),
    *RANGE_SPECS,
)


#: Quantities the reading derives (each written through its own spec, as a metric is): the
#: Monte-Carlo error of an interval end, how far the fitted far level sits below zero, and a
#: central sub-range's half-width (its guards are the sub-range's, not the whole range's).
MONTE_CARLO_ERROR = M(
    "monte_carlo_error",
    "Monte-Carlo error of an interval end",
    format=lambda value: f"± {number(value, 2)}",
)
BELOW_ZERO = M("offset_below_zero", "depth of the fitted far level below zero")
SUB_RANGE_HALF_WIDTH = M("sub_range_half_width", "half-width over a central sub-range", "distance")

#: Shares the reading writes as whole percentages, refused outside [0, 1] (never over 100 %).
AS_SHARE = {
    name: M(
        name, words, format=lambda value: percent(value, 2), guards=(within(0.0, 1.0, "a share"),)
    )
    for name, words in (
        ("fast_share", "share of the fall on the fast scale"),
        ("regime_agreement", "share of bootstrap resamples that read the same regime"),
    )
}

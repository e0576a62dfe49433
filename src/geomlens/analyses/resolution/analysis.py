"""resolution: a model's resolution scale ε and its place on the theory's (p_S, p_I) front.

Built on ``similarity`` (same state, same one pass over every site). The measured g(d) is
fitted with its own g(0) = 1 (a stimulus with itself; no free amplitude divides out the
first drop) by step, linear, exponential and Gaussian families, a two-scale family (a sharp
first drop and a slow tail) and a flat one (no resolution): see
:mod:`geomlens.analyses.resolution.profile_fits`. The lowest AIC wins; ε, the half-width (where g is
halfway from 1 to its far level, the same point of every family's curve), Δ (a noise floor in
[0, 1]) and the centring offset get percentile bootstrap intervals over stimuli. Beside them:
the measured similarity lost within the first bin (``amplitude``) and g at d = 0 across
different texts of the same stimulus (``g0_across_texts``).

⟨b⟩ and Var(b) are the ball measures at the half-width, and the regime is read from ⟨b⟩
(with the share of bootstrap resamples that agree). The fitted g and the measured similarity
matrix (negative similarities set to 0, as a ReLU does, so that the Luce rule applies) give
the theory's and the empirical (p_S, p_I) through :func:`geomlens.theory.finite_sets.evaluate`,
with its method (exact or Monte Carlo), trials and standard errors recorded; the empirical
point's distance to the universal front is reported. Every number describes the model, the
stimulus range and the centring together (table ``scale_depends_on``). See docs/similarity.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from geomlens import progress
from geomlens.analyses.resolution.profile_fits import (
    FAMILIES,
    HALF_WIDTH,
    Fit,
    chosen_fit,
    family_shape,
    fit_binned,
    fit_family,
    fitted_g,
    measured_half_width,
    profile_valley,
)
from geomlens.analyses.resolution.range_check import Scales, range_dependence
from geomlens.analyses.similarity.analysis import (
    Similarity,
    SiteSimilarity,
    across_text_metrics,
    binned_pairs,
    distance_bins,
    g_of_d,
    plot_profiles,
)
from geomlens.analyses.similarity.stimulus_range import range_metrics
from geomlens.analyses.words.metric_words import shared_stimulus_range
from geomlens.formatting import coordinate, distance_unit
from geomlens.results import Result
from geomlens.theory import resolution as theory
from geomlens.theory.balls import finite_ball
from geomlens.theory.finite_sets import evaluate

__all__ = [
    "FAMILIES",
    "HALF_WIDTH",
    "Fit",
    "Resolution",
    "ResolutionConfig",
    "bootstrap_fits",
    "family_shape",
    "fit_family",
    "fit_profile",
    "fitted_g",
    "normalised_g",
]

# Noise levels whose fronts (Theorem 2) are drawn beside the universal one: the same in every
# figure of the (p_S, p_I) plane.
from . import DECLARATION
from .config import ResolutionConfig

NOISE_CURVES = theory.NOISE_CURVES
# What the scale describes: a sentence every result carries (table ``scale_depends_on``).
SCALE_NOTE = (
    "ε, the half-width, Δ and the offset describe this model with this stimulus range and this "
    "similarity (centring) together: centring subtracts the mean of these stimuli, so another "
    "range or another centre gives another curve and other numbers."
)


def normalised_g(family: str, epsilon: float, delta: float) -> Callable[[np.ndarray], np.ndarray]:
    """Deprecated (kept for one release): g = (1 − Δ) shape(d/ε) + Δ; use ``Fit.g()`` or
    :func:`geomlens.analyses.resolution.profile_fits.fitted_g`, which also take the two-scale family."""
    warnings.warn(
        "resolution.normalised_g is deprecated; use Fit.g() or profile_fits.fitted_g",
        DeprecationWarning,
        stacklevel=2,
    )
    return fitted_g(family, epsilon, delta)


def fit_profile(
    distances: np.ndarray, similarity: np.ndarray, edges: np.ndarray, pairs: tuple | None = None
) -> list[Fit]:
    """Every family fitted to the pairs' similarity, binned by ``edges``, with g(0) = 1."""
    return fit_binned(*binned_pairs(distances, similarity, edges, pairs))


#: Bootstrap refits whose theory (p_S, p_I) is computed for its interval (each costs one
#: evaluation of the Luce accuracies: N³ trials).
THEORY_RESAMPLES = 40


@dataclass(frozen=True)
class Resampled:
    """The chosen family refitted on resampled stimuli: one entry per resample.

    ``epsilon`` is +inf where the refit's scale sat at the top of its search grid (a bound,
    not an estimate); ``half_width`` is the measured curve's (−inf: below the resample's first
    distance, +inf: not halfway within the range); NaN where the refit failed or found no scale.
    """

    epsilon: np.ndarray
    delta: np.ndarray
    offset: np.ndarray
    half_width: np.ndarray
    #: The first :data:`THEORY_RESAMPLES` refits themselves (for the theory's interval).
    fits: tuple[Fit, ...] = ()


def bootstrap_fits(
    measured: SiteSimilarity, family: str, edges: np.ndarray, samples: int, seed: int
) -> Resampled:
    """``family`` refitted on stimuli resampled with replacement (NaN where g does not fall).

    A resampled stimulus drawn twice contributes no pair with itself (its distance 0 says
    nothing about g away from 0; the anchor g(0) = 1 holds in every resample).
    """
    rng = np.random.default_rng(seed)
    size = len(measured.coordinates)
    out = np.full((samples, 4), np.nan)
    kept: list[Fit] = []
    rows, cols = np.triu_indices(size, k=1)
    for k in range(samples):
        drawn = np.sort(rng.integers(size, size=size))
        drawn_rows, drawn_cols = drawn[rows], drawn[cols]
        different = drawn_rows != drawn_cols
        try:
            mean_d, mean_s, squares, count = binned_pairs(
                measured.distances,
                measured.similarity,
                edges,
                (drawn_rows[different], drawn_cols[different]),
            )
            fit = fit_family(family, mean_d, mean_s, count, 0.0)
        except ValueError:
            continue
        if np.isfinite(fit.epsilon):
            epsilon = np.inf if fit.at_bound == "high" else fit.epsilon
            width = measured_half_width(mean_d[count > 0], mean_s[count > 0], fit.level)
            out[k] = epsilon, fit.delta, fit.offset, width
            if len(kept) < THEORY_RESAMPLES:
                kept.append(fit)
    epsilons, deltas, offsets, widths = out.T
    return Resampled(epsilons, deltas, offsets, widths, fits=tuple(kept))


@dataclass(frozen=True)
class Interval:
    """A percentile interval whose ends may be censored, with each end's Monte-Carlo error.

    An end is NaN with ``censored`` −1 when it lies below the grid's first distance (read
    "< d₁"), +1 when beyond the range searched or measured; ``mc`` is the Monte-Carlo
    standard error of each finite end (from the order statistics around its rank)."""

    low: float
    high: float
    low_censored: float
    high_censored: float
    low_mc: float
    high_mc: float


def _order_error(ordered: np.ndarray, q: float) -> float:
    """Monte-Carlo standard error of the q-quantile of ``ordered`` (sorted resamples): half
    the distance between the order statistics one binomial standard deviation either side of
    its rank (NaN when either is infinite or there are too few resamples)."""
    n = len(ordered)
    spread = np.sqrt(n * q * (1 - q))
    low = int(np.clip(np.floor(n * q - spread), 0, n - 1))
    high = int(np.clip(np.ceil(n * q + spread), 0, n - 1))
    if not (np.isfinite(ordered[high]) and np.isfinite(ordered[low])) or n < 20:
        return float("nan")
    return float((ordered[high] - ordered[low]) / 2)


def _interval(values: np.ndarray, confidence: float, first: float = -np.inf) -> Interval:
    """Percentile interval of the resampled values: NaN resamples are left out, values below
    ``first`` (the grid's first distance) count as censored below, +inf as censored above."""
    kept = np.asarray(values, dtype=float)
    kept = kept[~np.isnan(kept)]
    nan = float("nan")
    if not len(kept):
        return Interval(nan, nan, nan, nan, nan, nan)
    kept = np.sort(np.where(kept < first, -np.inf, kept))
    tail = (1 - confidence) / 2
    ends = np.quantile(kept, [tail, 1 - tail], method="inverted_cdf")
    censored = [float(np.sign(e)) if np.isinf(e) else 0.0 for e in ends]
    low, high = (float(e) if np.isfinite(e) else nan for e in ends)
    return Interval(
        low,
        high,
        censored[0],
        censored[1],
        _order_error(kept, tail),
        _order_error(kept, 1 - tail),
    )


def censor(value: float, first: float) -> tuple[float, float]:
    """(value, censored): a scale below ``first`` (d₁) or ±inf is NaN with −1 / +1."""
    if np.isnan(value):
        return float("nan"), float("nan")
    if value < first:
        return float("nan"), -1.0
    if np.isinf(value):
        return float("nan"), 1.0
    return float(value), 0.0


def _scale(metrics: dict[str, float], key: str, value: float, first: float) -> None:
    metrics[key], metrics[f"{key}_censored"] = censor(value, first)


def _interval_metrics(key: str, interval: Interval) -> dict[str, float]:
    return {
        f"{key}_ci_low": interval.low,
        f"{key}_ci_high": interval.high,
        f"{key}_ci_low_censored": interval.low_censored,
        f"{key}_ci_high_censored": interval.high_censored,
        f"{key}_ci_low_mc": interval.low_mc,
        f"{key}_ci_high_mc": interval.high_mc,
    }


def _number(value: Any) -> float:
    """A float from a JSON value (None → NaN)."""
    return float(value) if value is not None else float("nan")


def _draw_valley(ax: Any, row: dict[str, Any], colour: Any) -> None:
    """A flat AIC valley's fitted-g (p_S, p_I) as the box of its ranges (no point: the
    optimiser would pick one)."""
    s_low, s_high = row["p_similarity_theory_low"], row["p_similarity_theory_high"]
    i_low, i_high = row["p_identification_theory_low"], row["p_identification_theory_high"]
    ax.plot(
        [s_low, s_high, s_high, s_low, s_low],
        [i_low, i_low, i_high, i_high, i_low],
        "-",
        color=colour,
        lw=0.8,
    )


def _finite(value: Any) -> bool:
    """A number that survived the JSON round trip (NaN is written as null)."""
    return value is not None and bool(np.isfinite(value))


def _beyond_front(p_s: float, p_i: float) -> bool:
    """Whether a point lies outside the universal front (graded similarity can get there,
    e.g. linear decay, Proposition 1; constant similarity cannot)."""
    if p_s >= 0.75:
        return True
    upper = theory.pareto_front(2001)
    branch = upper.b <= 0.5  # p_S rises from 1/2 to 3/4 while p_I falls from 1 to 3/4
    return bool(p_i > np.interp(p_s, upper.p_s[branch], upper.p_i[branch]))


#: How a guarded scale of the ``fits`` table reads instead of a number, by its censoring.
_FIT_WORDS = {-1.0: "< d₁", 1.0: "at the search bound"}


def _guarded(value: float, bound: str, d1: float) -> tuple[float, float]:
    """(value, censored) of a scale in the ``fits`` table, through the metrics' guards: at
    the search's low edge or below d₁ it is NaN with −1, at its high edge NaN with +1."""
    if bound == "low":
        return float("nan"), -1.0
    if bound == "high":
        return float("nan"), 1.0
    return censor(value, d1)


def _fit_row(site: str, f: Fit, chosen: bool, d1: float) -> dict[str, Any]:
    """One row of the ``fits`` table: a family's fit at ``site``, with what it resolves.

    Every scale goes through the metrics' guards: one below d₁ or at an edge of the search is
    NaN with its ``*_censored`` (−1 / +1) and named in ``unresolved`` ("< d₁", "at the
    search bound"), never a number. (A two-scale fit at the low edge has its fast scale
    there; its slow scale is still estimated.)"""
    slow_bound = "" if f.at_bound == "low" and f.family == "two-scale" else f.at_bound
    scales = {
        "epsilon": _guarded(f.epsilon, slow_bound, d1),
        # The fitted curve's half-width (the metric is the measured curve's).
        "half_width": _guarded(f.half_width, slow_bound, d1),
        "epsilon_fast": _guarded(f.epsilon_fast, f.at_bound if slow_bound == "" else "", d1),
    }
    unresolved = [
        f"{name} {_FIT_WORDS[censored]}"
        for name, (_, censored) in scales.items()
        if censored in _FIT_WORDS
    ]
    return {
        "site": site,
        "family": f.family,
        **{name: value for name, (value, _) in scales.items()},
        **{f"{name}_censored": censored for name, (_, censored) in scales.items()},
        "unresolved": "; ".join(unresolved),
        "delta": f.delta,
        "offset": f.offset,
        "fast_share": f.fast_share,
        "exponent": f.exponent,  # the power family's β
        # The fraction of g(0) = 1 this fit loses within the first bin.
        "amplitude": float(1.0 - f.g()(np.array(d1))) if np.isfinite(f.level) else float("nan"),
        "aic": f.aic,
        "at_search_bound": f.at_bound,
        "chosen": chosen,
    }


def _bootstrap_intervals(boot: Resampled, confidence: float, d1: float) -> dict[str, Interval]:
    """The bootstrap intervals of the chosen fit's numbers; scales are censored below d₁."""
    return {
        "epsilon": _interval(boot.epsilon, confidence, d1),
        "half_width": _interval(boot.half_width, confidence, d1),
        "delta": _interval(boot.delta, confidence),
        "offset": _interval(boot.offset, confidence),
    }


def _site_metrics(
    measured: SiteSimilarity,
    chosen: Fit,
    g_first: float,
    distances: np.ndarray,
    width: float,
    boot: Resampled,
    resamples: int,
    intervals: dict[str, Interval],
    placement: dict[str, Any],
) -> dict[str, float]:
    """One site's metrics, in the Result's order: every scale through :func:`_scale` (censored
    below d₁ or at a search bound), Δ and the offset never censored."""
    site = measured.site
    d1 = float(distances[0])
    # Resamples whose g does not fall give no ε; they are left out of the intervals
    # and counted here.
    flat_share = float(np.mean(np.isnan(boot.epsilon))) if resamples else np.nan
    epsilon = np.inf if chosen.at_bound == "high" else chosen.epsilon
    low_fast = chosen.family == "two-scale" and chosen.at_bound == "low"
    epsilon_fast = -np.inf if low_fast else chosen.epsilon_fast
    site_metrics: dict[str, float] = {
        f"{site}.fast_share": chosen.fast_share,
        f"{site}.delta": chosen.delta,
        f"{site}.offset": chosen.offset,
        **{
            f"{site}.{k}": v
            for name, interval in intervals.items()
            for k, v in _interval_metrics(name, interval).items()
        },
        # g at the grid's first distance d₁ and what is lost by it: what any grid
        # resolves, whatever the fit.
        f"{site}.g_first": g_first,
        f"{site}.amplitude": 1.0 - g_first,
        f"{site}.first_distance": d1,
        f"{site}.max_distance": float(distances.max()),
        f"{site}.search_high": 4.0 * float(distances.max()),
        **across_text_metrics(measured),
        f"{site}.bootstrap_without_scale": flat_share,
        f"{site}.bootstrap_resamples": float(resamples),
        **{f"{site}.{k}": v for k, v in placement.items() if k not in ("regime", "method")},
    }
    _scale(site_metrics, f"{site}.epsilon", epsilon, d1)
    _scale(site_metrics, f"{site}.epsilon_fast", epsilon_fast, d1)
    _scale(site_metrics, f"{site}.half_width", width, d1)
    for name in ("delta", "offset"):  # not scales: never censored
        for end in ("low", "high"):
            site_metrics.pop(f"{site}.{name}_ci_{end}_censored")
    return site_metrics


def _own_summary(
    site: str, similarity: str, chosen: Fit, metrics: dict[str, float], placement: dict[str, Any]
) -> dict[str, Any]:
    """The ``by_similarity`` row of the similarity measured (as :meth:`Resolution._summary`
    gives for the other one), read from the site's ``metrics`` and its ``placement``."""
    return {
        "site": site,
        "similarity": similarity,
        "family": chosen.family,
        "g_first": metrics[f"{site}.g_first"],
        "half_width": metrics[f"{site}.half_width"],
        "half_width_censored": metrics[f"{site}.half_width_censored"],
        "delta": chosen.delta,
        "offset": chosen.offset,
        "p_similarity": placement["p_similarity"],
        "p_identification": placement["p_identification"],
    }


def _undefined_summary(site: str, similarity: str) -> dict[str, Any]:
    """The ``by_similarity`` row of a similarity that is undefined at ``site``: all NaN."""
    return {
        "site": site,
        "similarity": similarity,
        "family": "undefined",
        **dict.fromkeys(
            ("g_first", "half_width", "half_width_censored", "delta", "offset"),
            float("nan"),
        ),
        "p_similarity": float("nan"),
        "p_identification": float("nan"),
    }


def _side_by_side_metrics(site: str, rows: tuple[dict[str, Any], ...]) -> dict[str, float]:
    """``<site>.raw_*`` and ``<site>.centred_*`` from the two ``by_similarity`` rows."""
    out: dict[str, float] = {}
    for row in rows:
        prefix = "centred" if row["similarity"] == "centred-cosine" else "raw"
        out.update(
            {
                f"{site}.{prefix}_{k}": float(v)
                for k, v in row.items()
                if k not in ("site", "similarity", "family")
            }
        )
    return out


def _open_end(interval: Interval) -> tuple[float, float]:
    """An interval's ends with a censored end open (−∞ below d₁, +∞ beyond)."""
    low = -np.inf if interval.low_censored == -1 else interval.low
    high = np.inf if interval.high_censored == 1 else interval.high
    return float(low), float(high)


def _full_scales(metrics: dict[str, float], intervals: dict[str, Interval], site: str) -> Scales:
    """The full range's half-width and ε (NaN where unresolved) with their intervals."""
    return Scales(
        metrics[f"{site}.half_width"],
        metrics[f"{site}.epsilon"],
        _open_end(intervals["half_width"]),
        _open_end(intervals["epsilon"]),
    )


def _scope_row(measured: SiteSimilarity, similarity: str, d1: float) -> dict[str, Any]:
    """What the site's scales depend on: the similarity, the stimuli's range and spacing."""
    coordinates = np.asarray(measured.coordinates, dtype=float)
    return {
        "site": measured.site,
        "similarity": similarity,
        "centred_on": "mean of these stimuli" if similarity == "centred-cosine" else "not centred",
        "stimuli": len(coordinates),
        "coordinate_low": float(coordinates.min()),
        "coordinate_high": float(coordinates.max()),
        "grid_spacing": d1,
        "note": SCALE_NOTE,
    }


def _protocol(config: ResolutionConfig, seed: int) -> dict[str, Any]:
    """Keyword arguments of theory.evaluate: how the (p_S, p_I) trials are drawn."""
    return {
        "draws": config.draws,
        "choice": config.choice,
        "samples": config.samples,
        "seed": seed,
    }


def _theory_points(
    distances: np.ndarray, fits: Sequence[Fit], protocol: dict[str, Any]
) -> list[Any]:
    """The theory's (p_S, p_I) of each fitted g. The theory's g is the fitted curve itself
    (g(0) = 1, no amplitude divided out), so its point compares with the empirical one; the
    Luce rule needs g ≥ 0, so a negative fitted g counts as 0, as a ReLU would."""
    return [evaluate(distances, _luce_g(fit), 2, **protocol) for fit in fits]


def _luce_g(fit: Fit) -> Callable[[np.ndarray], np.ndarray]:
    """``fit``'s g with negative similarities counted as 0."""
    g = fit.g()

    def clipped(d: np.ndarray) -> np.ndarray:
        return np.clip(g(d), 0.0, None)

    return clipped


#: The precision the theory's accuracies are printed to (three decimals): an AIC valley that
#: moves p_S or p_I by this much or more would change the printed point.
VALLEY_PRECISION = 1e-3


def valley_is_flat(spread: float, bootstrap_width: float) -> bool:
    """Whether an AIC valley that moves a predicted accuracy by ``spread`` (the range over the
    fits within ΔAIC 2 of the best) is flat: no narrower than its bootstrap interval
    (``bootstrap_width``; NaN: not measured, no test) or than the printed precision
    (:data:`VALLEY_PRECISION`). Where it is, a point would be the optimiser's pick within the
    range and the printed digits would claim more than the data hold."""
    as_wide = bool(np.isfinite(bootstrap_width) and spread >= bootstrap_width)
    return as_wide or spread >= VALLEY_PRECISION


def _theory_point(
    measured: SiteSimilarity,
    chosen: Fit,
    edges: np.ndarray,
    resampled: Sequence[Fit],
    protocol: dict[str, Any],
) -> dict[str, float]:
    """The fitted g's (p_S, p_I) from the profile: the range over the fits within ΔAIC 2 of
    the best (``_low`` / ``_high``) beside the bootstrap's interval (``_ci_low`` /
    ``_ci_high``, from the first refits). The point is given only where the AIC valley is
    sharp (:func:`valley_is_flat` false for both): else it is NaN with
    ``p_theory_from_valley`` = 1, and the range is what is read (the optimiser's stopping
    point, not the data, would pick a point within it)."""
    nan = float("nan")
    names = ("p_similarity_theory", "p_identification_theory")
    row = {
        f"{n}{end}": nan
        for n in names
        for end in ("", "_se", "_low", "_high", "_ci_low", "_ci_high")
    }
    row["p_theory_from_valley"] = nan
    if not np.isfinite(chosen.epsilon):
        return row
    binned = binned_pairs(measured.distances, measured.similarity, edges)
    keep = (binned[3] > 0) & (binned[0] > 0)
    valley = profile_valley(
        chosen, binned[0], binned[1], binned[3], float(binned[2][keep].sum())
    ) or [chosen]
    points = _theory_points(measured.distances, valley, protocol)
    boot = _theory_points(measured.distances, resampled, protocol)
    wide = False
    for name, attribute in zip(names, ("p_s", "p_i")):
        values = np.array([getattr(p, attribute) for p in points])
        row[name], row[f"{name}_se"] = (
            getattr(points[0], attribute),
            getattr(points[0], "se_" + attribute[-1]),
        )
        row[f"{name}_low"], row[f"{name}_high"] = float(values.min()), float(values.max())
        if len(boot) >= 2:
            ends = np.quantile([getattr(p, attribute) for p in boot], [0.025, 0.975])
            row[f"{name}_ci_low"], row[f"{name}_ci_high"] = (float(e) for e in ends)
        wide |= valley_is_flat(
            float(values.max() - values.min()), row[f"{name}_ci_high"] - row[f"{name}_ci_low"]
        )
    row["p_theory_from_valley"] = float(wide)
    if wide:
        for name in names:
            row[name] = nan
    return row


#: The regime of a ⟨b⟩ whose reading changes within one grid step of its half-width.
SET_BY_GRID = "set by the grid"


def _grid_step(distances: np.ndarray, width: float, first: float) -> tuple[float, float]:
    """⟨b⟩ one grid step (d₁) below and above the half-width: how much the grid alone moves
    it (every ball is a count of grid points, so ⟨b⟩ moves in steps)."""
    low = float(finite_ball(distances, max(width - first, 0.0)).mean())
    return low, float(finite_ball(distances, width + first).mean())


def _balls_at_half_width(
    distances: np.ndarray,
    chosen: Fit,
    width: float,
    boot: Resampled,
    first: float,
    confidence: float,
) -> tuple[dict[str, float], str, float]:
    """⟨b⟩ (its interval, or only a bound) and Var(b) at the half-width, in the placement
    row's order, with ⟨b⟩ one grid step either way, the regime they give ("set by the grid"
    unless the reading survives one grid step either way) and the bootstrap's agreement."""
    nan = float("nan")
    largest = float(distances.max())
    mean_b = var_b = agreement = bound = step_low = step_high = nan
    b_censored = nan
    ends = (nan, nan, nan, nan)
    if not np.isfinite(chosen.epsilon) or np.isnan(width):
        regime = "none"  # no resolution scale: nothing for the theory to place
    elif width < first or np.isinf(width):
        regime = "unresolved"
        below = width < first
        bound = float(finite_ball(distances, first if below else largest).mean())
        b_censored = -1.0 if below else 1.0
    else:
        # The half-width means the same point of every curve (halfway from 1 to the
        # floor), so ⟨b⟩ compares across layers whichever family won.
        balls = finite_ball(distances, width)
        mean_b, var_b = float(balls.mean()), float(balls.var())
        b_censored = 0.0
        regime = str(theory.regime(mean_b))
        step_low, step_high = _grid_step(distances, width, first)
        if {str(theory.regime(b)) for b in (step_low, step_high)} != {regime}:
            regime = SET_BY_GRID
        ends, agreement = _bootstrap_regime(distances, boot, first, confidence, regime)
        if regime == SET_BY_GRID:
            agreement = nan  # no regime read, so no share agreeing with one
    balls_row = {
        "mean_b": mean_b,
        "mean_b_censored": b_censored,
        # ⟨b⟩ ≤ this (censored −1) or ≥ this (+1) when the regime is unresolved.
        "mean_b_bound": bound,
        # ⟨b⟩ one grid step below and above the half-width, and half their difference.
        "mean_b_grid_low": step_low,
        "mean_b_grid_high": step_high,
        "mean_b_grid_step": (step_high - step_low) / 2,
        "mean_b_ci_low": ends[0],
        "mean_b_ci_high": ends[1],
        "mean_b_ci_low_censored": ends[2],
        "mean_b_ci_high_censored": ends[3],
        "var_b": var_b,
    }
    return balls_row, regime, agreement


def _bootstrap_regime(
    distances: np.ndarray, boot: Resampled, first: float, confidence: float, regime: str
) -> tuple[tuple[float, float, float, float], float]:
    """⟨b⟩'s interval ends (low, high and their censoring) from the bootstrap half-widths,
    and the share of resamples whose ⟨b⟩ gives ``regime`` (NaN without resamples)."""
    nan = float("nan")
    widths = boot.half_width[~np.isnan(boot.half_width)]
    if not len(widths):
        return (nan, nan, nan, nan), nan
    resampled_b = _resampled_mean_b(distances, widths, first)
    interval = _interval(resampled_b, confidence)
    regimes = np.array(
        [str(theory.regime(float(b))) if np.isfinite(b) else "unresolved" for b in resampled_b]
    )
    ends = (interval.low, interval.high, interval.low_censored, interval.high_censored)
    return ends, float(np.mean(regimes == regime))


def _resampled_mean_b(distances: np.ndarray, widths: np.ndarray, first: float) -> np.ndarray:
    """⟨b⟩ at each bootstrap half-width; one below d₁ reads −∞, one beyond the range +∞."""
    usable = np.where(widths < first, -np.inf, widths)
    finite = np.isfinite(usable)
    resampled_b = np.where(usable < 0, -np.inf, np.inf)
    resampled_b[finite] = finite_ball(distances, usable[finite]).mean(axis=-1)
    return resampled_b


def _two_scale_balls(distances: np.ndarray, chosen: Fit, first: float) -> dict[str, float]:
    """Two scales: ⟨b⟩ at each one's half-width (ε ln 2), each scale judged on its own: a
    fast scale at the search's low edge or with its half-width below d₁ is "< d₁" (−1), a
    slow one at the high edge or with its half-width beyond the largest distance is only
    bounded (+1, ``_bound`` = b there). A fast scale at the low edge leaves the slow one
    estimated."""
    scales: dict[str, float] = {}
    if chosen.family != "two-scale":
        return scales
    largest = float(distances.max())
    for name, scale, bound in (
        ("fast", chosen.epsilon_fast, chosen.at_bound == "low"),
        ("slow", chosen.epsilon, chosen.at_bound == "high"),
    ):
        width = scale * np.log(2.0)
        value, censored, ball_bound = float("nan"), 0.0, float("nan")
        if (name == "fast" and bound) or width < first:
            censored = -1.0
            ball_bound = float(finite_ball(distances, first).mean())
        elif bound or width > largest:
            censored = 1.0
            ball_bound = float(finite_ball(distances, largest).mean())
        else:
            value = float(finite_ball(distances, width).mean())
        scales[f"mean_b_{name}"] = value
        scales[f"mean_b_{name}_censored"] = censored
        scales[f"mean_b_{name}_bound"] = ball_bound
    return scales


def _profile_title(result: Result, first: float) -> str:
    """The g(d) panel's title, with the stimulus range its scales hold for (its metrics; a
    result written before them: its ``scale_depends_on`` table)."""
    span = shared_stimulus_range(result, {r["site"] for r in result.tables.get("g_of_d", [])})
    scope = result.tables.get("scale_depends_on") or [{}]
    if span is None and "coordinate_low" in scope[0]:
        span = f"{coordinate(scope[0]['coordinate_low'])}–{coordinate(scope[0]['coordinate_high'])}"
    over = f" over {span}" if span else ""
    return (
        f"similarity profile and chosen fit per site{over} (unscaled; first distance "
        f"d₁ = {first:g}, dotted)"
    )


class Resolution(Similarity, declaration=DECLARATION):
    """Resolution scale ε of g(d) by family and AIC, and the model's place on the (p_S, p_I) front.

    Families: step, linear, exponential, Gaussian; the empirical and the fitted g's (p_S, p_I)
    are placed against the universal front (see the module docstring).
    """

    config: ResolutionConfig

    def finalize(self) -> Result:
        config = self.config
        seed = self.context.seed if self.context is not None else 0
        front = theory.pareto_front(2001)
        metrics: dict[str, float] = {}
        # The Result's tables, in its order; every site appends its rows to each.
        tables: dict[str, list[dict[str, Any]]] = {
            name: []
            for name in (
                "g_of_d",
                "fits",
                "placement",
                "by_similarity",
                "scale_depends_on",
                "range_dependence",
            )  # fmt: skip
        }
        other = "cosine" if config.similarity == "centred-cosine" else "centred-cosine"
        try:
            companions = {m.site: m for m in self.site_similarities(other)}
        except ValueError:  # e.g. centring leaves a zero vector: that similarity is undefined
            companions = {}
        for measured in progress.each(self.site_similarities(), "sites finished"):
            companion = companions.get(measured.site)
            self._finalize_site(measured, companion, other, front, seed, metrics, tables)
        return Result(self.name, metrics=metrics, tables={**tables, "metric": self.metric_table()})

    def _finalize_site(
        self,
        measured: SiteSimilarity,
        companion: SiteSimilarity | None,
        other: str,
        front: theory.Front,
        seed: int,
        metrics: dict[str, float],
        tables: dict[str, list[dict[str, Any]]],
    ) -> None:
        """One site's profile, fits, bootstrap, placement and side-by-side numbers, added to
        ``metrics`` and ``tables`` (``companion``: the site under the ``other`` similarity)."""
        config = self.config
        site = measured.site
        edges = distance_bins(measured.distances, config.bins)
        rows = g_of_d(measured.distances, measured.similarity, config.bins)
        first = rows[0]  # the nearest bin of distinct stimuli
        d1 = float(first["distance"])
        fits = fit_profile(measured.distances, measured.similarity, edges)
        chosen = chosen_fit(fits)
        # The chosen fit's g at each measured distance (the figure draws it from here: the
        # fits table holds no scale the grid does not resolve).
        fitted = chosen.g()(np.array([r["distance"] for r in rows]))
        tables["g_of_d"].extend(
            {"site": site, **row, "fitted": float(g)} for row, g in zip(rows, fitted)
        )
        tables["fits"].extend(_fit_row(site, f, f is chosen, d1) for f in fits)
        distances = np.array([r["distance"] for r in rows])
        means = np.array([r["mean"] for r in rows])
        # No far level to be halfway to without a scale (a flat profile): NaN.
        width = (
            measured_half_width(distances, means, chosen.level)
            if np.isfinite(chosen.epsilon)
            else float("nan")
        )
        # No interval around a scale that is not there.
        resamples = config.bootstrap if np.isfinite(chosen.epsilon) else 0
        boot = bootstrap_fits(measured, chosen.family, edges, resamples, seed)
        intervals = _bootstrap_intervals(boot, config.confidence, d1)
        placement = self._placement(measured, chosen, width, boot, front, seed, d1)
        site_metrics = _site_metrics(
            measured, chosen, float(first["mean"]), distances, width, boot, resamples,
            intervals, placement,
        )  # fmt: skip
        depends, range_rows = range_dependence(
            measured, chosen, _full_scales(site_metrics, intervals, site), config.bins
        )
        site_metrics[f"{site}.scale_depends_on_range"] = depends
        site_metrics.update(range_metrics(site, measured.coordinates))
        metrics.update(site_metrics)
        tables["range_dependence"].extend(range_rows)
        tables["placement"].append({"site": site, "family": chosen.family, **placement})
        # The same numbers with the other similarity, side by side (centring changes them).
        mine = _own_summary(site, config.similarity, chosen, site_metrics, placement)
        theirs = (
            self._summary(companion, other, d1, seed)
            if companion is not None
            else _undefined_summary(site, other)
        )
        tables["by_similarity"].extend([mine, theirs])
        metrics.update(_side_by_side_metrics(site, (mine, theirs)))
        tables["scale_depends_on"].append(_scope_row(measured, config.similarity, d1))

    def _summary(
        self, measured: SiteSimilarity, similarity: str, first: float, seed: int
    ) -> dict[str, Any]:
        """The fit-free numbers and the measured half-width of one site under ``similarity``."""
        config = self.config
        edges = distance_bins(measured.distances, config.bins)
        rows = g_of_d(measured.distances, measured.similarity, config.bins)
        chosen = chosen_fit(fit_profile(measured.distances, measured.similarity, edges))
        width = measured_half_width(
            np.array([r["distance"] for r in rows]),
            np.array([r["mean"] for r in rows]),
            chosen.level,
        )
        value, censored = censor(width if np.isfinite(chosen.epsilon) else float("nan"), first)
        empirical = evaluate(
            measured.distances,
            np.clip(measured.similarity, 0.0, None),
            2,
            **_protocol(config, seed),
        )
        return {
            "site": measured.site,
            "similarity": similarity,
            "family": chosen.family,
            "g_first": float(rows[0]["mean"]),
            "half_width": value,
            "half_width_censored": censored,
            "delta": chosen.delta,
            "offset": chosen.offset,
            "p_similarity": empirical.p_s,
            "p_identification": empirical.p_i,
        }

    def _placement(
        self,
        measured: SiteSimilarity,
        chosen: Fit,
        width: float,
        boot: Resampled,
        front: theory.Front,
        seed: int,
        first: float,
    ) -> dict[str, Any]:
        """⟨b⟩ and Var(b) at the measured half-width, the regime they give (and how often the
        bootstrap gives the same), theory and empirical (p_S, p_I) with how they were
        computed, and the distance to the front.

        A half-width below the first distance d₁ (every ball holds its centre only, whatever
        N) or beyond the range leaves the regime *unresolved*: ⟨b⟩ is then only bounded
        (``mean_b_bound``: ⟨b⟩ ≤ b(d₁), or ≥ b at the largest distance), with no agreement.
        """
        # Keyword arguments of theory.evaluate (the options were checked against its choices).
        protocol = _protocol(self.config, seed)
        distances = measured.distances
        balls, regime, agreement = _balls_at_half_width(
            distances, chosen, width, boot, first, self.config.confidence
        )
        edges = distance_bins(distances, self.config.bins)
        predicted = _theory_point(measured, chosen, edges, boot.fits, protocol)
        scales = _two_scale_balls(distances, chosen, first)
        empirical = evaluate(distances, np.clip(measured.similarity, 0.0, None), 2, **protocol)
        position = theory.nearest_on_front(empirical.p_s, empirical.p_i, front)
        return {
            **balls,
            **scales,
            # The regime of ⟨b⟩ (identification b < 1/4, trade-off to 1/2, interference
            # beyond; unresolved when the half-width is below d₁ or beyond the range), and
            # the share of bootstrap resamples whose ⟨b⟩ gives the same one.
            "regime": regime,
            "regime_agreement": agreement,
            **predicted,
            "p_similarity": empirical.p_s,
            "p_identification": empirical.p_i,
            # Exact enumeration up to ~310 stimuli (N³ trials), Monte Carlo beyond: the
            # method, its number of trials (0 = exact) and the standard errors are recorded.
            "method": empirical.method,
            "samples": float(empirical.samples),
            "p_similarity_se": empirical.se_s,
            "p_identification_se": empirical.se_i,
            "front_distance": float(position.distance),
            "front_b": float(position.b),
            "front_beyond": float(_beyond_front(empirical.p_s, empirical.p_i)),
        }

    @classmethod
    def plot(cls, result: Result, **kwargs: Any) -> Any:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        chosen = {r["site"]: r for r in result.tables.get("fits", []) if r["chosen"]}
        sites = list(chosen)
        colours = dict(zip(sites, plt.cm.viridis(np.linspace(0, 0.9, max(len(sites), 1)))))
        figure, (ax_g, ax_plane) = plt.subplots(1, 2, figsize=(12, 4.6))
        plot_profiles(ax_g, result.tables["g_of_d"], unit=distance_unit(result))
        for site in sites:  # the chosen fit at the measured distances (none drawn below d₁)
            mine = [r for r in result.tables["g_of_d"] if r["site"] == site]
            fitted = [_number(r.get("fitted")) for r in mine]
            if np.any(np.isfinite(fitted)):
                ax_g.plot([r["distance"] for r in mine], fitted, color=colours[site], lw=1)
        for site in sites:  # g(0) = 1 on the diagonal; the same stimulus in another text
            ax_g.plot([0], [1.0], "o", color=colours[site], ms=3)
            across = _number(result.metrics.get(f"{site}.g0_across_texts"))
            if np.isfinite(across):
                ax_g.plot([0], [across], "D", mfc="none", color=colours[site], ms=4)
        ax_g.plot([], [], "kD", mfc="none", ms=4, label="d = 0 across texts")
        ax_g.legend(fontsize=6, ncol=2)
        ax_g.set_ylabel("g(d) (g(0) = 1: a stimulus with itself)")
        first = min((r["distance"] for r in result.tables["g_of_d"]), default=0.0)
        ax_g.axvline(first, color="grey", lw=0.6, ls=":")
        ax_g.set_title(_profile_title(result, first), fontsize=9)

        universal = theory.pareto_front(401)
        ax_plane.plot(universal.p_s, universal.p_i, "k-", lw=1.5, label="universal front (Δ = 0)")
        graded = theory.linear_decay_front(401)
        ax_plane.plot(
            graded.p_s, graded.p_i, color="C3", lw=1, label="linear-decay front (paper, Prop. 1)"
        )
        for delta in NOISE_CURVES:
            noisy = theory.pareto_front(401, delta=delta)
            ax_plane.plot(noisy.p_s, noisy.p_i, "k--", lw=0.7, alpha=0.5)
            ax_plane.annotate(f"Δ={delta}", (noisy.p_s[100], noisy.p_i[100]), fontsize=6, alpha=0.7)
        for row in result.tables.get("placement", []):
            colour = colours.get(row["site"], "C0")
            ax_plane.plot(row["p_similarity"], row["p_identification"], "o", color=colour)
            if _finite(row["p_similarity_theory"]):
                ax_plane.plot(
                    row["p_similarity_theory"], row["p_identification_theory"], "x", color=colour
                )
            elif _finite(row.get("p_similarity_theory_low")):  # a flat valley: its range
                _draw_valley(ax_plane, row, colour)
        placed = result.tables.get("placement", [])
        ax_plane.plot([], [], "ko", label="measured (per site)")
        if any(_finite(r["p_similarity_theory"]) for r in placed):
            ax_plane.plot([], [], "kx", label="fitted g (per site)")
        if any(r.get("p_theory_from_valley") == 1 for r in placed):
            ax_plane.plot([], [], "k-", lw=0.8, label="fitted g, flat AIC valley: its range")
        ax_plane.set_xlabel("p_S (similarity test, n = 2)")
        ax_plane.set_ylabel("p_I (identification test, n = 2)")
        ax_plane.legend(fontsize=7)
        figure.suptitle(f"resolution · {result.provenance.get('model_id', '')}")
        figure.tight_layout()
        return figure

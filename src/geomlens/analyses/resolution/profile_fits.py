"""Fits of a measured similarity profile g(d), anchored at the measured g(0) = 1.

A stimulus is identical to itself, so the measured g(0) is 1 (the diagonal of the similarity
matrix). Every family is fitted with that anchor: there is no free amplitude that could divide
out a first drop, so ε describes the measured curve, not a rescaled one
(docs/theory.md#resolution-fitting). With L
the level g approaches far away:

* step:        g = 1 for d < ε, L beyond;
* linear:      g = (1 − L) max(0, 1 − d/ε) + L;
* exponential: g = (1 − L) e^(−d/ε) + L;
* gaussian:    g = (1 − L) e^(−d²/(2ε²)) + L;
* two-scale:   g = (1 − L) [a e^(−d/ε_fast) + (1 − a) e^(−d/ε)] + L, ε_fast < ε: a sharp
  first drop (a share a of the fall) then a slow tail, for profiles one scale cannot fit
  (it competes only with 0.1 ≤ a ≤ 0.9 and ε ≥ 3 ε_fast: otherwise it is one scale);
* power:       g = (1 − L) (1 + d/ε)^(−β) + L (a generalised Cauchy): beyond ε a power law,
  which has no characteristic scale, so its half-width ε (2^(1/β) − 1) grows with the range
  whenever ε is below the grid (see ``scale_free``);
* flat:        g = L at every d > 0 (no resolution).

L is what the data give; the reported noise floor is Δ = max(L, 0) ∈ [0, 1] and the rest,
min(L, 0), is the *offset*: a centred cosine subtracts the stimulus set's mean, which makes
the mean similarity over all pairs about 0 and so pushes far pairs below 0 (a property of the
centring and the stimulus range, not noise). The Luce rule sees max(g, 0), whose floor is Δ.

All fits are weighted least squares of the binned means (each bin weighted by its pair count)
over d > 0. With the anchor, g − 1 is linear in the shape's coefficients, so for fixed scales
the coefficients are solved in closed form (non-negative: g must fall with distance) and only
the scales are searched (a log grid, then refined).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq, minimize_scalar

# Families with one scale ε; "two-scale" adds a fast scale; "flat" has none.
SINGLE_SCALE = ("step", "linear", "exponential", "gaussian")
TWO_SCALE = "two-scale"
POWER = "power"
FAMILIES = (*SINGLE_SCALE, TWO_SCALE, POWER)
# Free parameters: ε and L; two-scale: ε_fast, ε, a and L; power: ε, β and L; flat: L.
PARAMETERS = {**dict.fromkeys(SINGLE_SCALE, 2), TWO_SCALE: 4, POWER: 3, "flat": 1}
# The power family's exponents searched: from a near-flat decay to one an exponential matches.
_EXPONENTS = (0.02, 20.0)
# Past this exponent the power law is its exponential limit on any grid we measure: β and ε
# trade off along a flat valley ((1 + d/ε)^−β ≈ e^(−βd/ε)), so β is not identified (two float32
# paths to the same activations gave β = 17.3 and 18.6) and the exponential family describes it.
_EXPONENTIAL_LIMIT = 10.0
# A two-scale fit counts only when each scale carries at least this share of the fall and
# the slow scale is at least this many times the fast one; otherwise it is not two scales.
MIN_SHARE = 0.1
MIN_RATIO = 3.0
_GRID = 160
_GRID_TWO = 48
_ZOOMS = 5  # zoomed grids: the log-scales to ~1e-4 (a relative 0.01 % in each scale)
_RESIDUAL_FLOOR = 1e-10
# Losses closer than this (relative to the profile's total squares) are the same loss: the
# rounding of summing a few dozen weighted squares is ~1e-15, a scale the data resolve moves
# the loss by far more (a 1 % change of an exponential ε at d₁ = ε moves it by ~1e-4).
_PLATEAU = 1e-9

# Where each single-scale shape falls to 1/2 (so g halfway from 1 to L), in units of ε.
HALF_WIDTH = {
    "step": 1.0,
    "linear": 0.5,
    "exponential": float(np.log(2.0)),
    "gaussian": float(np.sqrt(2.0 * np.log(2.0))),
}


def family_shape(family: str, distances: np.ndarray, epsilon: float | np.ndarray) -> np.ndarray:
    """The part of a single-scale g that decays from 1 at d = 0 to 0 far away."""
    scaled = np.asarray(distances, dtype=float) / epsilon
    if family == "step":
        return (scaled < 1.0).astype(float)
    if family == "linear":
        return np.clip(1.0 - scaled, 0.0, None)
    if family == "exponential":
        return np.exp(-scaled)
    if family == "gaussian":
        return np.exp(-0.5 * scaled**2)
    raise ValueError(f"Unknown family {family!r}; families are {FAMILIES}.")


@dataclass(frozen=True)
class Fit:
    """One family fitted to a profile, with g(0) = 1.

    ``level`` is L, the fitted g far away (for flat, its one level); ``delta`` = max(L, 0)
    the noise floor and
    ``offset`` = min(L, 0) the part below 0 (centring). ``epsilon`` is the (slow) scale;
    for two-scale, ``epsilon_fast`` and ``fast_share`` (a) describe the first drop (NaN
    otherwise). Scales are NaN when g does not fall with distance.
    """

    family: str
    epsilon: float
    level: float
    rss: float
    aic: float
    epsilon_fast: float = float("nan")
    fast_share: float = float("nan")
    #: "low" / "high" when a scale of the best fit sits at an edge of the search grid (then
    #: the scale is a bound of the search, not an estimate), else "".
    at_bound: str = ""
    #: The power family's exponent β (NaN otherwise).
    exponent: float = float("nan")

    @property
    def delta(self) -> float:
        """The noise floor max(L, 0) ∈ [0, 1] (NaN without a scale: nothing to be a floor of)."""
        return float(np.clip(self.level, 0.0, 1.0)) if np.isfinite(self.epsilon) else np.nan

    @property
    def offset(self) -> float:
        """min(L, 0): how far below 0 far pairs sit (centring); NaN without a scale."""
        return float(min(self.level, 0.0)) if np.isfinite(self.epsilon) else np.nan

    def g(self) -> Callable[[np.ndarray], np.ndarray]:
        """The fitted g(d), 1 at d = 0 (also where a fast scale is finer than the bins)."""
        return fitted_g(
            self.family, self.epsilon, self.level, self.epsilon_fast, self.fast_share, self.exponent
        )

    @property
    def half_width(self) -> float:
        """Where g falls halfway from 1 to L: a width that means the same for every family."""
        return half_width(self)


def fitted_g(
    family: str,
    epsilon: float,
    level: float,
    epsilon_fast: float = float("nan"),
    fast_share: float = float("nan"),
    exponent: float = float("nan"),
) -> Callable[[np.ndarray], np.ndarray]:
    """g(d) of a family with its parameters (g(0) = 1 exactly)."""

    def g(d: np.ndarray) -> np.ndarray:
        d = np.asarray(d, dtype=float)
        if family == "flat":
            decay = np.zeros_like(d)
        elif family == POWER:
            decay = (1.0 + d / epsilon) ** (-exponent)
        elif family == TWO_SCALE:
            decay = fast_share * np.exp(-d / epsilon_fast) + (1 - fast_share) * np.exp(-d / epsilon)
        else:
            decay = family_shape(family, d, epsilon)
        return np.where(d == 0, 1.0, (1.0 - level) * decay + level)

    return g


def half_width(fit: Fit) -> float:
    """The distance at which ``fit``'s g falls to (1 + L) / 2 (NaN without a scale)."""
    if not np.isfinite(fit.epsilon):
        return float("nan")
    if fit.family in HALF_WIDTH:
        return fit.epsilon * HALF_WIDTH[fit.family]
    if fit.family == POWER:
        return float(fit.epsilon * (2.0 ** (1.0 / fit.exponent) - 1.0))
    # Two-scale: the decay a e^(−d/ε_f) + (1 − a) e^(−d/ε) falls monotonically from 1 to 0.
    a, fast, slow = fit.fast_share, fit.epsilon_fast, fit.epsilon
    return float(
        brentq(
            lambda d: a * np.exp(-d / fast) + (1 - a) * np.exp(-d / slow) - 0.5,
            0.0,
            50.0 * slow,
            xtol=1e-12 * slow,
        )
    )


def measured_half_width(distances: np.ndarray, means: np.ndarray, level: float) -> float:
    """Where the *measured* g falls halfway from g(0) = 1 to the far level ``level``.

    ``distances`` and ``means`` are the binned profile at d > 0 (ascending). The half-width
    is interpolated linearly between the last bin at or above the halfway level and the first
    below it. Nothing is interpolated between d = 0 and the first distance d₁ (the grid says
    nothing there): when g is below halfway already at d₁ the answer is ``-inf`` (read as
    "< d₁"); when g stays above halfway over the whole range it is ``+inf`` (beyond the
    range); NaN without a level (a flat profile).
    """
    d, m = np.asarray(distances, dtype=float), np.asarray(means, dtype=float)
    keep = (d > 0) & np.isfinite(m)
    d, m = d[keep], m[keep]
    if not np.isfinite(level) or not len(d) or level >= 1.0:
        return float("nan")
    halfway = (1.0 + level) / 2.0
    if m[0] < halfway:
        return float("-inf")
    below = np.nonzero(m < halfway)[0]
    if not len(below):
        return float("inf")
    k = int(below[0])
    d0, d1, m0, m1 = d[k - 1], d[k], m[k - 1], m[k]
    return float(d0 + (m0 - halfway) / (m0 - m1) * (d1 - d0))


def _rss_aic(
    rss_between: float, within: float, counts: np.ndarray, parameters: int
) -> tuple[float, float]:
    """Pair-level RSS and AIC = pairs · log(RSS / pairs) + 2 · parameters."""
    pairs = float(counts.sum())
    rss = rss_between + within
    # Residuals below 1e-10 per pair are rounding, not fit: they all count as that floor, so
    # an exact profile is not "fitted better" by a family that only chases rounding errors.
    floor = pairs * _RESIDUAL_FLOOR**2
    return rss, float(pairs * np.log(max(rss, floor) / pairs) + 2 * parameters)


def _one_scale(
    family: str, d: np.ndarray, y: np.ndarray, w: np.ndarray, epsilon: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
    """For each ε: (RSS, u) of y ≈ u (shape − 1), u ≥ 0, y = g − 1 (so L = 1 − u)."""
    x = family_shape(family, d[None, :], np.atleast_1d(epsilon)[:, None]) - 1.0
    sxx, sxy = (x * x) @ w, x @ (w * y)
    u = np.where(sxx > 0, np.maximum(sxy, 0.0) / np.where(sxx > 0, sxx, 1.0), 0.0)
    rss = np.maximum((w * y * y).sum() - 2 * u * sxy + u * u * sxx, 0.0)
    return rss, u


def _two_scales(
    d: np.ndarray, y: np.ndarray, w: np.ndarray, fast: np.ndarray, slow: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each (ε_fast, ε): (RSS, u, v) of y ≈ u (e^(−d/ε_f) − 1) + v (e^(−d/ε) − 1), u, v ≥ 0.

    Non-negative least squares in two unknowns: the unconstrained solution where both are
    non-negative, else the better of the two one-coefficient solutions."""
    x1 = np.exp(-d[None, :] / np.asarray(fast)[:, None]) - 1.0
    x2 = np.exp(-d[None, :] / np.asarray(slow)[:, None]) - 1.0
    s11, s22, s12 = (x1 * x1) @ w, (x2 * x2) @ w, (x1 * x2) @ w
    s1y, s2y, syy = x1 @ (w * y), x2 @ (w * y), (w * y * y).sum()
    det = s11 * s22 - s12**2
    ok = det > 1e-12 * s11 * s22
    safe = np.where(ok, det, 1.0)
    u = (s22 * s1y - s12 * s2y) / safe
    v = (s11 * s2y - s12 * s1y) / safe
    both = ok & (u >= 0) & (v >= 0)
    rss_both = syy - u * s1y - v * s2y
    u1 = np.maximum(s1y, 0) / np.where(s11 > 0, s11, 1.0)
    v2 = np.maximum(s2y, 0) / np.where(s22 > 0, s22, 1.0)
    rss_u, rss_v = syy - u1 * s1y, syy - v2 * s2y
    use_u = rss_u <= rss_v
    u = np.where(both, u, np.where(use_u, u1, 0.0))
    v = np.where(both, v, np.where(use_u, 0.0, v2))
    rss = np.where(both, rss_both, np.minimum(rss_u, rss_v))
    return np.maximum(rss, 0.0), u, v


def _nan_fit(family: str, rss_between: float, within: float, w: np.ndarray) -> Fit:
    nan = float("nan")
    return Fit(family, nan, nan, *_rss_aic(rss_between, within, w, PARAMETERS[family]))


def fit_family(
    family: str, distances: np.ndarray, means: np.ndarray, counts: np.ndarray, within: float
) -> Fit:
    """Least squares of one family, with g(0) = 1, to the binned means at d > 0.

    ``within`` is the pairs' squared deviation from their bin means, so the RSS and AIC are
    those of the pair-level fit. The scales are NaN when the best fit does not fall with
    distance (the representation shows no resolution there).
    """
    keep = (counts > 0) & (distances > 0)
    d, m, w = distances[keep], means[keep], counts[keep]
    if len(d) < 2:
        raise ValueError("Fitting g(d) needs pairs at two or more positive distances.")
    y = m - 1.0
    if family == "flat":
        level = float(np.average(m, weights=w))
        rss = float((w * (m - level) ** 2).sum())
        return Fit("flat", float("nan"), level, *_rss_aic(rss, within, w, 1))
    if family == TWO_SCALE:
        return _fit_two_scale(d, y, w, within)
    if family == POWER:
        return _fit_power(d, y, w, within)
    if family == "step":
        levels = np.unique(d)
        candidates = (levels[1:] + levels[:-1]) / 2
    else:
        candidates = np.geomspace(d.min() / 4, d.max() * 4, _GRID)
    losses = _one_scale(family, d, y, w, candidates)[0]
    best = int(np.argmin(losses))
    epsilon = float(candidates[best])
    if family != "step":
        low, high = candidates[max(best - 1, 0)], candidates[min(best + 1, len(candidates) - 1)]
        refined = minimize_scalar(
            lambda log_e: float(_one_scale(family, d, y, w, np.exp(log_e))[0][0]),
            bounds=(np.log(low), np.log(high)),
            method="bounded",
            options={"xatol": 1e-8},
        )
        if refined.fun <= losses[best]:
            epsilon = float(np.exp(refined.x))
    (rss,), (u,) = _one_scale(family, d, y, w, epsilon)
    if not u > 0:  # g does not fall: no scale to report (NaN, not a number that looks like one)
        return _nan_fit(family, float(rss), within, w)
    bound = ""
    if family != "step":
        bound = _edge(epsilon, candidates[0], candidates[-1]) or _flat_to_edge(
            family, d, y, w, candidates, float(rss)
        )
    return Fit(family, epsilon, 1.0 - float(u), *_rss_aic(float(rss), within, w, 2), at_bound=bound)


def _flat_to_edge(
    family: str, d: np.ndarray, y: np.ndarray, w: np.ndarray, candidates: np.ndarray, rss: float
) -> str:
    """ "low" / "high" when the loss at that edge of the search grid equals the best loss up
    to rounding: the data cannot tell the scale from the edge, so it is a bound wherever the
    search stopped. (A linear ε at or below the first distance predicts the same g at every
    measured distance — a pure drop — so the loss is flat from the grid's low edge up to d₁,
    and which point of that plateau the search returned was decided by rounding.)"""
    edges = _one_scale(family, d, y, w, candidates[[0, -1]])[0]
    tolerance = _PLATEAU * max(float((w * y * y).sum()), _RESIDUAL_FLOOR**2)
    if edges[0] <= rss + tolerance:
        return "low"
    if edges[1] <= rss + tolerance:
        return "high"
    return ""


def _edge(scale: float, low: float, high: float) -> str:
    """ "low" / "high" when ``scale`` is (within a relative 1 %) at an edge of its search grid."""
    if scale <= low * 1.01:
        return "low"
    if scale >= high / 1.01:
        return "high"
    return ""


def _fit_two_scale(d: np.ndarray, y: np.ndarray, w: np.ndarray, within: float) -> Fit:
    """The two-scale family: a log grid over (ε_fast < ε), then zoomed grids around the best
    point (each vectorised, so a bootstrap of hundreds of refits stays cheap)."""
    grid = np.geomspace(d.min() / 8, d.max() * 4, _GRID_TWO)
    fast, slow = np.meshgrid(grid, grid, indexing="ij")
    below = fast < slow
    fast, slow = np.log(fast[below]), np.log(slow[below])
    losses = _two_scales(d, y, w, np.exp(fast), np.exp(slow))[0]
    best = int(np.argmin(losses))
    centre, loss = np.array([fast[best], slow[best]]), losses[best]
    step = np.log(grid[1] / grid[0])
    for _ in range(_ZOOMS):  # each zoom: 9 x 9 points over ±1 step, then a step 4x smaller
        offsets = np.linspace(-step, step, 9)
        f, s = np.meshgrid(centre[0] + offsets, centre[1] + offsets, indexing="ij")
        f, s = f.ravel(), s.ravel()
        ok = f < s
        trial = _two_scales(d, y, w, np.exp(f[ok]), np.exp(s[ok]))[0]
        if len(trial) and trial.min() <= loss:
            k = int(np.argmin(trial))
            centre, loss = np.array([f[ok][k], s[ok][k]]), trial[k]
        step /= 4
    scales = np.exp(centre)
    (rss,), (u,), (v,) = _two_scales(d, y, w, scales[:1], scales[1:])
    share = float(u / (u + v)) if u + v > 0 else float("nan")
    if not (MIN_SHARE <= share <= 1 - MIN_SHARE and scales[1] >= MIN_RATIO * scales[0]):
        # Two scales that are nearly one, or one of them carrying almost nothing: the fit
        # only chases noise the single-scale families describe with fewer parameters.
        return _nan_fit(TWO_SCALE, float(rss), within, w)
    # The zooms may step up to one grid step past the grid's ends: both are edges.
    edges = (grid[0] * grid[0] / grid[1], grid[1]), (grid[-2], grid[-1] * grid[-1] / grid[-2])
    bound = "low" if scales[0] <= edges[0][1] else "high" if scales[1] >= edges[1][0] else ""
    return Fit(
        TWO_SCALE,
        float(scales[1]),
        1.0 - float(u + v),
        *_rss_aic(float(rss), within, w, 4),
        epsilon_fast=float(scales[0]),
        fast_share=share,
        at_bound=bound,
    )


def _power_loss(
    d: np.ndarray, y: np.ndarray, w: np.ndarray, log_scale: np.ndarray, log_exponent: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For each (log ε, log β): (RSS, u) of y ≈ u ((1 + d/ε)^(−β) − 1), u ≥ 0."""
    scale, exponent = np.exp(log_scale)[:, None], np.exp(log_exponent)[:, None]
    x = (1.0 + d[None, :] / scale) ** (-exponent) - 1.0
    sxx, sxy = (x * x) @ w, x @ (w * y)
    u = np.where(sxx > 0, np.maximum(sxy, 0.0) / np.where(sxx > 0, sxx, 1.0), 0.0)
    return np.maximum((w * y * y).sum() - 2 * u * sxy + u * u * sxx, 0.0), u


def _fit_power(d: np.ndarray, y: np.ndarray, w: np.ndarray, within: float) -> Fit:
    """The power family: a log grid over (ε, β), then zoomed grids around the best point (as
    the two-scale family). At an edge of either grid the fit is a bound ("low" / "high" by
    its scale), so an exponential the power family only approaches (β → ∞) is not taken
    for a power law."""
    scales = np.log(np.geomspace(d.min() / 8, d.max() * 4, _GRID_TWO))
    exponents = np.log(np.geomspace(*_EXPONENTS, _GRID_TWO))
    grid_s, grid_e = (a.ravel() for a in np.meshgrid(scales, exponents, indexing="ij"))
    losses = _power_loss(d, y, w, grid_s, grid_e)[0]
    best = int(np.argmin(losses))
    centre, loss = np.array([grid_s[best], grid_e[best]]), losses[best]
    steps = np.array([scales[1] - scales[0], exponents[1] - exponents[0]])
    for _ in range(_ZOOMS):
        offsets = np.linspace(-1.0, 1.0, 9)
        trial_s, trial_e = (
            a.ravel()
            for a in np.meshgrid(
                centre[0] + steps[0] * offsets, centre[1] + steps[1] * offsets, indexing="ij"
            )
        )
        trial = _power_loss(d, y, w, trial_s, trial_e)[0]
        if trial.min() <= loss:
            k = int(np.argmin(trial))
            centre, loss = np.array([trial_s[k], trial_e[k]]), trial[k]
        steps = steps / 4
    (rss,), (u,) = _power_loss(d, y, w, centre[:1], centre[1:])
    scale, exponent = (float(v) for v in np.exp(centre))
    if not u > 0 or _edge(exponent, *_EXPONENTS) or exponent >= _EXPONENTIAL_LIMIT:
        # No fall, or an exponent at an edge: an exponential (β → ∞) or a constant (β → 0)
        # the power law only approaches; the families that are those describe it.
        return _nan_fit(POWER, float(rss), within, w)
    bound = _edge(scale, float(np.exp(scales[0])), float(np.exp(scales[-1])))
    return Fit(
        POWER,
        scale,
        1.0 - float(u),
        *_rss_aic(float(rss), within, w, PARAMETERS[POWER]),
        at_bound=bound,
        exponent=exponent,
    )


def fit_binned(
    mean_d: np.ndarray, mean_s: np.ndarray, squares: np.ndarray, count: np.ndarray
) -> list[Fit]:
    """Every family (and flat) fitted to one binned profile (bins at d > 0)."""
    keep = (count > 0) & (mean_d > 0)
    within = float(squares[keep].sum())
    args = (mean_d[keep], mean_s[keep], count[keep], within)
    return [fit_family(f, *args) for f in (*FAMILIES, "flat")]


def chosen_fit(fits: list[Fit]) -> Fit:
    """The lowest AIC; a two-scale fit that found only one scale does not compete."""
    usable = [f for f in fits if f.family == "flat" or np.isfinite(f.epsilon)] or fits
    return min(usable, key=lambda f: f.aic)


#: Fits within this AIC of the best describe the data as well (the profile's valley).
VALLEY_AIC = 2.0
_VALLEY_SPAN = 1.0  # log-scale half-width of the profile grid around the best scales
_VALLEY_POINTS = 81


def _valley_losses(
    family: str, d: np.ndarray, y: np.ndarray, w: np.ndarray, logs: list[np.ndarray]
) -> tuple[np.ndarray, list[np.ndarray]]:
    """RSS and coefficients of ``family`` at each point ``logs`` (its log-scales, flattened)."""
    if family == TWO_SCALE:
        rss, u, v = _two_scales(d, y, w, np.exp(logs[0]), np.exp(logs[1]))
        return rss, [u, v]
    if family == POWER:
        rss, u = _power_loss(d, y, w, logs[0], logs[1])
        return rss, [u]
    rss, u = _one_scale(family, d, y, w, np.exp(logs[0]))
    return rss, [u]


def profile_valley(
    best: Fit, distances: np.ndarray, means: np.ndarray, counts: np.ndarray, within: float
) -> list[Fit]:
    """``best``'s family refitted with its scales held on a grid around the best ones: the
    fits within :data:`VALLEY_AIC` of the best AIC, reduced to the valley's corners (the
    smallest and largest of each scale, where a quantity monotone in the scales is extreme)
    and ``best`` itself. Empty for the step and flat families (nothing continuous to hold)."""
    if best.family in ("step", "flat") or not np.isfinite(best.epsilon):
        return []
    keep = (counts > 0) & (distances > 0)
    d, y, w = distances[keep], means[keep] - 1.0, counts[keep]
    centre = [np.log(best.epsilon)]
    if best.family == TWO_SCALE:
        centre = [np.log(best.epsilon_fast), np.log(best.epsilon)]
    elif best.family == POWER:
        centre = [np.log(best.epsilon), np.log(best.exponent)]
    offsets = np.linspace(-_VALLEY_SPAN, _VALLEY_SPAN, _VALLEY_POINTS)
    logs = [a.ravel() for a in np.meshgrid(*(c + offsets for c in centre), indexing="ij")]
    if best.family == TWO_SCALE:
        ordered = logs[0] < logs[1]
        logs = [a[ordered] for a in logs]
    rss, coefficients = _valley_losses(best.family, d, y, w, logs)
    aic = np.array([_rss_aic(float(r), within, w, PARAMETERS[best.family])[1] for r in rss])
    inside = np.flatnonzero((aic <= best.aic + VALLEY_AIC) & (sum(coefficients) > 0))
    corners = {int(inside[np.argmin(a[inside])]) for a in logs if len(inside)}
    corners |= {int(inside[np.argmax(a[inside])]) for a in logs if len(inside)}
    return [best, *(_valley_fit(best, k, logs, coefficients, rss, aic) for k in sorted(corners))]


def _valley_fit(
    best: Fit,
    k: int,
    logs: list[np.ndarray],
    coefficients: list[np.ndarray],
    rss: np.ndarray,
    aic: np.ndarray,
) -> Fit:
    """The fit at point ``k`` of the profile grid."""
    total = float(sum(c[k] for c in coefficients))
    scales = [float(np.exp(a[k])) for a in logs]
    if best.family == TWO_SCALE:
        share = float(coefficients[0][k] / total)
        return Fit(TWO_SCALE, scales[1], 1.0 - total, float(rss[k]), float(aic[k]),
                   epsilon_fast=scales[0], fast_share=share)  # fmt: skip
    if best.family == POWER:
        return Fit(POWER, scales[0], 1.0 - total, float(rss[k]), float(aic[k]), exponent=scales[1])
    return Fit(best.family, scales[0], 1.0 - total, float(rss[k]), float(aic[k]))

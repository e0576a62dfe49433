"""Semantic resolution: expected accuracy of the similarity and identification tests.

docs/theory.md#resolution-tests (paper: "Bound by semanticity"). A probe p and n candidates
are drawn independently from ν; the Luce rule chooses candidate i with probability
D_i = g(x_i, p) / Σ_k g(x_k, p) (uniformly when every g is 0). The similarity test scores
the candidate closest to p, the identification test a candidate that is a copy of p.
p_S^n and p_I^n are the expected D_correct.

This module holds

* the closed forms for constant similarity (g = 1 inside the ball d < ε, Δ outside), which
  depend on the space only through the ball measure b_p(ε) (see :mod:`geomlens.theory.balls`),
* the fronts they trace in the (p_S, p_I) plane, the front's regimes and optimum, the 1/n
  collapse and the non-monotone p_S^n in n,
* Proposition 1 (linear decay on the circle).

The exact / Monte-Carlo accuracy of any finite stimulus set under any similarity matrix is
:func:`geomlens.theory.finite_sets.evaluate`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import minimize_scalar
from scipy.stats import binom

__all__ = [
    "CandidateProfile",
    "Front",
    "FrontPosition",
    "REGIMES",
    "candidate_count",
    "candidate_profile",
    "identification_asymptote",
    "linear_decay_circle",
    "linear_decay_front",
    "nearest_on_front",
    "p_identification",
    "p_similarity",
    "pareto_front",
    "regime",
    "similarity_optimum",
    "similarity_turning_points",
]

#: Noise floors Δ whose fronts (Theorem 2) every figure of the (p_S, p_I) plane draws beside the
#: universal one, so that the report's, the analysis's and the CLI's figures compare at a glance.
NOISE_CURVES = (0.1, 0.3, 0.5)
#: The (p_S, p_I) plane is drawn with p_S on x and p_I on y in every figure.
PLANE_AXES = ("similarity accuracy p_S", "identification accuracy p_I")
#: What "n = 2" in a figure means.
N2_MEANING = "n = 2: each test trial offers two candidates"

# The three regimes of the universal front (docs/theory.md#resolution-theorems), from fine to coarse resolution.
REGIMES = ("identification", "trade-off", "interference")
# On the n = 2 front dp_I/dp_S = −1 / (2 (1 − 2b)) whatever Δ (Theorem 2), so the regime
# boundaries are Δ-free: below b = 1/4 a unit of p_I buys more than a unit of p_S
# (identification is nearly free to keep); at b = 1/2 p_S peaks, and beyond it both fall.
_TRADE_OFF_START = 0.25
_INTERFERENCE_START = 0.5


# --------------------------------------------------------------------------------------------
# Argument checks


def _ball_measure(b: ArrayLike) -> np.ndarray:
    b = np.asarray(b, dtype=float)
    if not np.all((b >= 0) & (b <= 1)):
        raise ValueError(f"b must be a ball measure in [0, 1]; got {b}")
    # b below ~1e-307 overflows scipy's binomial (Boost's ibeta_derivative); a b under 1e-300
    # is 0 to every digit an accuracy is reported with.
    return np.where(b < 1e-300, 0.0, b)


def candidate_count(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be an integer >= 1 (the number of candidates); got {n!r}")
    return int(n)


def _noise(delta: ArrayLike) -> np.ndarray:
    delta = np.asarray(delta, dtype=float)
    if not np.all((delta >= 0) & (delta <= 1)):
        raise ValueError(f"delta must be a noise level in [0, 1]; got {delta}")
    return delta


def _scalar_or_array(x: np.ndarray) -> np.ndarray | float:
    return float(x) if np.ndim(x) == 0 else x


def _expectation_over_probes(
    values: np.ndarray, heterogeneous: bool, weights: ArrayLike | None
) -> np.ndarray | float:
    if not heterogeneous:
        if weights is not None:
            raise ValueError("weights are the probe weights of b samples: pass heterogeneous=True")
        return _scalar_or_array(values)
    if values.size == 0:
        raise ValueError("heterogeneous=True needs at least one sample of b_p")
    if weights is not None:
        weights = np.asarray(weights, dtype=float)
        if weights.shape != values.shape or np.any(weights < 0) or not weights.sum() > 0:
            raise ValueError(
                f"weights must be non-negative, of the shape of b {values.shape}, "
                "with a positive sum"
            )
    return float(np.average(values, weights=weights))


# --------------------------------------------------------------------------------------------
# Constant similarity: Theorems 1–3 (docs/theory.md#resolution-theorems)


def p_similarity(
    b: ArrayLike,
    n: int = 2,
    delta: ArrayLike = 0.0,
    *,
    heterogeneous: bool = False,
    weights: ArrayLike | None = None,
) -> np.ndarray | float:
    """Expected accuracy p_S^n of the n-candidate similarity test, constant similarity.

    docs/theory.md#resolution-theorems, Theorems 1–3. With K' ~ Binomial(n, b_p) candidates inside the probe's ball,
    the closest candidate is one of them and gets 1 / (K' + (n − K') Δ); with K' = 0 every
    candidate has the same similarity and the closest gets 1/n:
    p_S^n = E[1{K' ≥ 1} / (K' + (n − K') Δ) + 1{K' = 0} / n]. For n = 2 this is
    1/2 + (1 − Δ)/(1 + Δ) (b − b²) (Theorem 2), and Theorem 1 at Δ = 0.

    Args:
        b: ball measure b(ε) ∈ [0, 1]; a float or an array (elementwise, homogeneous space),
            or with ``heterogeneous=True`` samples of b_p over probes p ~ ν.
        n: number of candidates (≥ 1).
        delta: similarity outside the ball, Δ ∈ [0, 1]; broadcasts against b unless
            ``heterogeneous``.
        heterogeneous: treat ``b`` as samples of b_p and return the expectation over them
            (so that Var(b) enters, Theorem 1).
        weights: probe weights of the samples (heterogeneous only; uniform by default).

    Returns:
        A float for a scalar b or a heterogeneous expectation, else an array like b.
    """
    b, n, delta = _ball_measure(b), candidate_count(n), _noise(delta)
    if heterogeneous and delta.ndim:
        raise ValueError("with heterogeneous=True delta must be a scalar")
    inside = np.arange(n + 1)
    # Every candidate inside the ball is closer than every one outside; ties among the
    # closest share the same similarity, so which of them counts does not matter.
    denom = inside + (n - inside) * delta[..., None]
    share = np.divide(1.0, denom, out=np.full(denom.shape, 1.0 / n), where=inside > 0)
    values = (binom.pmf(inside, n, b[..., None]) * share).sum(axis=-1)
    return _expectation_over_probes(values, heterogeneous, weights)


def p_identification(
    b: ArrayLike,
    n: int = 2,
    delta: ArrayLike = 0.0,
    *,
    heterogeneous: bool = False,
    weights: ArrayLike | None = None,
) -> np.ndarray | float:
    """Expected accuracy p_I^n of the n-candidate identification test, constant similarity.

    docs/theory.md#resolution-theorems, Theorems 1–3. The target (a copy of the probe) has similarity 1 and
    K ~ Binomial(n − 1, b_p) distractors fall inside the ball:
    p_I^n = E[1 / (1 + K + (n − 1 − K) Δ)]. At Δ = 0 this is (1 − (1 − b)^n) / (n b)
    (→ 1 as b → 0, ≈ 1/(n b) for large n); for n = 2, (2 − (1 − Δ) b) / (2 (1 + Δ)).

    Arguments and return value as in :func:`p_similarity`.
    """
    b, n, delta = _ball_measure(b), candidate_count(n), _noise(delta)
    if heterogeneous and delta.ndim:
        raise ValueError("with heterogeneous=True delta must be a scalar")
    inside = np.arange(n)
    share = 1.0 / (1.0 + inside + (n - 1 - inside) * delta[..., None])
    values = (binom.pmf(inside, n - 1, b[..., None]) * share).sum(axis=-1)
    return _expectation_over_probes(values, heterogeneous, weights)


def identification_asymptote(b: ArrayLike, n: int, delta: ArrayLike = 0.0) -> np.ndarray | float:
    """The 1/n collapse: p_I^n ≈ 1 / (n (b + (1 − b) Δ)) for large n (docs/theory.md#resolution-theorems, Theorem 3).

    The n − 1 distractors add about n times the mean similarity b + (1 − b) Δ to the
    denominator of the Luce rule; at Δ = 0 this is the paper's 1/(n b) (inf at b = Δ = 0,
    where identification stays perfect).
    """
    b, n, delta = _ball_measure(b), candidate_count(n), _noise(delta)
    mean_similarity = b + (1.0 - b) * delta
    with np.errstate(divide="ignore"):
        return _scalar_or_array(1.0 / (n * mean_similarity))


class CandidateProfile(NamedTuple):
    """p_S^n and p_I^n for n = 1, 2, … at a fixed homogeneous b."""

    n: np.ndarray
    p_s: np.ndarray
    p_i: np.ndarray


def candidate_profile(b: float, n_max: int, delta: float = 0.0) -> CandidateProfile:
    """p_S^n and p_I^n for every n in 1..n_max (docs/theory.md#resolution-theorems, Theorem 3)."""
    ns = np.arange(1, candidate_count(n_max) + 1)
    p_s = np.array([p_similarity(b, int(k), delta) for k in ns])
    p_i = np.array([p_identification(b, int(k), delta) for k in ns])
    return CandidateProfile(ns, p_s, p_i)


def similarity_turning_points(b: float, n_max: int, delta: float = 0.0) -> tuple[int, ...]:
    """The n ≤ n_max at which p_S^n turns (a local minimum or maximum in n).

    docs/theory.md#resolution-theorems: for small b, p_S^n is not monotone in n. Adding candidates first hurts (more
    chances to split the choice among far candidates); once n b ~ 1 a candidate usually falls
    inside the ball and is chosen outright, so p_S^n rises to a maximum near n ~ 1/b, after
    which several candidates share the ball and p_S^n falls like 1/(n b). For b = 0.01 the
    turning points are a minimum at n = 11 and a maximum at n = 148.
    """
    p_s = candidate_profile(b, n_max, delta).p_s
    step = np.sign(np.diff(p_s))
    turns = np.nonzero(step[1:] * step[:-1] < 0)[0] + 2
    return tuple(int(t) for t in turns)


# --------------------------------------------------------------------------------------------
# Fronts in the (p_S, p_I) plane


class Front(NamedTuple):
    """A curve {(p_S(b), p_I(b))} traced by the ball measure b ∈ [0, 1]."""

    b: np.ndarray
    p_s: np.ndarray
    p_i: np.ndarray


class FrontPosition(NamedTuple):
    """The point of a front nearest to a measured (p_S, p_I), and how far it is."""

    b: np.ndarray | float
    p_s: np.ndarray | float
    p_i: np.ndarray | float
    distance: np.ndarray | float


def pareto_front(num: int = 201, *, n: int = 2, delta: float = 0.0) -> Front:
    """The universal front {(p_S^n(b), p_I^n(b)) : b ∈ [0, 1]} of homogeneous spaces.

    docs/theory.md#resolution-theorems, Theorems 1–2: with Var(b) = 0 both accuracies depend on b alone, whatever
    the space and ν. ``num`` points, evenly spaced in b.
    """
    if not isinstance(num, (int, np.integer)) or num < 2:
        raise ValueError(f"num must be an integer >= 2 (points on the front); got {num!r}")
    b = np.linspace(0.0, 1.0, num)
    p_s, p_i = p_similarity(b, n, delta), p_identification(b, n, delta)
    return Front(b, np.asarray(p_s), np.asarray(p_i))  # arrays already: b is an array


def similarity_optimum(n: int = 2, delta: float = 0.0) -> FrontPosition:
    """The ball measure b* that maximises p_S^n, with p_S^n(b*) and p_I^n(b*).

    docs/theory.md#resolution-theorems: for n = 2, b* = 1/2 and p_S = 1/2 + (1 − Δ)/(4 (1 + Δ)) (3/4 at Δ = 0).
    Found numerically so that it holds for any n; ``distance`` is 0.
    """
    n, delta = candidate_count(n), float(_noise(delta))
    best = minimize_scalar(
        lambda b: -p_similarity(b, n, delta),
        bounds=(0.0, 1.0),
        method="bounded",
        options={"xatol": 1e-10},
    )
    b = float(best.x)
    return FrontPosition(b, p_similarity(b, n, delta), p_identification(b, n, delta), 0.0)


def regime(b: ArrayLike) -> str | np.ndarray:
    """Which regime of the n = 2 front a ball measure b lies in (docs/theory.md#resolution-theorems).

    * ``"identification"`` (b < 1/4): fine resolution, p_I near 1, p_S near chance; here the
      front's slope is shallower than −1, so generalisation costs little identification.
    * ``"trade-off"`` (1/4 ≤ b ≤ 1/2): gains in p_S cost more than they bring in p_I, up
      to the optimum p_S at b = 1/2.
    * ``"interference"`` (b > 1/2): coarse resolution, both accuracies fall (to 1/2 at b = 1).

    The boundaries do not depend on Δ (see the module constants).
    """
    b = _ball_measure(b)
    labels = np.select(
        [b < _TRADE_OFF_START, b <= _INTERFERENCE_START], REGIMES[:2], default=REGIMES[2]
    )
    return str(labels) if labels.ndim == 0 else labels


def nearest_on_front(p_s: ArrayLike, p_i: ArrayLike, front: Front) -> FrontPosition:
    """Euclidean distance in the (p_S, p_I) plane from measured points to a front.

    The front is taken as the polyline through its points (use a few hundred points or
    more); returns the nearest point, its interpolated b, and the distance.
    """
    points = np.stack(np.broadcast_arrays(np.asarray(p_s, float), np.asarray(p_i, float)), -1)
    start = np.stack([front.p_s[:-1], front.p_i[:-1]], -1)
    step = np.stack([np.diff(front.p_s), np.diff(front.p_i)], -1)
    length2 = np.maximum((step**2).sum(-1), np.finfo(float).tiny)
    offset = points[..., None, :] - start
    along = np.clip((offset * step).sum(-1) / length2, 0.0, 1.0)
    gap = np.linalg.norm(offset - along[..., None] * step, axis=-1)
    seg = np.argmin(gap, axis=-1)
    t = np.take_along_axis(along, seg[..., None], -1)[..., 0]
    nearest = start[seg] + t[..., None] * step[seg]
    b = front.b[seg] + t * np.diff(front.b)[seg]
    distance = np.take_along_axis(gap, seg[..., None], -1)[..., 0]
    return FrontPosition(
        *(_scalar_or_array(x) for x in (b, nearest[..., 0], nearest[..., 1], distance))
    )


# --------------------------------------------------------------------------------------------
# Proposition 1: linear decay on the circle


def linear_decay_circle(b: ArrayLike) -> tuple[np.ndarray | float, np.ndarray | float]:
    """(p_S, p_I) for g(d) = max(0, 1 − d/ε) on the circle of circumference 1 (Proposition 1).

    Uniform ν, geodesic d ∈ [0, 1/2], b = 2ε ∈ [0, 1]:
    p_S = 1/2 + b − (3/2 − ln 2) b² and p_I = 1 − (1 − ln 2) b (both ln 2 at b = 1).
    This is the front the toy ReLU network's trajectories are compared with (docs/theory.md#resolution-toy-network).
    """
    b = _ball_measure(b)
    p_s = 0.5 + b - (1.5 - np.log(2.0)) * b**2
    p_i = 1.0 - (1.0 - np.log(2.0)) * b
    return _scalar_or_array(p_s), _scalar_or_array(p_i)


def linear_decay_front(num: int = 201) -> Front:
    """Proposition 1's curve {(p_S(b), p_I(b)) : b ∈ [0, 1]}, ``num`` points evenly in b."""
    if not isinstance(num, (int, np.integer)) or num < 2:
        raise ValueError(f"num must be an integer >= 2 (points on the front); got {num!r}")
    b = np.linspace(0.0, 1.0, num)
    p_s, p_i = linear_decay_circle(b)
    return Front(b, np.asarray(p_s), np.asarray(p_i))  # arrays already: b is an array

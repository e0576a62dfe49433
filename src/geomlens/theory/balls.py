"""Ball measures b_p(ε) = ν(B_ε(p)) of the stimulus spaces the resolution laws are stated on.

docs/theory.md#resolution-theorems: the constant-similarity laws depend on the space only through the distribution of
b_p(ε) over probes p ~ ν. Every ball here is open (d < ε), matching g = 1 inside d < ε.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import betainc

__all__ = ["circle_ball", "finite_ball", "segment_ball", "sphere_ball"]


def _radius(eps: ArrayLike) -> np.ndarray:
    eps = np.asarray(eps, dtype=float)
    if not np.all(np.isfinite(eps)) or np.any(eps < 0):
        raise ValueError(f"eps must be a finite ball radius >= 0; got {eps}")
    return eps


def circle_ball(eps: ArrayLike) -> np.ndarray | float:
    """Ball measure on the circle of circumference 1 with uniform ν and geodesic distance.

    Homogeneous: b(ε) = min(2ε, 1) for every centre (the geodesic distance is at most 1/2).
    """
    b = np.minimum(2.0 * _radius(eps), 1.0)
    return float(b) if b.ndim == 0 else b


def segment_ball(p: ArrayLike, eps: ArrayLike) -> np.ndarray | float:
    """Ball measure b_p(ε) = min(p + ε, 1) − max(p − ε, 0) on [0, 1] with uniform ν.

    Heterogeneous: balls near the ends are cut off. ``p`` and ``eps`` broadcast; pass samples
    (or a fine grid) of p to get samples of b_p for the heterogeneous laws.
    """
    p = np.asarray(p, dtype=float)
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError(f"p must lie in the segment [0, 1]; got {p}")
    eps = _radius(eps)
    b = np.minimum(p + eps, 1.0) - np.maximum(p - eps, 0.0)
    return float(b) if b.ndim == 0 else b


def sphere_ball(eps: ArrayLike, dim: int = 2) -> np.ndarray | float:
    """Cap measure on the unit sphere S^dim ⊂ R^(dim+1), uniform ν, geodesic radius ε (radians).

    Homogeneous. The normalised cap area of angular radius θ ≤ π/2 is ½ I_{sin²θ}(dim/2, ½)
    (regularised incomplete beta); the complement gives θ > π/2. For dim = 2 this is
    (1 − cos θ)/2; for dim = 1 it is θ/π (the circle of circumference 2π).
    """
    if not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ValueError(f"dim must be an integer >= 1 (the sphere S^dim); got {dim}")
    theta = np.minimum(_radius(eps), np.pi)
    half_cap = 0.5 * betainc(dim / 2.0, 0.5, np.sin(theta) ** 2)
    b = np.where(theta <= np.pi / 2, half_cap, 1.0 - half_cap)
    return float(b) if b.ndim == 0 else b


def finite_ball(
    distances: ArrayLike, eps: ArrayLike, weights: ArrayLike | None = None
) -> np.ndarray:
    """Ball measures b_p(ε) = Σ_y ν(y) 1{d(p, y) < ε} of every point p of a finite set.

    ``distances[p, y]`` is d(p, y); ``weights`` is ν (uniform by default, normalised here).
    The ball of p contains p itself whenever ε > 0, so b_p ≥ ν(p): this is what makes the
    closed forms exact on finite sets with draws made independently (with replacement).
    Returns an array of shape ``eps.shape + (N,)``.
    """
    d = np.asarray(distances, dtype=float)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise ValueError(f"distances must be a square (N, N) matrix; got shape {d.shape}")
    nu = stimulus_measure(weights, d.shape[0])
    eps = _radius(eps)
    inside = d < eps[..., None, None]
    return inside @ nu


def stimulus_measure(weights: ArrayLike | None, size: int) -> np.ndarray:
    """The probability measure ν over ``size`` stimuli: uniform, or ``weights`` normalised."""
    if weights is None:
        return np.full(size, 1.0 / size)
    nu = np.asarray(weights, dtype=float)
    if nu.shape != (size,) or np.any(nu < 0) or not nu.sum() > 0:
        raise ValueError(
            f"weights must be {size} non-negative numbers with a positive sum (the measure ν); "
            f"got shape {nu.shape}"
        )
    return nu / nu.sum()

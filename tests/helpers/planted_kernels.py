"""Representations whose cosine similarity follows a known g(d) (planted ground truth).

Stationary kernels on a line are built from Fourier features (Bochner): cos/sin pairs at
frequencies drawn from the kernel's spectral density, stratified so that a few thousand
features reproduce the kernel to ~1e-3. The linear-decay (triangle) kernel is built from
interval indicators instead: two intervals of length ε whose centres are d apart overlap by
ε − d, so with many interval centres the cosine is max(0, 1 − d/ε) exactly up to the grid.
A floor Δ is a constant feature carrying weight Δ.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm


def _stratified(features: int, rng: np.random.Generator) -> np.ndarray:
    return (np.arange(features) + rng.uniform(size=features)) / features


def kernel_features(
    x: np.ndarray,
    family: str,
    epsilon: float,
    delta: float = 0.0,
    *,
    features: int = 4096,
    period: float | None = None,
    seed: int = 0,
) -> np.ndarray:
    """[N, features] representations of points ``x`` (a line, or a circle of ``period``)."""
    rng = np.random.default_rng(seed)
    x = np.asarray(x, dtype=float)
    if family == "linear":
        span = period if period is not None else x.max() - x.min() + 2 * epsilon
        start = 0.0 if period is not None else x.min() - epsilon
        centres = start + span * _stratified(features, rng)
        gap = np.abs(x[:, None] - centres[None, :])
        if period is not None:
            gap = np.minimum(gap % period, period - gap % period)
        shape = (gap < epsilon / 2).astype(float)
    else:
        u = _stratified(features // 2, rng)
        if family == "gaussian":  # exp(-d^2 / (2 eps^2)) has spectral density N(0, 1/eps^2)
            omega = norm.ppf(u) / epsilon
        elif family == "exponential":  # exp(-|d| / eps) has a Cauchy spectral density
            omega = np.tan(np.pi * (u - 0.5)) / epsilon
        else:
            raise ValueError(family)
        phase = np.outer(x, omega)
        shape = np.concatenate([np.cos(phase), np.sin(phase)], axis=1)
    shape /= np.linalg.norm(shape, axis=1, keepdims=True)
    floor = np.ones((len(x), 1))
    return np.concatenate([np.sqrt(1 - delta) * shape, np.sqrt(delta) * floor], axis=1)


def run_planted(representations, coordinates, *, site: str, bootstrap: int = 40, **options):
    """``resolution`` (or ``options['analysis']``) on planted representations at one site,
    with the plain cosine unless told otherwise."""
    import geomlens as gl

    analysis = options.pop("analysis", "resolution")
    options = {"similarity": "cosine", "bootstrap": bootstrap, **options}
    return gl.run(
        analysis,
        {site: representations.astype(np.float32)},
        {"coordinate": coordinates},
        progress=False,
        **options,
    )


def gram_vectors(gram: np.ndarray) -> np.ndarray:
    """Rows whose inner products are ``gram`` exactly (unit rows when its diagonal is 1)."""
    values, vectors = np.linalg.eigh(gram)
    return vectors * np.sqrt(np.clip(values, 0.0, None))

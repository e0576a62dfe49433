"""The abstraction cosine α of one task, its bootstrap over contexts, its two label-shuffle nulls,
and the interval of a site's mean α over tasks (docs/theory.md#abstraction-measuring; formulas in docs/abstraction.md).

Every resampling here is vectorised: the bootstrap and both nulls are one matrix product (or
one indexed Gram matrix) over all draws at once, never a Python loop over draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

#: The label-shuffle nulls of α, by name. ``within-context`` (the default, docs/theory.md#abstraction-measuring): the
#: concept label shuffled inside each context, i.e. each context's two class means swapped with
#: probability ½ (u_c → ±u_c); with one row per concept value and context (word pairs,
#: translations) this is exactly the row-level label shuffle, with several rows per cell it
#: shuffles the class-mean labels. ``across-contexts`` (the null of geomlens 0.1.0): the 2k
#: class means dealt at random into k (+, −) pairs, concept and context labels shuffled together.
NULLS = ("within-context", "across-contexts")
#: Fewer contexts than this: no bootstrap interval over contexts. Resampling two contexts gives
#: either their one pair or no pair at all, so the interval would have zero width.
MIN_CONTEXTS_FOR_INTERVAL = 3
#: Cosines that differ by less than this are the same value computed two ways.
TIE_TOLERANCE = 1e-12


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def difference_cosines(means: np.ndarray) -> np.ndarray:
    """``[k, k]`` cosines between the difference vectors u_c = μ(+, c) − μ(−, c) of class means
    ``[2, k, d]``."""
    unit = _unit_rows(means[1] - means[0])
    return unit @ unit.T


def pairwise_alpha(differences: np.ndarray) -> float:
    """α: the mean cosine over pairs of distinct rows of ``differences`` ``[k, d]``."""
    unit = _unit_rows(differences)
    cosines = unit @ unit.T
    upper = np.triu_indices(len(unit), k=1)
    return float(cosines[upper].mean())


def context_counts(rng: np.random.Generator, k: int, n: int) -> np.ndarray:
    """``[n, k]``: how often each of k contexts is drawn in n resamples of k with replacement."""
    return rng.multinomial(k, np.full(k, 1.0 / k), size=n).astype(np.float64)


def weighted_pair_means(cosines: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Σ_{a≠b} w_a w_b C_ab / Σ_{a≠b} |w_a w_b| for each row of ``weights`` ``[n, k]``, as one
    matrix product; NaN where no pair of distinct contexts has weight."""
    off_diagonal = cosines - np.diag(np.diag(cosines))
    numerator = np.einsum("bi,ij,bj->b", weights, off_diagonal, weights)
    magnitude = np.abs(weights)
    denominator = magnitude.sum(1) ** 2 - (magnitude**2).sum(1)
    safe = np.where(denominator > 0, denominator, 1.0)
    return np.where(denominator > 0, numerator / safe, np.nan)


def bootstrap_alphas(cosines: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """α of each context resample ``counts`` ``[n, k]``: a context drawn twice is not paired with
    itself, so α_b is the count-weighted mean cosine over pairs of different contexts."""
    return weighted_pair_means(cosines, counts)


def within_context_null(cosines: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """α under the within-context label shuffle: u_c → s_c u_c with random signs s_c, so
    α = Σ_{c≠c'} s_c s_c' C_cc' / (k(k − 1))."""
    signs = rng.choice(np.array([-1.0, 1.0]), size=(n, len(cosines)))
    return weighted_pair_means(cosines, signs)


def across_contexts_null(means: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """α with the 2k class means ``[2, k, d]`` dealt at random into k (+, −) pairs, from their
    Gram matrix G: ⟨x_a − x_b, x_a' − x_b'⟩ = G_aa' − G_ab' − G_ba' + G_bb'."""
    k = means.shape[1]
    flat = means.reshape(2 * k, -1)
    gram = flat @ flat.T
    dealt = rng.permuted(np.tile(np.arange(2 * k), (n, 1)), axis=1)
    plus, minus = dealt[:, :k, None], dealt[:, k:, None]
    plus_t, minus_t = dealt[:, None, :k], dealt[:, None, k:]
    dots = gram[plus, plus_t] - gram[plus, minus_t] - gram[minus, plus_t] + gram[minus, minus_t]
    norms = np.sqrt(np.clip(np.einsum("bii->bi", dots), 0.0, None))
    norms = np.where(norms > 0, norms, 1.0)
    cosines = dots / norms[:, :, None] / norms[:, None, :]
    upper = np.triu_indices(k, k=1)
    return cosines[:, upper[0], upper[1]].mean(1)


@dataclass
class AlphaDraws:
    """α of one task with its bootstrap draws over contexts and both nulls' draws."""

    alpha: float
    n_contexts: int
    #: ``[n_bootstrap]``; all NaN with fewer than :data:`MIN_CONTEXTS_FOR_INTERVAL` contexts.
    bootstrap: np.ndarray
    nulls: dict[str, np.ndarray] = field(default_factory=dict)


def alpha_draws(
    means: np.ndarray, rng: np.random.Generator, *, n_bootstrap: int, n_shuffles: int
) -> AlphaDraws:
    """α of class means ``[2, k, d]`` and its draws. The context resamples are drawn first, so
    two conditions of the same task measured with equally seeded generators (base and
    linearised) are resampled identically: their difference is a paired bootstrap."""
    cosines = difference_cosines(means)
    k = len(cosines)
    upper = np.triu_indices(k, k=1)
    alpha = float(cosines[upper].mean())
    if k >= MIN_CONTEXTS_FOR_INTERVAL:
        bootstrap = bootstrap_alphas(cosines, context_counts(rng, k, n_bootstrap))
    else:
        bootstrap = np.full(n_bootstrap, np.nan)
    nulls = {
        "within-context": within_context_null(cosines, rng, n_shuffles),
        "across-contexts": across_contexts_null(means, rng, n_shuffles),
    }
    return AlphaDraws(alpha, k, bootstrap, nulls)


def _interval(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    finite = draws[np.isfinite(draws)]
    if finite.size == 0:
        return float("nan"), float("nan")
    tail = (1 - confidence) / 2
    return float(np.quantile(finite, tail)), float(np.quantile(finite, 1 - tail))


def _null_columns(name: str, draws: np.ndarray, alpha: float) -> dict[str, float]:
    if draws.size == 0:
        return {f"alpha_null{name}": np.nan, f"alpha_null_p95{name}": np.nan}
    return {
        f"alpha_null{name}": float(draws.mean()),
        f"alpha_null_p95{name}": float(np.quantile(draws, 0.95)),
        # A draw equal to α up to rounding is a tie, and ties count against the data.
        f"alpha_p_value{name}": float(
            (1 + np.sum(draws >= alpha - TIE_TOLERANCE)) / (1 + draws.size)
        ),
    }


def null_suffix(null: str) -> str:
    """Column suffix of a named null: ``within-context`` → ``_within_context``."""
    return "_" + null.replace("-", "_")


def summarise_alpha(draws: AlphaDraws, *, confidence: float, null: str) -> dict[str, float]:
    """Table columns of one task: α, its interval over contexts (NaN with fewer than three
    contexts), the chosen null (``alpha_null``, ``alpha_null_p95``, ``alpha_p_value``) and
    both nulls under their own names."""
    low, high = _interval(draws.bootstrap, confidence)
    columns = {"alpha": draws.alpha, "alpha_ci_low": low, "alpha_ci_high": high}
    columns.update(_null_columns("", draws.nulls[null], draws.alpha))
    for name in NULLS:
        columns.update(_null_columns(null_suffix(name), draws.nulls[name], draws.alpha))
    columns["n_contexts"] = float(draws.n_contexts)
    return columns


def _site_bootstrap(points: np.ndarray, draws: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Draws of a mean over tasks: tasks resampled with replacement, each drawn task entering
    with one of its own bootstrap draws over contexts (a two-stage bootstrap). A task without
    draws (fewer than three contexts, or a resample that drew one context) enters with its α."""
    n_tasks, n = draws.shape
    filled = np.where(np.isfinite(draws), draws, points[:, None])
    task_counts = rng.multinomial(n_tasks, np.full(n_tasks, 1.0 / n_tasks), size=n)
    return (task_counts * filled.T).sum(1) / n_tasks


def site_mean_interval(
    points: Sequence[float],
    draws: Sequence[np.ndarray],
    rng: np.random.Generator,
    *,
    confidence: float,
) -> tuple[float, float]:
    """Interval for the mean over tasks of ``points`` from each task's bootstrap ``draws``,
    resampling tasks and contexts. NaN when it has nothing to resample: one task without an
    interval of its own, or no bootstrap draws at all."""
    points_array = np.asarray(points, dtype=np.float64)
    stacked = np.stack([np.asarray(d, dtype=np.float64) for d in draws])
    if stacked.shape[1] == 0:
        return float("nan"), float("nan")
    if len(points_array) == 1 and not np.isfinite(stacked).any():
        return float("nan"), float("nan")
    return _interval(_site_bootstrap(points_array, stacked, rng), confidence)


def site_null_p95(nulls: Sequence[np.ndarray]) -> float:
    """95th percentile of the mean over tasks of independent per-task null draws: the null of
    the site mean (not the mean of the tasks' 95th percentiles)."""
    stacked = np.stack(list(nulls))
    if stacked.shape[1] == 0:
        return float("nan")
    return float(np.quantile(stacked.mean(0), 0.95))

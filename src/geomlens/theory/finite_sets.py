"""Expected accuracy of any finite stimulus set under any similarity matrix: exact enumeration or
Monte Carlo (docs/theory.md#resolution-finite-sets).

The numerical counterpart of the closed forms in :mod:`geomlens.theory.resolution`: the analyses
use :func:`evaluate` to turn a measured similarity matrix into p_S, p_I.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import reduce
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from geomlens.theory.balls import stimulus_measure
from geomlens.theory.resolution import candidate_count

__all__ = ["Accuracy", "evaluate"]


@dataclass(frozen=True)
class Accuracy:
    """p_S^n and p_I^n of a finite stimulus set; unpacks as ``p_s, p_i = accuracy``.

    ``se_s`` and ``se_i`` are Monte-Carlo standard errors (0 when ``exact``); ``samples`` is
    the number of Monte-Carlo trials (0 for exact enumeration) and ``method`` names which of
    the two gave the numbers, so that a result can record it.
    """

    p_s: float
    p_i: float
    se_s: float
    se_i: float
    n: int
    exact: bool
    samples: int = 0

    @property
    def method(self) -> str:
        return "exact" if self.exact else "monte_carlo"

    def __iter__(self) -> Iterator[float]:
        return iter((self.p_s, self.p_i))


# Elements per chunk of the exact enumeration and of the Monte-Carlo trials: small enough for
# the temporaries to stay in cache (measured 2-4x faster than 1M-element chunks), large enough
# for numpy's per-call overhead to be negligible.
_CHUNK = 1 << 16


def _luce_closest(similarity: list[np.ndarray], distance: list[np.ndarray]) -> np.ndarray:
    """D_correct of the similarity test, one array per candidate (broadcastable).

    When several candidates tie for closest, the correct answer is one of them at random,
    so D_correct is the mean of their D_i. When every similarity is 0 the choice is uniform.
    """
    n = len(similarity)
    total = reduce(np.add, similarity)
    closest_d = reduce(np.minimum, distance)
    closest = [d == closest_d for d in distance]
    ties = reduce(np.add, [c.astype(float) for c in closest])
    chosen = reduce(np.add, [g * c for g, c in zip(similarity, closest)])
    return np.divide(chosen, ties * total, out=np.full(total.shape, 1.0 / n), where=total > 0)


def _luce_target(target: np.ndarray, distractors: list[np.ndarray]) -> np.ndarray:
    """D_1 of the identification test (target similarity first; uniform if all are 0)."""
    total = reduce(np.add, distractors, target)
    n = len(distractors) + 1
    target = np.broadcast_to(target, total.shape)
    return np.divide(target, total, out=np.full(total.shape, 1.0 / n), where=total > 0)


def _index_tuples(
    nu: np.ndarray, count: int
) -> Iterator[tuple[tuple[np.ndarray, ...], np.ndarray]]:
    """Every tuple of ``count`` indices, then one more index as a full trailing axis.

    Yields chunks of (index arrays, ν-weights of shape (rows, N)); the weights factorise, and
    each chunk is a dense (rows, N) block.
    """
    size = len(nu)
    step = max(1, _CHUNK // size)
    for start in range(0, size**count, step):
        idx = np.unravel_index(np.arange(start, min(start + step, size**count)), (size,) * count)
        yield idx, reduce(np.multiply, [nu[i] for i in idx])[:, None] * nu


def _all_distinct(idx: tuple[np.ndarray, ...], size: int) -> np.ndarray:
    """(rows, size) mask of the enumerated tuples (``idx`` then a trailing axis) that repeat
    no stimulus."""
    trailing = np.arange(size)
    distinct = np.ones((len(idx[0]) if idx else 1, size), dtype=bool)
    for k, first in enumerate(idx):
        distinct &= first[:, None] != trailing
        for second in idx[k + 1 :]:
            distinct &= (first != second)[:, None]
    return distinct


def _exact(
    sim: np.ndarray, dist: np.ndarray, nu: np.ndarray, n: int, distinct: bool = False
) -> tuple[float, float]:
    # With distinct draws the tuples that repeat a stimulus get weight 0 and the rest are
    # renormalised: ν^(n+1) conditioned on all-distinct (uniform over distinct tuples for
    # uniform ν).
    size = len(nu)
    # Similarity: (probe, candidates 1..n-1) enumerated, candidate n the trailing axis.
    p_s, mass = 0.0, 0.0
    for (probe, *first), weight in _index_tuples(nu, n):
        if distinct:
            weight = weight * _all_distinct((probe, *first), size)
        similarity = [sim[probe, x][:, None] for x in first] + [sim[probe]]
        distance = [dist[probe, x][:, None] for x in first] + [dist[probe]]
        p_s += float((weight * _luce_closest(similarity, distance)).sum())
        mass += float(weight.sum())
    p_s /= mass
    # Identification: (probe = target, distractors 2..n-1) enumerated, distractor n trailing.
    p_i, mass = 0.0, 0.0
    for (probe, *first), weight in _index_tuples(nu, n - 1):
        if distinct:
            weight = weight * _all_distinct((probe, *first), size)
        distractors = [sim[probe, x][:, None] for x in first] + [sim[probe]]
        p_i += float((weight * _luce_target(sim[probe, probe][:, None], distractors)).sum())
        mass += float(weight.sum())
    return p_s, p_i / mass


def _draw(
    nu: np.ndarray, shape: tuple[int, int], distinct: bool, rng: np.random.Generator
) -> np.ndarray:
    """(count, trials) stimulus indices; with ``distinct``, the ``count`` of each trial are
    different stimuli (ν^count conditioned on all-distinct)."""
    count, trials = shape
    if not distinct:
        return rng.choice(len(nu), shape, p=nu)
    if np.all(nu == nu[0]):
        # Uniform ν: the first ``count`` of a random permutation, from random sort keys.
        keys = rng.random((trials, len(nu)))
        return np.argpartition(keys, count - 1, axis=1)[:, :count].T
    # Any other ν: redraw the trials that repeat a stimulus (rejection keeps the conditional).
    draws = rng.choice(len(nu), shape, p=nu)
    while True:
        ordered = np.sort(draws, axis=0)
        repeated = np.any(ordered[1:] == ordered[:-1], axis=0)
        if not repeated.any():
            return draws
        draws[:, repeated] = rng.choice(len(nu), (count, int(repeated.sum())), p=nu)


def _sampled_choice(similarity: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """The index of the candidate a Luce chooser picks in each trial (uniform if all g are 0)."""
    stacked = np.stack(np.broadcast_arrays(*similarity))
    total = stacked.sum(0)
    uniform = np.full_like(stacked, 1.0 / len(similarity))
    probability = np.divide(stacked, total, out=uniform, where=total > 0)
    threshold = rng.random(total.shape)
    chosen = (np.cumsum(probability, axis=0) < threshold).sum(0)
    return np.minimum(chosen, len(similarity) - 1)  # guards the cumulative sum's rounding


def _monte_carlo(
    sim: np.ndarray,
    dist: np.ndarray,
    nu: np.ndarray,
    n: int,
    samples: int,
    rng: np.random.Generator,
    distinct: bool = False,
    sampled: bool = False,
) -> tuple[float, float, float, float]:
    sums = np.zeros(2)
    squares = np.zeros(2)
    step = max(1, _CHUNK // n)
    for start in range(0, samples, step):
        trials = min(step, samples - start)
        drawn = _draw(nu, (n + 1, trials), distinct, rng)
        probe, cand = drawn[0], drawn[1:]
        similarity = [sim[probe, x] for x in cand]
        distance = [dist[probe, x] for x in cand]
        # The identification probe is a copy of the target; the target is drawn like the
        # probe, and the distractors are fresh candidates (distinct from it if asked).
        distractors = [sim[probe, x] for x in cand[1:]]
        if sampled:
            # Score a sampled choice: right when it lands on the answer, which is one of the
            # closest candidates at random (the identification answer is the target, 0).
            closest_d = reduce(np.minimum, distance)
            closest = np.stack([d == closest_d for d in distance])
            ties = closest.sum(0)
            answer_rank = np.floor(rng.random(trials) * ties)
            answer = (np.cumsum(closest, axis=0) <= answer_rank).sum(0)
            correct = (_sampled_choice(similarity, rng) == answer).astype(float)
            target = (_sampled_choice([sim[probe, probe], *distractors], rng) == 0).astype(float)
        else:
            correct = _luce_closest(similarity, distance)
            target = _luce_target(sim[probe, probe], distractors)
        for k, d in enumerate((correct, target)):
            sums[k] += d.sum()
            squares[k] += (d**2).sum()
    mean = sums / samples
    var = np.maximum(squares / samples - mean**2, 0.0) * samples / max(samples - 1, 1)
    se = np.sqrt(var / samples)
    return float(mean[0]), float(mean[1]), float(se[0]), float(se[1])


def evaluate(
    distances: ArrayLike,
    similarities: ArrayLike | Callable[[np.ndarray], ArrayLike],
    n: int = 2,
    *,
    weights: ArrayLike | None = None,
    method: Literal["auto", "exact", "monte_carlo"] = "auto",
    samples: int = 200_000,
    seed: int | np.random.Generator | None = 0,
    max_exact: int = 30_000_000,
    draws: Literal["independent", "distinct"] = "independent",
    choice: Literal["expected", "sampled"] = "expected",
) -> Accuracy:
    """Expected p_S^n and p_I^n of a finite stimulus set under a given similarity (docs/theory.md#resolution-finite-sets).

    By default probe and candidates are drawn independently from ν (with replacement, as in
    the theory: a candidate may equal the probe or another candidate) and D_correct is the
    expected Luce probability, not a sampled choice. ``draws="distinct"`` and
    ``choice="sampled"`` reproduce experiments run the other way (the paper's released code
    draws n + 1 distinct stimuli and scores sampled choices); with distinct draws a trial's
    stimuli never repeat, so its accuracies differ from the theory's by O(n / N). Ties: when several candidates are equally close to the
    probe (exact equality of ``distances``; round them first if they carry float noise), the
    correct answer is any of them at random, i.e. D_correct is the mean of their D_i. If
    every similarity in a trial is 0 the choice is uniform (D = 1/n).

    Args:
        distances: (N, N) matrix, ``distances[p, x]`` = d(p, x), defining "closest".
        similarities: (N, N) matrix with ``similarities[p, x]`` = g(x, p) ≥ 0 (row = probe,
            column = candidate; the diagonal is the target's similarity in identification),
            or a callable g applied elementwise to ``distances``.
        n: number of candidates (≥ 1).
        weights: ν over the N stimuli (uniform by default; normalised here).
        method: ``"exact"`` enumerates every (probe, candidates) tuple, N^(n+1) of them
            (O(N³) for n = 2); ``"monte_carlo"`` averages ``samples`` random trials;
            ``"auto"`` is exact when N^(n+1) ≤ ``max_exact``.
        samples: Monte-Carlo trials.
        seed: seed or generator of the Monte-Carlo draws.
        max_exact: the largest enumeration ``"auto"`` treats exactly.
        draws: ``"independent"`` (the theory) or ``"distinct"``: the probe and the n
            candidates of a similarity trial are n + 1 different stimuli, the target and the
            n − 1 distractors of an identification trial n different ones (ν^(n+1)
            conditioned on all-distinct; uniformly random distinct stimuli for uniform ν).
        choice: ``"expected"`` scores the Luce probability of the right answer; ``"sampled"``
            samples one choice per trial from the Luce rule (seeded) and scores it 0 or 1, as
            an experiment does; it needs Monte Carlo.

    Returns:
        :class:`Accuracy`, which unpacks as ``(p_s, p_i)`` and carries standard errors.
    """
    dist, sim = _checked_matrices(distances, similarities)
    n = candidate_count(n)
    size = dist.shape[0]
    nu = stimulus_measure(weights, size)
    _check_protocol(method, samples, draws, choice, nu, n)
    distinct = draws == "distinct"
    if n == 1:
        # A single candidate is always the closest, and a lone target is always chosen.
        return Accuracy(1.0, 1.0, 0.0, 0.0, n, True)
    exact_fits = method == "auto" and size ** (n + 1) <= max_exact
    if choice == "expected" and (method == "exact" or exact_fits):
        p_s, p_i = _exact(sim, dist, nu, n, distinct)
        return Accuracy(p_s, p_i, 0.0, 0.0, n, True)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    estimate = _monte_carlo(sim, dist, nu, n, samples, rng, distinct, choice == "sampled")
    return Accuracy(*estimate, n, False, int(samples))


def _checked_matrices(
    distances: ArrayLike, similarities: ArrayLike | Callable[[np.ndarray], ArrayLike]
) -> tuple[np.ndarray, np.ndarray]:
    """The distance and similarity matrices as float arrays, refused unless square, finite
    and >= 0 (the Luce rule needs g >= 0); a callable g is applied to the distances."""
    dist = np.asarray(distances, dtype=float)
    if dist.ndim != 2 or dist.shape[0] != dist.shape[1] or dist.shape[0] == 0:
        raise ValueError(f"distances must be a square (N, N) matrix; got shape {dist.shape}")
    if not np.all(np.isfinite(dist)) or np.any(dist < 0):
        raise ValueError("distances must be finite and >= 0")
    sim = np.asarray(similarities(dist) if callable(similarities) else similarities, float)
    if sim.shape != dist.shape:
        raise ValueError(f"similarities must have the shape of distances {dist.shape}")
    if not np.all(np.isfinite(sim)) or np.any(sim < 0):
        raise ValueError("similarities must be finite and >= 0 (the Luce rule needs g >= 0)")
    return dist, sim


def _check_protocol(
    method: str, samples: object, draws: str, choice: str, nu: np.ndarray, n: int
) -> None:
    """Refuse an unknown method, draws or choice, too few Monte-Carlo samples, distinct draws
    without n + 1 stimuli of positive weight, and sampled choices asked to be exact."""
    if method not in ("auto", "exact", "monte_carlo"):
        raise ValueError(f"method must be 'auto', 'exact' or 'monte_carlo'; got {method!r}")
    if not isinstance(samples, (int, np.integer)) or samples < 2:
        raise ValueError(f"samples must be an integer >= 2 (Monte-Carlo trials); got {samples!r}")
    if draws not in ("independent", "distinct"):
        raise ValueError(f"draws must be 'independent' or 'distinct'; got {draws!r}")
    if choice not in ("expected", "sampled"):
        raise ValueError(f"choice must be 'expected' or 'sampled'; got {choice!r}")
    if draws == "distinct" and np.count_nonzero(nu) < n + 1:
        raise ValueError(
            f"draws='distinct' needs at least n + 1 = {n + 1} stimuli of positive weight; "
            f"got {np.count_nonzero(nu)}"
        )
    if choice == "sampled" and method == "exact":
        raise ValueError("choice='sampled' scores random choices: use method='monte_carlo'")

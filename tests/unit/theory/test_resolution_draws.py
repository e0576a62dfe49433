"""Distinct draws and sampled choices in theory.finite_sets.evaluate (how experiments are run)."""

import itertools

import numpy as np
import pytest

from geomlens.theory import finite_sets
from geomlens.theory.toy import stimulus_distances


def _luce(similarities):
    total = sum(similarities)
    if total == 0:
        return [1.0 / len(similarities)] * len(similarities)
    return [g / total for g in similarities]


def _enumerate_distinct(dist, sim, n):
    """p_S^n, p_I^n averaged by hand over every tuple of distinct stimuli."""
    size = len(dist)
    scores = []
    for probe, *cands in itertools.permutations(range(size), n + 1):
        d = [dist[probe, c] for c in cands]
        shares = _luce([sim[probe, c] for c in cands])
        closest = [k for k in range(n) if d[k] == min(d)]
        scores.append(sum(shares[k] for k in closest) / len(closest))
    p_s = np.mean(scores)
    targets = [
        _luce([sim[t, t]] + [sim[t, x] for x in rest])[0]
        for t, *rest in itertools.permutations(range(size), n)
    ]
    return p_s, np.mean(targets)


@pytest.fixture
def small_set():
    rng = np.random.default_rng(3)
    points = rng.uniform(0, 1, 7)
    dist = np.abs(np.subtract.outer(points, points))
    dist[0, 1] = dist[1, 0] = dist[0, 2]  # a tie for "closest"
    sim = np.exp(-dist / 0.3) * rng.uniform(0.5, 1.0, dist.shape)
    return dist, sim


@pytest.mark.parametrize("n", [2, 3, 4])
def test_distinct_exact_equals_enumeration_of_distinct_tuples(small_set, n):
    dist, sim = small_set
    p_s, p_i = _enumerate_distinct(dist, sim, n)
    exact = finite_sets.evaluate(dist, sim, n, draws="distinct", method="exact")
    assert exact.p_s == pytest.approx(p_s, abs=1e-12)
    assert exact.p_i == pytest.approx(p_i, abs=1e-12)
    independent = finite_sets.evaluate(dist, sim, n, method="exact")
    assert abs(independent.p_s - p_s) > 1e-3  # the two protocols really differ here


@pytest.mark.parametrize("n", [2, 3])
def test_distinct_monte_carlo_and_sampled_choices_agree_with_exact(small_set, n):
    dist, sim = small_set
    exact = finite_sets.evaluate(dist, sim, n, draws="distinct", method="exact")
    for choice in ("expected", "sampled"):
        mc = finite_sets.evaluate(
            dist,
            sim,
            n,
            draws="distinct",
            choice=choice,
            method="monte_carlo",
            samples=200_000,
            seed=1,
        )
        assert abs(mc.p_s - exact.p_s) < 4 * mc.se_s + 1e-12
        assert abs(mc.p_i - exact.p_i) < 4 * mc.se_i + 1e-12
    # non-uniform ν goes through rejection sampling; compare with the weighted enumeration
    weights = np.arange(1, 8, dtype=float)
    exact_w = finite_sets.evaluate(dist, sim, n, weights=weights, draws="distinct", method="exact")
    mc_w = finite_sets.evaluate(
        dist, sim, n, weights=weights, draws="distinct", method="monte_carlo", samples=200_000
    )
    assert abs(mc_w.p_s - exact_w.p_s) < 4 * mc_w.se_s


def test_sampled_choices_are_zero_or_one_and_seeded(small_set):
    dist, sim = small_set
    a = finite_sets.evaluate(dist, sim, 2, choice="sampled", samples=5000, seed=7)
    b = finite_sets.evaluate(dist, sim, 2, choice="sampled", samples=5000, seed=7)
    assert (a.p_s, a.p_i) == (b.p_s, b.p_i)
    # Bernoulli scores: the standard error is sqrt(p (1 - p) / samples)
    assert a.se_s == pytest.approx(np.sqrt(a.p_s * (1 - a.p_s) / 5000), rel=1e-3)


def test_distinct_gap_grows_like_n_over_size():
    # Step similarity on a circle of l points: the distinct protocol removes the probe's own
    # copy from the candidates, so identification gains and the gap shrinks as l grows.
    gaps = []
    for size in (20, 40, 80):
        dist = stimulus_distances(size, "circle")
        sim = (dist < 0.1).astype(float)
        ind = finite_sets.evaluate(dist, sim, 3, method="monte_carlo", samples=100_000, seed=0)
        dis = finite_sets.evaluate(
            dist, sim, 3, draws="distinct", method="monte_carlo", samples=100_000, seed=0
        )
        gaps.append(abs(dis.p_i - ind.p_i))
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[0] / gaps[2] == pytest.approx(4, rel=0.35)


def test_bad_protocols_say_what_is_allowed(small_set):
    dist, sim = small_set
    with pytest.raises(ValueError, match="draws must be"):
        finite_sets.evaluate(dist, sim, draws="unique")
    with pytest.raises(ValueError, match="choice must be"):
        finite_sets.evaluate(dist, sim, choice="argmax")
    with pytest.raises(ValueError, match="monte_carlo"):
        finite_sets.evaluate(dist, sim, choice="sampled", method="exact")
    with pytest.raises(ValueError, match="n \\+ 1 = 8"):
        finite_sets.evaluate(dist, sim, 7, draws="distinct")

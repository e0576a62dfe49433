"""The AUROC's score interval (Newcombe 2006, method 5), valid at the boundary, and its paired
form: planted scores, a coverage simulation, and an independent recomputation."""

import math

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

from geomlens.stats import auroc, auroc_score_interval, pairing_design_effect


def newcombe_by_grid(negatives, positives, confidence=0.95, effect=1.0):
    """The interval recomputed by brute force: every θ on a 10⁻⁵ grid that the score test
    does not reject, with the Hanley–McNeil variance written out term by term."""
    n0, n1 = len(negatives), len(positives)
    estimate = roc_auc_score([0] * n0 + [1] * n1, np.concatenate([negatives, positives]))
    theta = np.linspace(0, 1, 100_001)
    nstar = (n0 + n1) / 2
    q1 = theta / (2 - theta)
    q2 = 2 * theta**2 / (1 + theta)
    variance = (
        theta * (1 - theta) + (nstar - 1) * (q1 - theta**2) + (nstar - 1) * (q2 - theta**2)
    ) / (n0 * n1)
    z = norm.ppf(0.5 + confidence / 2)
    kept = theta[(estimate - theta) ** 2 <= z**2 * effect * variance]
    return kept.min(), kept.max()


def test_complete_separation_is_not_a_point():
    rng = np.random.default_rng(0)
    negatives, positives = rng.normal(size=64), rng.normal(size=64) + 10
    low, high = auroc_score_interval(negatives, positives)
    assert auroc(negatives, positives) == 1.0
    assert high == 1.0 and low < 0.99  # a percentile bootstrap gives [1.00, 1.00] here
    assert low == pytest.approx(newcombe_by_grid(negatives, positives)[0], abs=2e-5)
    # And the lower end at complete separation falls with fewer rows.
    assert auroc_score_interval(negatives[:8], positives[:8])[0] < low


@pytest.mark.parametrize("shift", [0.0, 0.8, 2.5])
def test_matches_the_brute_force_interval(shift):
    rng = np.random.default_rng(1)
    negatives, positives = rng.normal(size=40), rng.normal(size=25) + shift
    got = auroc_score_interval(negatives, positives, confidence=0.9)
    expected = newcombe_by_grid(negatives, positives, confidence=0.9)
    assert got == pytest.approx(expected, abs=2e-5)


def test_coverage_near_the_boundary():
    """Normal scores with a planted AUROC of Φ(3/√2) ≈ 0.983: the 95 % interval covers it in
    at least 90 % of 400 draws of 20 a side (a percentile bootstrap covers it far less often,
    its upper end being 1 whenever the sample separates)."""
    truth = norm.cdf(3 / math.sqrt(2))
    rng = np.random.default_rng(2)
    covered = 0
    for _ in range(400):
        low, high = auroc_score_interval(rng.normal(size=20), rng.normal(size=20) + 3)
        covered += low <= truth <= high
    assert covered / 400 >= 0.9


def test_paired_interval_reads_the_pairs():
    """Positive i is negative i plus a small change: the pairs move together, DeLong's paired
    variance is far below the unpaired one, and the interval narrows by that design effect."""
    rng = np.random.default_rng(3)
    negatives = rng.normal(size=64)
    positives = negatives + 0.3 + 0.1 * rng.normal(size=64)
    # DeLong's placements, written as loops.
    v10 = np.array([np.mean([(p > n) + 0.5 * (p == n) for n in negatives]) for p in positives])
    v01 = np.array([np.mean([(p > n) + 0.5 * (p == n) for p in positives]) for n in negatives])
    effect = np.var(v10 + v01, ddof=1) / (np.var(v10, ddof=1) + np.var(v01, ddof=1))
    assert pairing_design_effect(negatives, positives) == pytest.approx(effect)
    assert effect < 0.5
    paired = auroc_score_interval(negatives, positives, paired=True)
    assert paired == pytest.approx(newcombe_by_grid(negatives, positives, effect=effect), abs=2e-5)
    unpaired = auroc_score_interval(negatives, positives)
    assert paired[1] - paired[0] < unpaired[1] - unpaired[0]
    # Shuffling the pairs breaks the pairing: the effect returns to about 1.
    assert pairing_design_effect(negatives, rng.permutation(positives)) == pytest.approx(
        1, abs=0.35
    )


def test_refusals():
    with pytest.raises(ValueError, match="as many positives as negatives"):
        pairing_design_effect([0.0, 1.0, 2.0], [1.0, 2.0])
    assert all(math.isnan(v) for v in auroc_score_interval([1.0], [2.0, 3.0]))

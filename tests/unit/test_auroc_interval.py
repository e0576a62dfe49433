"""The AUROC and its bootstrap interval (every AUROC sae-features reports gets
one), against scikit-learn and against the known AUROC of two planted normal populations."""

import math

import numpy as np
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

from geomlens.stats import auroc, auroc_interval


def test_auroc_equals_scikit_learn_with_ties():
    rng = np.random.default_rng(0)
    negatives, positives = rng.integers(0, 6, 40), rng.integers(2, 8, 25)  # many ties
    labels = np.r_[np.zeros(40), np.ones(25)]
    expected = roc_auc_score(labels, np.r_[negatives, positives])
    assert math.isclose(float(auroc(negatives, positives)), expected, rel_tol=1e-12)


def test_interval_covers_the_population_auroc():
    """Held-out 64 vs OOD 32 (the default data's sizes), mean shift d: population AUROC
    Φ(d / √2) = 0.74. A 95 % interval must cover it in about 95 % of planted samples, and its
    width must match the spread of the AUROC across samples (the issue: [0.65, 0.84])."""
    shift = math.sqrt(2) * norm.ppf(0.74)
    rng = np.random.default_rng(1)
    covered, widths, values = 0, [], []
    trials = 200
    for trial in range(trials):
        negatives, positives = rng.normal(0, 1, 64), rng.normal(shift, 1, 32)
        low, high = auroc_interval(negatives, positives, resamples=400, seed=trial)
        covered += low <= 0.74 <= high
        widths.append(high - low)
        values.append(float(auroc(negatives, positives)))
    assert 0.88 <= covered / trials <= 0.99
    spread = 2 * norm.ppf(0.975) * np.std(values)  # the width a 95 % interval should have
    assert math.isclose(np.mean(widths), spread, rel_tol=0.2)


def test_interval_is_nan_without_two_scores_per_class():
    assert all(math.isnan(v) for v in auroc_interval([1.0], [2.0, 3.0]))


def test_interval_does_not_depend_on_the_order_of_the_scores():
    """Two ranks merge their rows in another order than one process reads them: same interval."""
    rng = np.random.default_rng(3)
    negatives, positives = rng.normal(size=30), rng.normal(0.5, size=25)
    one = auroc_interval(negatives, positives, resamples=300, seed=1)
    shuffled = auroc_interval(
        rng.permutation(negatives), rng.permutation(positives), resamples=300, seed=1
    )
    assert one == shuffled

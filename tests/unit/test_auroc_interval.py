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


def test_interval_agrees_with_scipy_bootstrap():
    """The stratified percentile bootstrap is scipy.stats.bootstrap's two-sample (unpaired)
    bootstrap of the same statistic: the same interval up to resampling noise, and close to
    scipy's bias-corrected (BCa) interval on planted scores. Tolerances are shares of the
    interval's width."""
    from scipy.stats import bootstrap

    def statistic(negatives, positives, axis=-1):
        return auroc(np.moveaxis(negatives, axis, -1), np.moveaxis(positives, axis, -1))

    rng = np.random.default_rng(4)
    for shift in (0.3, 0.9, 1.8):  # AUROC ≈ 0.58, 0.74, 0.90
        negatives, positives = rng.normal(0, 1, 64), rng.normal(shift, 1, 32)
        ours = auroc_interval(negatives, positives, resamples=4000, seed=0)
        width = ours[1] - ours[0]
        for method, tolerance in (("percentile", 0.1), ("BCa", 0.2)):
            theirs = bootstrap(
                (negatives, positives),
                statistic,
                n_resamples=4000,
                confidence_level=0.95,
                method=method,
                vectorized=True,
                paired=False,
                rng=np.random.default_rng(1),
            ).confidence_interval
            assert abs(ours[0] - theirs.low) <= tolerance * width, (shift, method)
            assert abs(ours[1] - theirs.high) <= tolerance * width, (shift, method)

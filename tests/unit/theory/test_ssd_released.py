"""The released-code form of the SSD bound against values worked out by hand with `math`."""

import math

import pytest

from geomlens.theory import ssd

# k = 5 active latents per token out of m = 100, V = 4 (B = 3 bits, log2 V = 2), delta = 0.05.
CASE = dict(k=5.0, m=100, V=4, risk=1.0, eps_loss=0.1, delta=0.05)


def test_released_bound_hand_values():
    N = 10_000
    result = ssd.released_bound(N=N, **CASE)
    B = 3.0
    dimension = 5 * math.log(math.e * 100 / 5)
    complexity = 4 * B * math.sqrt(dimension / N)
    k_union = B * math.sqrt(math.log(math.pi**2 * 25 / (6 * 0.05)) / (2 * N))
    confidence = B * math.sqrt(math.log(1 / 0.05) / (2 * N))
    assert result.sparse_dimension == pytest.approx(dimension, rel=1e-12)
    assert result.complexity == pytest.approx(complexity, rel=1e-12)
    assert result.k_union == pytest.approx(k_union, rel=1e-12)
    assert result.confidence == pytest.approx(confidence, rel=1e-12)
    assert result.total == pytest.approx(1.1 + complexity + k_union + confidence, rel=1e-12)
    assert result.total == pytest.approx(1.1 + 0.5363700 + 0.0549594 + 0.0367162, rel=1e-6)
    assert result.non_vacuous


def test_released_crossing_size_meets_the_threshold():
    crossing = ssd.released_crossing_size(**CASE)
    B = 3.0
    slope = B * (
        4 * math.sqrt(5 * math.log(math.e * 20))
        + math.sqrt(math.log(math.pi**2 * 25 / 0.3) / 2)
        + math.sqrt(math.log(20) / 2)
    )
    assert crossing == pytest.approx((slope / 0.9) ** 2, rel=1e-12)
    assert ssd.released_bound(N=crossing, **CASE).total == pytest.approx(2.0, rel=1e-12)
    assert ssd.released_crossing_size(**{**CASE, "risk": 1.9}) == math.inf


def test_released_form_differs_from_the_pool_form():
    # Same numbers entered as P = k and N: the forms differ (4x complexity, no eta, k-union).
    pool = ssd.bound(P=5, m=100, N=1000, V=4, risk=1.0, eps_loss=0.1)
    released = ssd.released_bound(N=1000, **CASE)
    assert released.total > pool.total


def test_released_form_rejects_bad_arguments():
    with pytest.raises(ValueError, match=r"expected 0 <= P <= m"):
        ssd.released_bound(N=10, **{**CASE, "k": 101})
    with pytest.raises(ValueError, match=r"expected a finite N >= 1"):
        ssd.released_bound(N=0, **CASE)
    with pytest.raises(ValueError, match=r"expected 0 < delta < 1"):
        ssd.released_bound(N=10, **{**CASE, "delta": 1.0})

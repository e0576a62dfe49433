"""SSD and its bound against values worked out by hand with `math`, never with the module."""

import math

import numpy as np
import pytest

from geomlens.theory import ssd

# A small case whose every term is easy to write down: a pool of 10 latents out of 100, a
# vocabulary of 4 (so B = log2(4 / 0.5) = 3 bits and log2 V = 2 bits), delta = 0.05.
CASE = dict(P=10, m=100, V=4, risk=1.0, eps_loss=0.1, eta=0.05, delta=0.05)
CASE_SSD = 10 * (1 + math.log(10))  # 10 ln(e * 100 / 10)
CASE_B = 3.0


def test_ssd_hand_values():
    assert ssd.ssd(10, 100) == pytest.approx(CASE_SSD, rel=1e-12)
    assert ssd.ssd(10, 100) == pytest.approx(33.025850929940457, rel=1e-12)
    assert ssd.ssd(1, 1) == pytest.approx(1.0)
    assert ssd.ssd(7, 7) == pytest.approx(7.0)  # P = m: P ln(e) = P
    assert ssd.ssd(3, 50) == pytest.approx(3 * math.log(math.e * 50 / 3))
    assert ssd.ssd(0, 50) == 0.0  # the limit P ln(em/P) -> 0


def test_ssd_bounds_the_log_count_of_pools():
    # ln C(m, P) <= P ln(em/P): the complexity term pays for choosing the pool.
    for m in (5, 40, 300):
        for P in range(1, m + 1, max(1, m // 7)):
            assert math.log(math.comb(m, P)) <= ssd.ssd(P, m) + 1e-12


def test_smoothed_loss_helpers():
    assert ssd.smoothed_loss_bound(4) == pytest.approx(3.0)
    assert ssd.smoothed_loss_bound(50257) == pytest.approx(math.log2(50257 / 0.5))
    assert ssd.smoothed_loss_bound(100, a=1.0) == pytest.approx(math.log2(100))
    p = np.array([0.0, 0.25, 1.0])
    np.testing.assert_allclose(
        ssd.smoothed_probability(p, 4), [0.125, 0.5 * 0.25 + 0.125, 0.5 + 0.125]
    )
    bits = ssd.smoothed_bits(p, 4)
    np.testing.assert_allclose(bits, [3.0, 2.0, -math.log2(0.625)])
    # The loss lies in [0, B]: p = 0 reaches B exactly.
    assert np.all(bits >= 0) and np.all(bits <= CASE_B)


def test_bound_hand_values():
    N = 1000
    result = ssd.bound(N=N, **CASE)
    complexity = CASE_B * math.sqrt((CASE_SSD + math.log(2 / 0.05)) / (2 * N))
    confidence = CASE_B * math.sqrt(math.log(4 / 0.05) / (2 * N))
    assert result.empirical_risk == 1.0
    assert result.eps_loss == 0.1
    assert result.pool_mismatch == pytest.approx(3 * 0.05)
    assert result.complexity == pytest.approx(complexity, rel=1e-12)
    assert result.complexity == pytest.approx(0.4064681, rel=1e-6)
    assert result.confidence == pytest.approx(confidence, rel=1e-12)
    assert result.confidence == pytest.approx(0.1404248, rel=1e-6)
    assert result.total == pytest.approx(1.0 + 0.1 + 0.15 + complexity + confidence, rel=1e-12)
    assert result.vacuity_threshold == pytest.approx(2.0)
    assert result.loss_bound == pytest.approx(CASE_B)
    assert result.ssd == pytest.approx(CASE_SSD)
    assert result.non_vacuous  # 1.7969 < 2


def test_crossing_size_hand_value():
    floor = 1.0 + 0.1 + CASE_B * 0.05  # C = 1.25
    slope = CASE_B * (
        math.sqrt((CASE_SSD + math.log(2 / 0.05)) / 2) + math.sqrt(math.log(4 / 0.05) / 2)
    )
    expected = (slope / (2.0 - floor)) ** 2
    assert ssd.crossing_size(**CASE) == pytest.approx(expected, rel=1e-12)
    assert ssd.crossing_size(**CASE) == pytest.approx(531.7187, rel=1e-6)


@pytest.mark.parametrize(
    "case",
    [
        CASE,
        dict(P=24000, m=24576, V=50257, risk=3.2, eps_loss=0.4, eta=0.02),
        dict(P=3, m=8, V=2, risk=0.0, eps_loss=0.0, eta=0.0, delta=0.5, a=0.25),
    ],
)
def test_bound_equals_threshold_at_the_crossing(case):
    crossing = ssd.crossing_size(**case)
    assert crossing > 1
    at_crossing = ssd.bound(N=crossing, **case)
    assert at_crossing.total == pytest.approx(at_crossing.vacuity_threshold, rel=1e-12)
    assert ssd.bound(N=crossing * 1.01, **case).non_vacuous
    assert not ssd.bound(N=crossing * 0.99, **case).non_vacuous


def test_bound_decreases_in_n_toward_the_floor():
    sizes = np.geomspace(1, 1e9, 60)
    totals = [ssd.bound(N=N, **CASE).total for N in sizes]
    assert all(later < earlier for earlier, later in zip(totals, totals[1:]))
    floor = 1.0 + 0.1 + CASE_B * 0.05
    assert totals[-1] > floor
    assert totals[-1] == pytest.approx(floor, abs=1e-3)
    # Only the N-dependent terms move, and they scale as 1/sqrt(N).
    small, large = ssd.bound(N=100, **CASE), ssd.bound(N=400, **CASE)
    assert large.complexity == pytest.approx(small.complexity / 2)
    assert large.confidence == pytest.approx(small.confidence / 2)


def test_crossing_size_is_infinite_when_the_floor_reaches_the_threshold():
    # C = 1.5 + 0.5 + 0 = log2 4 exactly, then beyond it.
    assert ssd.crossing_size(P=10, m=100, V=4, risk=1.5, eps_loss=0.5) == math.inf
    assert ssd.crossing_size(P=10, m=100, V=4, risk=1.0, eta=0.5) == math.inf
    assert not ssd.bound(N=1e12, P=10, m=100, V=4, risk=1.5, eps_loss=0.5).non_vacuous


def test_crossing_size_grows_with_the_pool():
    crossings = [ssd.crossing_size(**{**CASE, "P": P}) for P in (1, 5, 10, 30, 100)]
    assert all(later > earlier for earlier, later in zip(crossings, crossings[1:]))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (dict(P=11, m=10), r"expected 0 <= P <= m = 10, got P = 11"),
        (dict(P=-1, m=10), r"expected 0 <= P <= m"),
        (dict(P=0, m=0.5), r"expected m >= 1"),
        (dict(P=1, m=10, N=0.5), r"expected a finite N >= 1"),
        (dict(P=1, m=10, delta=0.0), r"expected 0 < delta < 1"),
        (dict(P=1, m=10, delta=1.0), r"expected 0 < delta < 1"),
        (dict(P=1, m=10, V=1), r"expected a finite V >= 2"),
        (dict(P=1, m=10, risk=-0.1), r"risk is a loss in bits: expected a finite value >= 0"),
        (dict(P=1, m=10, eps_loss=-1e-9), r"eps_loss is a loss in bits"),
        (dict(P=1, m=10, eta=1.5), r"expected 0 <= eta <= 1"),
        (dict(P=1, m=10, eta=-0.1), r"expected 0 <= eta <= 1"),
        (dict(P=1, m=10, a=0.0), r"expected 0 < a <= 1"),
        (dict(P=float("nan"), m=10), r"expected 0 <= P <= m"),
    ],
)
def test_invalid_arguments_say_what_was_expected(arguments, message):
    full = dict(N=100, V=4, risk=1.0) | arguments
    with pytest.raises(ValueError, match=message):
        ssd.bound(**full)
    if "N" not in arguments:
        full.pop("N")
        with pytest.raises(ValueError, match=message):
            ssd.crossing_size(**full)


def test_invalid_arguments_of_the_helpers():
    with pytest.raises(ValueError, match=r"expected 0 <= P <= m"):
        ssd.ssd(5, 4)
    with pytest.raises(ValueError, match=r"expected m >= 1"):
        ssd.ssd(0, 0)
    with pytest.raises(ValueError, match=r"expected a finite V >= 2"):
        ssd.smoothed_loss_bound(1)
    with pytest.raises(ValueError, match=r"p must hold probabilities in \[0, 1\]"):
        ssd.smoothed_probability([0.5, 1.2], 10)

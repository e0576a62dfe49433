"""Properties (hypothesis) of the theory and of the analyses' maths: accuracies are
probabilities, p_I falls with b and Δ, the n = 2 cases are Theorems 1 and 2 written out here,
α lies in [−1, 1] and ignores the scale and the orientation of the representation space, and
the attenuation A_φ lies in [0, 1]."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.stats import special_ortho_group

import geomlens as gl
from geomlens.analyses.statistics.concept_state import abstraction_scores, pairwise_alpha
from geomlens.theory import abstraction, resolution

unit = st.floats(0.0, 1.0, allow_nan=False)
candidates = st.integers(1, 40)
PROPERTY = settings(max_examples=150, deadline=None)
TOL = 1e-10


# -- resolution theory --------------------------------------------------------------------
@PROPERTY
@given(b=unit, n=candidates, delta=unit)
def test_accuracies_are_probabilities(b, n, delta):
    for p in (resolution.p_similarity(b, n, delta), resolution.p_identification(b, n, delta)):
        assert -TOL <= p <= 1 + TOL
    # and never below chance 1/n: the correct candidate is at least as similar as any other.
    assert resolution.p_identification(b, n, delta) >= 1 / n - TOL


@PROPERTY
@given(b1=unit, b2=unit, n=candidates, delta=unit)
def test_identification_falls_with_b(b1, b2, n, delta):
    low, high = sorted((b1, b2))
    assert (
        resolution.p_identification(low, n, delta)
        >= resolution.p_identification(high, n, delta) - TOL
    )


@PROPERTY
@given(b=unit, d1=unit, d2=unit, n=candidates)
def test_identification_falls_with_delta(b, d1, d2, n):
    low, high = sorted((d1, d2))
    assert resolution.p_identification(b, n, low) >= resolution.p_identification(b, n, high) - TOL


@PROPERTY
@given(b=unit, delta=unit)
def test_two_candidates_are_theorems_1_and_2(b, delta):
    # Theorem 2 (homogeneous b, noise Δ), written out; Δ = 0 is Theorem 1.
    p_s = 0.5 + (1 - delta) / (1 + delta) * (b - b * b)
    p_i = (2 - (1 - delta) * b) / (2 * (1 + delta))
    assert resolution.p_similarity(b, 2, delta) == pytest.approx(p_s, abs=1e-12)
    assert resolution.p_identification(b, 2, delta) == pytest.approx(p_i, abs=1e-12)
    assert resolution.p_similarity(b, 2) == pytest.approx(0.5 + b - b * b, abs=1e-12)
    assert resolution.p_identification(b, 2) == pytest.approx(1 - b / 2, abs=1e-12)


@PROPERTY
@given(samples=arrays(np.float64, st.integers(1, 12), elements=unit))
def test_heterogeneous_two_candidates_is_theorem_1_with_variance(samples):
    mean, variance = samples.mean(), samples.var()
    got_s = resolution.p_similarity(samples, 2, heterogeneous=True)
    got_i = resolution.p_identification(samples, 2, heterogeneous=True)
    assert got_s == pytest.approx(0.5 + mean - mean**2 - variance, abs=1e-12)
    assert got_i == pytest.approx(1 - mean / 2, abs=1e-12)


# -- abstraction: α and A_φ ------------------------------------------------------------------
vectors = arrays(
    np.float64,
    st.tuples(st.integers(2, 6), st.integers(1, 5)),
    elements=st.floats(-10, 10, allow_nan=False, allow_infinity=False),
)


def nonzero_rows(matrix: np.ndarray) -> bool:
    return bool(np.all(np.linalg.norm(matrix, axis=1) > 1e-6))


@PROPERTY
@given(differences=vectors)
def test_alpha_is_a_cosine(differences):
    assume(nonzero_rows(differences))
    assert -1 - 1e-12 <= pairwise_alpha(differences) <= 1 + 1e-12


@PROPERTY
@given(
    differences=vectors,
    scale=st.floats(1e-3, 1e3),
    seed=st.integers(0, 2**31 - 1),
)
def test_alpha_ignores_scale_and_rotation(differences, scale, seed):
    assume(nonzero_rows(differences))
    d = differences.shape[1]
    rotation = special_ortho_group.rvs(d, random_state=seed) if d > 1 else np.array([[1.0]])
    alpha = pairwise_alpha(differences)
    assert pairwise_alpha(scale * differences) == pytest.approx(alpha, abs=1e-9)
    assert pairwise_alpha(differences @ rotation) == pytest.approx(alpha, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    means=arrays(
        np.float64,
        st.tuples(st.just(2), st.integers(2, 5), st.integers(2, 6)),
        elements=st.floats(-5, 5, allow_nan=False),
    ),
    seed=st.integers(0, 1000),
)
def test_bootstrap_and_null_of_alpha_stay_in_range(means, seed):
    assume(nonzero_rows(means[1] - means[0]))
    scores = abstraction_scores(
        means, np.random.default_rng(seed), n_bootstrap=30, n_shuffles=30, confidence=0.9
    )
    keys = ["alpha", "alpha_null", "alpha_null_p95", "alpha_null_p95_across_contexts"]
    if means.shape[1] >= 3:
        keys += ["alpha_ci_low", "alpha_ci_high"]
        assert scores["alpha_ci_low"] <= scores["alpha_ci_high"] + 1e-12
    else:  # two contexts: no interval over contexts exists
        assert np.isnan(scores["alpha_ci_low"]) and np.isnan(scores["alpha_ci_high"])
    for key in keys:
        assert -1 - 1e-9 <= scores[key] <= 1 + 1e-9, key
    assert 0 < scores["alpha_p_value"] <= 1


positive = st.floats(1e-3, 10.0)


@PROPERTY
@given(g=positive, c=positive, s=positive, sc=positive)
def test_kernel_alpha_is_a_cosine_and_matches_the_inverse_snr(g, c, s, sc):
    kernel = abstraction.two_factor_kernel([g, s, c, sc])  # (λ_G, λ_S, λ_C, λ_SC)
    alpha = abstraction.abstraction_cosine(kernel)
    assert -1 - 1e-9 <= alpha <= 1 + 1e-9
    assert alpha == pytest.approx((s - sc) / (s + sc), abs=1e-9)  # α = (1 − ν)/(1 + ν)


@PROPERTY
@given(nu_x=st.floats(0, 1e6), nu_y=st.floats(0, 1e6))
def test_terminal_alpha_is_a_cosine(nu_x, nu_y):
    assert -1 - 1e-12 <= abstraction.alpha_terminal(nu_x, nu_y) <= 1 + 1e-12


@PROPERTY
@given(
    g=positive,
    c=positive,
    s=positive,
    ratio=st.floats(0.0, 0.999),
    activation=st.sampled_from(["erf", "relu", "leaky_relu"]),
    slope=unit,
)
def test_attenuation_lies_in_zero_one_when_alpha_q_is_positive(g, c, s, ratio, activation, slope):
    kernel = abstraction.two_factor_kernel([g, s, c, ratio * s])  # λ_SC < λ_S: α_Q > 0
    factor = abstraction.attenuation(
        kernel, activation, slope if activation == "leaky_relu" else None
    )
    assert -1e-9 <= factor <= 1 + 1e-9


# -- the abstraction analysis itself, through recorded activations --------------------------
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scale=st.floats(1e-2, 1e2), seed=st.integers(0, 10_000))
def test_the_abstraction_analysis_ignores_scale_and_rotation(scale, seed):
    rng = np.random.default_rng(seed)
    width, contexts, per_cell = 6, 3, 4
    concept = np.tile(np.repeat(["a", "b"], per_cell), contexts)
    context = np.repeat([f"c{i}" for i in range(contexts)], 2 * per_cell)
    direction = rng.normal(size=width)
    rows = rng.normal(size=(len(concept), width)) + np.outer(concept == "b", direction)
    rotation = special_ortho_group.rvs(width, random_state=seed)
    columns = {"concept": concept, "context": context}

    def alpha(activations: np.ndarray) -> dict[str, float]:
        result = gl.run(
            "abstraction",
            {"blocks.0.hook_resid_post": activations},
            columns,
            n_bootstrap=20,
            n_shuffles=20,
            seed=3,
        )
        return {k: v for k, v in result.metrics.items() if "alpha" in k and "p_value" not in k}

    base = alpha(rows)
    # Every raw α is a cosine. The corrected α is a disattenuated one (divided by split-half
    # reliabilities), so noise can carry it past 1, and it is NaN (with its reason) where a
    # reliability is not positive.
    raw = {k: v for k, v in base.items() if "corrected" not in k}
    assert raw and all(-1 <= v <= 1 for v in raw.values())
    for transformed in (scale * rows, rows @ rotation):
        got = alpha(transformed)
        assert got.keys() == base.keys()
        for key, value in base.items():
            # The corrected α divides by split-half reliabilities and the null's percentile
            # is taken over label-shuffled cosines: both carry rounding a little further, and
            # in proportion to the value (a small reliability makes a large corrected α: 4.08
            # moved by 1.6e-6 under a rotation, 4e-7 of itself).
            if "corrected" in key or "null" in key:
                close = pytest.approx(value, rel=1e-5, abs=1e-9, nan_ok=True)
            else:
                close = pytest.approx(value, abs=1e-8, nan_ok=True)  # cosines: in [-1, 1]
            assert got[key] == close, key

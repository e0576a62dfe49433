"""Closed forms of the 2FS abstraction theory (docs/theory.md#abstraction-two-factor-model) against definitions worked out
independently: explicit class means, a generic ODE solver, high-precision arithmetic-free
identities and the general-purpose dual kernels."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

from geomlens.theory import abstraction as ab


def kernel(*eigenvalues):
    return ab.two_factor_kernel(eigenvalues)


# --- 2FS decomposition ----------------------------------------------------------------------


def test_class_order_and_mode_eigenvalues_from_explicit_features():
    # μ(s, c) = g + s·a + c·b + s c·e with orthogonal g, a, b, e: v_m picks one feature, with
    # v_Sᵀμ = ½ Σ s μ = 2a, so λ_S = 4‖a‖² and so on. A wrong class order would mix them.
    g, a, b, e = np.eye(6)[:4] * np.array([[1.0], [0.7], [1.3], [0.4]])
    means = np.array([g + s * a + c * b + s * c * e for s, c in ab.CLASS_ORDER])
    spectrum = ab.decompose_class_means(means)
    assert spectrum == pytest.approx((4.0, 4 * 0.49, 4 * 1.69, 4 * 0.16))
    # The concept's difference vectors are u_c = 2a + 2c·e, with cosine (λ_S − λ_SC)/(λ_S + λ_SC).
    u_plus, u_minus = 2 * a + 2 * e, 2 * a - 2 * e
    cosine = u_plus @ u_minus / np.linalg.norm(u_plus) / np.linalg.norm(u_minus)
    assert spectrum.alpha == pytest.approx(cosine)
    assert ab.abstraction_cosine(means @ means.T) == pytest.approx(cosine)
    assert spectrum.nu == pytest.approx(0.16 / 0.49)
    assert ab.alpha_from_nu(spectrum.nu) == pytest.approx(cosine)


def test_decomposition_round_trip_and_cosine_on_random_2fs_kernels():
    rng = np.random.default_rng(0)
    for _ in range(20):
        eigenvalues = rng.exponential(size=4)
        spectrum = ab.decompose_2fs(ab.two_factor_kernel(eigenvalues))
        assert spectrum == pytest.approx(tuple(eigenvalues), rel=1e-12)
        assert ab.abstraction_cosine(ab.two_factor_kernel(eigenvalues)) == pytest.approx(
            spectrum.alpha, rel=1e-12
        )


def test_alpha_from_nu_and_terminal_values():
    assert ab.alpha_from_nu(0.0) == 1.0
    assert ab.alpha_from_nu(1.0) == 0.0
    assert ab.alpha_from_nu(np.inf) == -1.0
    assert ab.alpha_from_nu([1 / 3, 3.0]) == pytest.approx([0.5, -0.5])
    # α_∞ = (1 − √ν̄)/(1 + √ν̄): ν_x = 0.5, ν_y = 0.08 give √ν̄ = 0.2.
    assert ab.alpha_terminal(0.5, 0.08) == pytest.approx(0.8 / 1.2)
    assert ab.alpha_terminal(0.0, 0.7) == 1.0
    # The depth law at L = 1 is the two-layer terminal law.
    for nu_x, nu_y in [(0.5, 0.08), (0.9, 0.3), (2.0, 0.1)]:
        two_layer = ab.depth_terminal(ab.alpha_from_nu(nu_x), ab.alpha_from_nu(nu_y), 1)
        assert two_layer == pytest.approx(ab.alpha_terminal(nu_x, nu_y), rel=1e-12)


# --- the clock ------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [1, 2, 4, 8])
def test_inverse_clock_round_trips_over_hundreds_of_decades(depth):
    # a from about 1e-260 to 1e130: the ln a / a^(−(L−1)/L) and the a^((L+1)/L) regimes.
    log_a = np.linspace(-600.0, 300.0, 901)
    recovered = np.log(ab.inverse_clock(ab.clock(np.exp(log_a), depth), depth))
    assert np.max(np.abs(recovered - log_a) / np.maximum(1.0, np.abs(log_a))) < 1e-13
    assert ab.inverse_clock(-np.inf, depth) == 0.0


def test_clock_is_the_two_layer_formula():
    a = np.array([1e-3, 0.5, 1.0, 7.0, 1e4])
    assert ab.clock(a) == pytest.approx(a**2 / 2 + 2 * a + np.log(a), rel=1e-14)


@pytest.mark.parametrize("depth", [1, 3])
def test_mode_trajectory_solves_the_mode_ode(depth):
    # dλ/dt = 2Lγ λ^(2−1/L) (λ^x)^(1/L) λ^y / (1 + γλ)², λ(0) = κ^L λ^x, by a generic solver.
    lambda_x, lambda_y = np.array([0.3, 1.0, 2.0]), np.array([1.5, 0.4, 1.0])
    gamma, kappa, times = 3.0, 0.05, np.linspace(0.0, 40.0, 81)

    def velocity(_, log_lambda):
        lam = np.exp(log_lambda)
        rate = 2 * depth * gamma * lam ** (2 - 1 / depth) * lambda_x ** (1 / depth) * lambda_y
        return rate / (1 + gamma * lam) ** 2 / lam

    start = np.log(kappa**depth * lambda_x)
    solution = solve_ivp(velocity, (0, times[-1]), start, t_eval=times, rtol=1e-11, atol=1e-12)
    exact = ab.mode_trajectory(lambda_x, lambda_y, gamma, kappa, times, depth)
    assert np.max(np.abs(np.log(exact) - solution.y.T)) < 1e-7


# --- α(t), α_max, plateau -------------------------------------------------------------------

SIGMA_X, SIGMA_Y, GAMMA = kernel(1, 1, 1, 0.5), kernel(1, 1, 1, 0.4), 2.0


def test_alpha_trajectory_endpoints():
    alpha_x = ab.decompose_2fs(SIGMA_X).alpha
    start, late, end = ab.alpha_trajectory(SIGMA_X, SIGMA_Y, GAMMA, 1e-3, [0.0, 1e9, np.inf])
    assert start == pytest.approx(alpha_x, rel=1e-12)
    assert end == pytest.approx(ab.alpha_terminal(0.5, 0.4), rel=1e-12)
    assert late == pytest.approx(end, abs=1e-3)


def test_alpha_max_increases_toward_one_as_kappa_shrinks():
    kappas = 10.0 ** -np.arange(0, 13)
    peaks = [ab.alpha_max(SIGMA_X, SIGMA_Y, GAMMA, kappa) for kappa in kappas]
    assert np.all(np.diff(peaks) > -1e-12)
    assert peaks[0] < 0.9 and peaks[-1] > 1 - 1e-9
    # It is the supremum of the trajectory.
    times = np.geomspace(1e-3, 1e4, 4000)
    for kappa, peak in zip(kappas[::4], peaks[::4]):
        trajectory = ab.alpha_trajectory(SIGMA_X, SIGMA_Y, GAMMA, kappa, times)
        assert trajectory.max() <= peak + 1e-12
        assert trajectory.max() >= peak - 1e-4


def test_alpha_max_in_the_lazy_limit_and_without_target_noise():
    # Large κ (lazy start, α_y > α_x): α rises toward α_∞ but still overshoots it slightly; the
    # overshoot vanishes as κ grows (like 1/κ², from the 2a and ln a terms of the clock).
    sigma_x, sigma_y = kernel(1, 1, 1, 0.8), kernel(1, 1, 1, 0.05)
    terminal = ab.alpha_terminal(0.8, 0.05)
    overshoots = [ab.alpha_max(sigma_x, sigma_y, 1.0, kappa) - terminal for kappa in (5, 50, 500)]
    assert overshoots[0] == pytest.approx(0.0119, abs=1e-4)
    assert np.all(np.diff(overshoots) < 0) and 0 < overshoots[-1] < 1e-5
    # A noiseless target (λ^y_SC = 0) drives α monotonically to 1: the supremum is α_∞ = 1.
    assert ab.alpha_max(sigma_x, kernel(1, 1, 1, 0), 1.0, 5.0) == 1.0


def test_plateau_lasts_theta_log_inverse_kappa():
    # Derivation: in the plateau a_SC = ρ* a_S with ρ* = (1 − level)/(1 + level); for small κ the
    # exit happens with both modes large, where the two clocks give
    # 2γ t (r_SC − ρ*² r_S) = (1 − ρ*²) ln(1/κ) + O(√ln(1/κ)), r = λ^x λ^y, and the entry takes
    # O(1) time. So plateau / ln(1/κ) → (1 − ρ*²) / (2γ (r_SC − ρ*² r_S)).
    level = 0.9
    rho = (1 - level) / (1 + level)
    slope = (1 - rho**2) / (2 * GAMMA * (0.5 * 0.4 - rho**2 * 1.0))
    kappas = 10.0 ** -np.array([32, 64, 128, 256])
    ratios = [
        ab.plateau_length(SIGMA_X, SIGMA_Y, GAMMA, kappa, level) / np.log(1 / kappa)
        for kappa in kappas
    ]
    gaps = np.abs(np.array(ratios) - slope)
    assert np.all(np.diff(gaps) < 0)
    assert gaps[-1] < 0.02 * slope


def test_plateau_is_the_interval_where_alpha_exceeds_the_level():
    level, kappa = 0.95, 1e-6
    length = ab.plateau_length(SIGMA_X, SIGMA_Y, GAMMA, kappa, level)
    times = np.linspace(0.0, 60.0, 60001)
    above = ab.alpha_trajectory(SIGMA_X, SIGMA_Y, GAMMA, kappa, times) >= level
    # A single interval (one peak), of the computed length.
    assert np.count_nonzero(np.diff(above.astype(int))) == 2
    assert np.count_nonzero(above) * (times[1] - times[0]) == pytest.approx(length, abs=2e-3)
    assert ab.plateau_length(SIGMA_X, SIGMA_Y, GAMMA, 1.0, level) == 0.0
    assert ab.plateau_length(kernel(1, 1, 1, 0.01), SIGMA_Y, GAMMA, 1e-3, 0.7) == np.inf


# --- depth ----------------------------------------------------------------------------------


def test_depth_terminal_rises_with_depth_when_the_target_is_more_abstract():
    alpha_x, alpha_y = 0.2, 0.7
    values = [ab.depth_terminal(alpha_x, alpha_y, depth) for depth in range(1, 12)]
    assert np.all(np.diff(values) > 0) and values[-1] < alpha_y
    falling = [ab.depth_terminal(0.7, 0.2, depth) for depth in range(1, 12)]
    assert np.all(np.diff(falling) < 0)
    # artanh α_∞ is the (1, L)-weighted mean of artanh α_x and artanh α_y.
    assert np.arctanh(ab.depth_terminal(alpha_x, alpha_y, 4)) == pytest.approx(
        (np.arctanh(alpha_x) + 4 * np.arctanh(alpha_y)) / 5
    )


def test_depth_per_layer_interpolates_in_artanh():
    layers = ab.depth_per_layer(0.1, [0.6, 0.8], 4)
    assert layers.shape == (2, 5)
    assert layers[:, 0] == pytest.approx([0.1, 0.1]) and layers[:, -1] == pytest.approx([0.6, 0.8])
    assert np.diff(np.arctanh(layers), axis=1) == pytest.approx(
        np.repeat((np.arctanh([0.6, 0.8]) - np.arctanh(0.1))[:, None] / 4, 4, axis=1)
    )


def test_depth_trajectory_tends_to_the_depth_law():
    for depth in (2, 4, 6, 8):
        late, end = ab.alpha_trajectory(SIGMA_X, SIGMA_Y, GAMMA, 0.5, [1e12, np.inf], depth)
        assert late == pytest.approx(end, abs=1e-4)
        assert end == pytest.approx(
            ab.depth_terminal(ab.alpha_from_nu(0.5), ab.alpha_from_nu(0.4), depth)
        )


# --- attenuation ----------------------------------------------------------------------------

ACTIVATIONS = [("erf", None), ("relu", None), ("leaky_relu", 0.1), ("leaky_relu", 0.6)]

eigenvalue = st.one_of(st.just(0.0), st.floats(1e-6, 1e6))


@settings(max_examples=300, deadline=None)
@given(
    background=eigenvalue,
    context=eigenvalue,
    signal=st.floats(1e-6, 1e6),
    nu=st.floats(0.0, 1.0, exclude_max=True),
    slope=st.floats(0.0, 1.0),
)
def test_attenuation_lies_in_unit_interval_when_alpha_is_positive(
    background, context, signal, nu, slope
):
    Q = kernel(background, signal, context, nu * signal)
    if not ab.decompose_2fs(Q).alpha > 0:  # round-off in building Q can erase a tiny gap
        return
    for activation, omega in [("erf", None), ("relu", None), ("leaky_relu", slope)]:
        factor = ab.attenuation(Q, activation, omega)
        # Equality A = 1 is attained (e.g. α_Q = 1 for erf, λ_G = λ_C = 0 for ReLU), so allow
        # a few ulps above 1. No counterexample turned up in this test or in an optimiser
        # search over the four eigenvalues.
        assert 0.0 <= factor <= 1.0 + 1e-12, (activation, omega, factor)


@pytest.mark.parametrize("activation,slope", ACTIVATIONS)
def test_attenuation_matches_the_dual_kernel_alpha(activation, slope):
    # Two independent routes: α of the full dual kernel over α_Q, and the cancellation-free
    # eigenvalue formulas of `attenuation`.
    rng = np.random.default_rng(1)
    for _ in range(30):
        eigenvalues = rng.exponential(size=4) * [1.0, 1.0, 1.0, 0.9]
        Q = ab.two_factor_kernel(eigenvalues)
        via_kernel = ab.decompose_2fs(ab.dual_kernel(Q, activation, slope)).alpha / (
            ab.decompose_2fs(Q).alpha
        )
        assert ab.attenuation(Q, activation, slope) == pytest.approx(via_kernel, rel=1e-9)


def test_attenuation_equality_cases():
    # Linear activation (leaky slope 1) leaves α unchanged; slope 0 is ReLU.
    Q = kernel(0.3, 1.0, 2.0, 0.2)
    assert ab.attenuation(Q, "leaky_relu", 1.0) == pytest.approx(1.0)
    assert ab.attenuation(Q, "leaky_relu", 0.0) == pytest.approx(ab.attenuation(Q, "relu"))
    # Perfect abstraction survives erf: α_Q = 1 gives α_K = 1.
    assert ab.attenuation(kernel(0.0, 1.0, 0.5, 0.0), "erf") == pytest.approx(1.0)


def test_attenuation_is_accurate_when_one_mode_dwarfs_the_rest():
    # The signal is 1e-12 of the background: naive kernel differences would lose all digits.
    tiny = kernel(1e6, 1e-6, 1.0, 5e-7)
    small = kernel(1.0, 1e-12, 1e-6, 5e-13)  # the same shape scaled by 1e-6
    relu_tiny = ab.attenuation(tiny, "relu")
    assert relu_tiny == pytest.approx(ab.attenuation(small, "relu"), rel=1e-9)  # homogeneous
    assert 0.0 < relu_tiny <= 1.0


# --- invalid arguments ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: ab.decompose_2fs(np.triu(np.ones((4, 4)))), "symmetric"),
        (lambda: ab.decompose_2fs(np.eye(4) + 0.1 * np.eye(4)[[1, 0, 2, 3]]), "2FS"),
        (lambda: ab.decompose_2fs(np.diag([1.0, 2.0, 3.0, 4.0])), "2FS"),
        (
            lambda: ab.decompose_2fs(kernel(1, 1, 1, 1) - 2 * np.outer(*[ab.MODE_BASIS[:, 3]] * 2)),
            "semi-definite",
        ),
        (lambda: ab.decompose_2fs(np.eye(3)), "4x4"),
        (lambda: ab.decompose_class_means(np.ones((3, 5))), r"\[4, d\]"),
        (lambda: ab.two_factor_kernel([1, -1, 1, 1]), ">= 0"),
        (lambda: ab.alpha_from_nu(-0.1), "nu >= 0"),
        (lambda: ab.alpha_trajectory(SIGMA_X, SIGMA_Y, GAMMA, 0.0, [1.0]), "kappa > 0"),
        (lambda: ab.alpha_trajectory(SIGMA_X, SIGMA_Y, -1.0, 0.1, [1.0]), "gamma > 0"),
        (lambda: ab.alpha_trajectory(SIGMA_X, SIGMA_Y, GAMMA, 0.1, [-1.0]), "times >= 0"),
        (lambda: ab.alpha_trajectory(SIGMA_X, SIGMA_Y, GAMMA, 0.1, [1.0], depth=0), "depth"),
        (lambda: ab.alpha_trajectory(SIGMA_X + np.diag([0.1, 0, 0, 0]), SIGMA_Y, 1, 1, [1]), "2FS"),
        (lambda: ab.alpha_trajectory(kernel(1, 0, 1, 0), SIGMA_Y, 1, 1, [1]), "undefined"),
        (lambda: ab.alpha_max(SIGMA_X, kernel(1, 0, 1, 1), GAMMA, 0.1), "lambda_S > 0"),
        (lambda: ab.plateau_length(SIGMA_X, SIGMA_Y, GAMMA, 0.1, level=1.0), "level"),
        (lambda: ab.depth_terminal(0.2, 0.5, 0), "depth L"),
        (lambda: ab.depth_terminal(0.2, 0.5, 2.5), "integer"),
        (lambda: ab.depth_terminal(1.2, 0.5, 2), r"\[-1, 1\]"),
        (lambda: ab.depth_terminal(1.0, -1.0, 2), "undefined"),
        (lambda: ab.attenuation(SIGMA_X, "gelu"), "unknown activation"),
        (lambda: ab.attenuation(SIGMA_X, "leaky_relu"), "slope"),
        (lambda: ab.attenuation(SIGMA_X, "leaky_relu", 1.5), r"\[0, 1\]"),
        (lambda: ab.attenuation(SIGMA_X, "relu", 0.1), "leaky_relu only"),
        (lambda: ab.attenuation(kernel(1, 0.5, 1, 0.5), "erf"), "alpha_Q"),
        (lambda: ab.dual_kernel(-np.eye(3), "relu"), "semi-definite"),
        (lambda: ab.clock(-1.0), "a >= 0"),
    ],
)
def test_invalid_arguments_raise_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()

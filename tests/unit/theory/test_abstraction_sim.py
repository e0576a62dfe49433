"""The closed forms of the 2FS abstraction theory against its simulators (docs/theory.md#abstraction-two-factor-model):
gradient descent with the exact ridge readout, deep linear networks, random features."""

import numpy as np
import pytest
import torch

from geomlens.theory import abstraction as ab
from geomlens.theory import abstraction_sim as sim

# Three (Σ_x, Σ_y, γ, κ): rich start with a long plateau, a moderate one where α_y < α_x, and
# a very small κ with a clean target.
CONFIGS = [
    ((1.0, 2.0, 1.0, 0.5), (1.0, 1.0, 1.0, 0.2), 2.0, 1e-3),
    ((0.5, 1.0, 2.0, 0.8), (1.0, 2.0, 0.5, 0.6), 5.0, 1e-2),
    ((1.0, 1.5, 1.0, 1.0), (0.3, 1.0, 1.0, 0.1), 1.0, 1e-4),
]


def make_data(input_modes, target_modes):
    return sim.two_factor_data(input_modes, 6, seed=1), sim.two_factor_data(target_modes, 5, seed=2)


def flow_velocity(Q, sigma_x, sigma_y, gamma):
    """dQ/dt = γ(Σ_x M Q + Q M Σ_x), M = (I + γQ)⁻¹ Σ_y (I + γQ)⁻¹ (docs/theory.md#abstraction-two-factor-model)."""
    resolvent = np.linalg.inv(np.eye(len(Q)) + gamma * Q)
    M = resolvent @ sigma_y @ resolvent
    return gamma * (sigma_x @ M @ Q + Q @ M @ sigma_x)


def test_two_factor_data_has_the_prescribed_kernel():
    x = sim.two_factor_data([0.5, 2.0, 1.0, 0.1], 7, seed=3)
    assert x.shape == (4, 7)
    assert x @ x.T == pytest.approx(ab.two_factor_kernel([0.5, 2.0, 1.0, 0.1]), abs=1e-14)


# --- exactness of the variable-projection simulator -----------------------------------------


@pytest.mark.parametrize("depth", [1, 3])
def test_readout_gradient_is_the_gradient_of_the_reduced_loss(depth):
    # Envelope theorem: the gradient at the optimal readout equals the autograd gradient of
    # L*(W) = ½ Tr Σ_y (I + γQ)⁻¹, Q = Z_L Z_Lᵀ. Generic (not 2FS) data and weights.
    rng = np.random.default_rng(0)
    x, y, gamma = rng.standard_normal((4, 5)), rng.standard_normal((4, 3)), 1.7
    weights = [rng.standard_normal((5, 6)) * 0.5] + [
        rng.standard_normal((6, 6)) * 0.5 for _ in range(depth - 1)
    ]
    tensors = [torch.tensor(w, requires_grad=True) for w in weights]
    representation = torch.tensor(x)
    for tensor in tensors:
        representation = representation @ tensor
    Q = representation @ representation.T
    sigma_y = torch.tensor(y @ y.T)
    reduced = 0.5 * torch.trace(sigma_y @ torch.linalg.inv(torch.eye(4, dtype=Q.dtype) + gamma * Q))
    reduced.backward()
    for simulated, tensor in zip(sim.loss_gradients(weights, x, y, gamma), tensors):
        assert simulated == pytest.approx(tensor.grad.numpy(), rel=1e-10, abs=1e-12)


def test_simulated_kernel_velocity_is_the_matrix_flow():
    # dQ/dt of gradient flow on W, from the simulator's gradient and from one tiny step of its
    # gradient descent, equals γ(Σ_x M Q + Q M Σ_x) for generic data and a random W.
    rng = np.random.default_rng(4)
    x, y, gamma = rng.standard_normal((4, 5)), rng.standard_normal((4, 2)), 0.8
    (weight,) = sim.initial_weights(5, 7, 1, 0.6, init="gaussian", seed=5)
    Q = x @ weight @ weight.T @ x.T
    expected = flow_velocity(Q, x @ x.T, y @ y.T, gamma)
    (gradient,) = sim.loss_gradients([weight], x, y, gamma)
    velocity = -x @ (gradient @ weight.T + weight @ gradient.T) @ x.T
    assert velocity == pytest.approx(expected, rel=1e-10, abs=1e-12)
    step = 1e-6
    run = sim.train_linear_network(
        x,
        y,
        gamma=gamma,
        kappa=0.6,
        learning_rate=step,
        steps=1,
        hidden_dim=7,
        init="gaussian",
        seed=5,
    )
    finite_difference = (run.kernels[1, 0] - run.kernels[0, 0]) / step
    assert finite_difference == pytest.approx(expected, rel=1e-4, abs=1e-6)


def test_matrix_flow_reduces_to_the_mode_ode_on_the_common_eigenbasis():
    # Aligned start W(0) = √κ · orthonormal rows gives Q(0) = κ Σ_x; in the Hadamard basis the
    # velocity is diagonal with entries 2γ λ λ^x λ^y / (1 + γλ)², and training keeps Q 2FS.
    input_modes, target_modes = np.array([0.5, 2.0, 1.0, 0.3]), np.array([1.0, 0.7, 1.5, 0.2])
    x, y = make_data(input_modes, target_modes)
    gamma, kappa = 3.0, 0.2
    run = sim.train_linear_network(
        x, y, gamma=gamma, kappa=kappa, learning_rate=0.01, steps=300, record_every=100
    )
    assert run.kernels[0, 0] == pytest.approx(kappa * x @ x.T, abs=1e-14)
    for Q in run.kernels[:, 0]:
        velocity = ab.MODE_BASIS.T @ flow_velocity(Q, x @ x.T, y @ y.T, gamma) @ ab.MODE_BASIS
        modes = np.array(ab.decompose_2fs(Q, tolerance=1e-10))
        mode_ode = 2 * gamma * modes * input_modes * target_modes / (1 + gamma * modes) ** 2
        assert velocity == pytest.approx(np.diag(mode_ode), abs=1e-12)


# --- two-layer network: α(t), α_max, α_∞ ----------------------------------------------------


@pytest.mark.parametrize("input_modes,target_modes,gamma,kappa", CONFIGS)
def test_gradient_descent_follows_the_exact_alpha_trajectory(
    input_modes, target_modes, gamma, kappa
):
    x, y = make_data(input_modes, target_modes)
    sigma_x, sigma_y = ab.two_factor_kernel(input_modes), ab.two_factor_kernel(target_modes)
    errors = []
    for learning_rate in (0.01, 0.005):
        run = sim.train_linear_network(
            x,
            y,
            gamma=gamma,
            kappa=kappa,
            learning_rate=learning_rate,
            steps=round(30 / learning_rate),
            record_every=round(0.1 / learning_rate),
        )
        simulated = run.alphas()[:, 0]
        exact = ab.alpha_trajectory(sigma_x, sigma_y, gamma, kappa, run.times)
        errors.append(np.max(np.abs(simulated - exact)))
    # Measured max |Δα|: 0.0029, 0.0084, 0.0027 at learning rate 0.01 and 0.0015, 0.0042,
    # 0.0014 at 0.005: halving the step halves the gap, the O(step) error of gradient descent
    # against the exact flow.
    assert errors[1] <= 0.0045
    assert errors[1] == pytest.approx(errors[0] / 2, rel=0.1)
    assert simulated.max() == pytest.approx(ab.alpha_max(sigma_x, sigma_y, gamma, kappa), abs=5e-3)


def test_gaussian_start_departs_from_the_exact_trajectory_by_its_initial_kernel():
    # The closed form assumes Q(0) = κ Σ_x. A wide i.i.d. Gaussian start has that kernel only in
    # expectation; with 256 hidden units it stays within 0.02–0.03 of the exact α(t)
    # (measured 0.020, 0.030, 0.029 for the three configurations), most of it inherited
    # from α(0).
    departures = []
    for input_modes, target_modes, gamma, kappa in CONFIGS:
        x, y = make_data(input_modes, target_modes)
        run = sim.train_linear_network(
            x,
            y,
            gamma=gamma,
            kappa=kappa,
            learning_rate=0.01,
            steps=3000,
            record_every=10,
            hidden_dim=256,
            init="gaussian",
        )
        exact = ab.alpha_trajectory(
            ab.two_factor_kernel(input_modes),
            ab.two_factor_kernel(target_modes),
            gamma,
            kappa,
            run.times,
        )
        departures.append(np.max(np.abs(run.alphas()[:, 0] - exact)))
    assert departures == pytest.approx([0.0197, 0.0303, 0.0295], abs=2e-3)


def test_long_time_simulation_approaches_alpha_terminal():
    # α_∞ = (1 − √ν̄)/(1 + √ν̄) is approached like t^(−1/2); by t = 1000 the exact gap is 0.0056.
    input_modes, target_modes, gamma, kappa = (1, 1, 1, 0.5), (1, 1, 1, 0.4), 10.0, 1e-2
    x, y = make_data(input_modes, target_modes)
    run = sim.train_linear_network(
        x, y, gamma=gamma, kappa=kappa, learning_rate=0.1, steps=10_000, record_every=1000
    )
    simulated = run.alphas()[:, 0]
    terminal = ab.alpha_terminal(0.5, 0.4)
    exact = ab.alpha_trajectory(
        ab.two_factor_kernel(input_modes),
        ab.two_factor_kernel(target_modes),
        gamma,
        kappa,
        run.times,
    )
    assert np.max(np.abs(simulated - exact)) < 2e-3
    late_gaps = simulated[3:] - terminal
    assert np.all(np.diff(late_gaps) < 0) and 0 < late_gaps[-1] < 0.007


# --- depth ----------------------------------------------------------------------------------

DEPTH_INPUT, DEPTH_TARGET, DEPTH_GAMMA, DEPTH_KAPPA = (1, 1, 1, 0.6), (1, 1, 1, 0.2), 10.0, 0.5


def train_deep(depth, init, steps, hidden_dim, learning_rate=0.02, record_every=250, seed=0):
    x, y = sim.two_factor_data(DEPTH_INPUT, 6, 1), sim.two_factor_data(DEPTH_TARGET, 4, 2)
    return sim.train_linear_network(
        x,
        y,
        gamma=DEPTH_GAMMA,
        kappa=DEPTH_KAPPA,
        learning_rate=learning_rate,
        steps=steps,
        depth=depth,
        hidden_dim=hidden_dim,
        record_every=record_every,
        init=init,
        seed=seed,
    )


@pytest.mark.parametrize("depth", [2, 4, 6, 8])
def test_balanced_deep_network_follows_the_depth_laws(depth):
    sigma_x, sigma_y = ab.two_factor_kernel(DEPTH_INPUT), ab.two_factor_kernel(DEPTH_TARGET)
    alpha_x, alpha_y = ab.decompose_2fs(sigma_x).alpha, ab.decompose_2fs(sigma_y).alpha
    run = train_deep(depth, "aligned", steps=5000, hidden_dim=6)
    alphas = run.alphas()
    # Per-layer law: exact at every time for the balanced, mode-aligned network.
    per_layer = ab.depth_per_layer(alpha_x, alphas[:, -1], depth)[:, 1:]
    assert np.max(np.abs(per_layer - alphas)) < 1e-9
    # The last layer follows the exact depth-L clock (measured ≤ 4e-4)...
    exact = ab.alpha_trajectory(sigma_x, sigma_y, DEPTH_GAMMA, DEPTH_KAPPA, run.times, depth)
    assert np.max(np.abs(alphas[:, -1] - exact)) < 2e-3
    # ...and approaches the terminal law from above: at t = 100 it is 0.017–0.030 away (the
    # clock's finite-time gap), still shrinking. The law is the t → ∞ limit, reached slowly.
    law = ab.depth_terminal(alpha_x, alpha_y, depth)
    late_gaps = alphas[-4:, -1] - law
    assert np.all(np.diff(late_gaps) < 0) and 0 < late_gaps[-1] < 0.035
    assert late_gaps[-1] == pytest.approx(exact[-1] - law, abs=2e-3)


def test_terminal_abstraction_of_simulated_deep_networks_rises_with_depth():
    alpha_x, alpha_y = ab.alpha_from_nu(0.6), ab.alpha_from_nu(0.2)
    laws = [ab.depth_terminal(alpha_x, alpha_y, depth) for depth in (2, 4, 6, 8)]
    assert np.all(np.diff(laws) > 0)
    finals = [train_deep(depth, "aligned", 5000, 6).alphas()[-1, -1] for depth in (2, 4, 6, 8)]
    # At t = 100 the simulated last layers keep the law's order (measured 0.570, 0.618, 0.640,
    # 0.661 against laws 0.552, 0.601, 0.621, 0.631), each still above its limit.
    assert np.all(np.diff(finals) > 0)
    assert np.all(np.array(finals) > laws)


def test_unbalanced_gaussian_start_departs_from_the_per_layer_law():
    # Where the simulation departs from the laws: an i.i.d. Gaussian start (κ = 0.5, 64 units)
    # is neither balanced nor aligned. The last layer still ends near the terminal law, but the
    # intermediate layers keep an O(κ) imbalance that decays only slowly, so the per-layer
    # artanh interpolation is off by several hundredths at t = 400 (more for deeper nets).
    alpha_x, alpha_y = ab.alpha_from_nu(0.6), ab.alpha_from_nu(0.2)
    measured = {}
    for depth in (2, 8):
        alphas = train_deep(depth, "gaussian", 20_000, 64, record_every=5000).alphas()
        per_layer = ab.depth_per_layer(alpha_x, alphas[:, -1], depth)[:, 1:]
        measured[depth] = (
            np.max(np.abs(per_layer - alphas), axis=1),
            alphas[-1, -1] - ab.depth_terminal(alpha_x, alpha_y, depth),
        )
    per_layer_gap_2, terminal_gap_2 = measured[2]
    per_layer_gap_8, terminal_gap_8 = measured[8]
    # Measured, at t = 0, 100, 200, 300, 400: per-layer departure 0.038, 0.012, 0.011, 0.010,
    # 0.0095 (L = 2) and 0.126, 0.076, 0.072, 0.070, 0.068 (L = 8); last layer minus law at
    # t = 400: +0.0027 (L = 2) and −0.0010 (L = 8): the deep Gaussian network has crossed below
    # the law that the balanced one approaches from above.
    assert per_layer_gap_2 == pytest.approx([0.0375, 0.0117, 0.0108, 0.0100, 0.0095], abs=1e-3)
    assert per_layer_gap_8 == pytest.approx([0.1257, 0.0762, 0.0720, 0.0696, 0.0680], abs=3e-3)
    assert terminal_gap_2 == pytest.approx(0.0027, abs=5e-4)
    assert terminal_gap_8 == pytest.approx(-0.0010, abs=5e-4)


# --- random features ------------------------------------------------------------------------

KERNELS = [(1.0, 1.0, 0.5, 0.3), (3.0, 0.5, 2.0, 0.1), (0.1, 2.0, 0.2, 1.5), (0.0, 1.0, 0.0, 0.5)]
ACTIVATIONS = [("erf", None), ("relu", None), ("leaky_relu", 0.1)]


@pytest.mark.parametrize("activation,slope", ACTIVATIONS)
def test_dual_kernels_match_random_features(activation, slope):
    width = 400_000
    for seed, eigenvalues in enumerate(KERNELS):
        Q = ab.two_factor_kernel(eigenvalues)
        estimate = sim.random_feature_kernel(Q, activation, slope, width=width, seed=seed)
        # Standard error of a mean of φ_i φ_j: at most 1/√width for erf (|φ| ≤ 1); for the
        # rectifiers E[φ_i² φ_j²] ≤ √(E φ_i⁴ E φ_j⁴) = 3/2 Q_ii Q_jj.
        diagonal = np.diag(Q)
        scale = 1.0 if activation == "erf" else np.sqrt(1.5 * np.outer(diagonal, diagonal))
        tolerance = 5.0 * scale / np.sqrt(width)
        assert np.all(np.abs(estimate - ab.dual_kernel(Q, activation, slope)) <= tolerance)


@pytest.mark.parametrize("activation,slope", ACTIVATIONS)
def test_attenuation_matches_random_features(activation, slope):
    for seed, eigenvalues in enumerate(KERNELS):
        Q = ab.two_factor_kernel(eigenvalues)
        estimate, error = sim.random_feature_attenuation(
            Q, activation, slope, width=400_000, seed=10 + seed
        )
        assert abs(estimate - ab.attenuation(Q, activation, slope)) <= 4 * error
        assert error < 0.012


# --- invalid arguments ----------------------------------------------------------------------

X, Y = make_data((1, 1, 1, 0.5), (1, 1, 1, 0.5))


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: sim.two_factor_data([1, 1, 1], 5), "four"),
        (lambda: sim.two_factor_data([1, 1, 1, -1], 5), ">= 0"),
        (lambda: sim.two_factor_data([1, 1, 1, 1], 3), "dim >= 4"),
        (lambda: sim.initial_weights(6, 4, 1, 0.1), "hidden_dim >= input_dim"),
        (lambda: sim.initial_weights(6, 6, 0, 0.1), "depth >= 1"),
        (lambda: sim.initial_weights(6, 6, 1, 0.0), "kappa > 0"),
        (lambda: sim.initial_weights(6, 6, 1, 0.1, init="xavier"), "unknown init"),
        (
            lambda: sim.train_linear_network(
                X[:3], Y, gamma=1, kappa=1, learning_rate=0.1, steps=1
            ),
            r"\[4, d_x\]",
        ),
        (
            lambda: sim.train_linear_network(X, Y, gamma=0, kappa=1, learning_rate=0.1, steps=1),
            "gamma > 0",
        ),
        (
            lambda: sim.train_linear_network(X, Y, gamma=1, kappa=1, learning_rate=0.1, steps=-1),
            "steps >= 0",
        ),
        (lambda: sim.random_feature_kernel(np.eye(4), "tanh"), "unknown activation"),
        (lambda: sim.random_feature_kernel(-np.eye(4), "relu"), "semi-definite"),
        (lambda: sim.random_feature_attenuation(np.diag([1.0, 2, 3, 4]), "relu"), "2FS"),
    ],
)
def test_invalid_simulator_arguments_raise_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()

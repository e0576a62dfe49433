"""Simulators for the 2FS abstraction theory: the closed forms of ``abstraction`` are checked
against them (docs/theory.md#abstraction-dynamics).

- ``two_factor_data`` builds class means whose kernel is 2FS with prescribed eigenvalues.
- ``train_linear_network`` trains the two-layer (``depth=1``) or deep linear network by plain
  gradient descent on its first ``depth`` weight matrices, with the ridge readout solved
  exactly before every step (variable projection). By the envelope theorem the gradient of the
  loss at the optimal readout is the gradient of the reduced loss ``L*(W)``, so gradient
  descent here discretises exactly the flow that the closed forms solve; the time of step
  ``k`` is ``k · learning_rate``.
- ``random_feature_kernel`` and ``random_feature_attenuation`` estimate the infinite-width
  post-activation kernel by Monte Carlo over random first-layer features.

Conventions (class order, kernels ``X Xᵀ``, the loss and its factors) are those of
``abstraction``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import erf

from geomlens.theory.abstraction import (
    MODE_BASIS,
    Activation,
    _check_activation,
    abstraction_cosine,
    decompose_2fs,
)

Initialisation = Literal["aligned", "gaussian"]


def two_factor_data(eigenvalues: ArrayLike, dim: int, seed: int = 0) -> np.ndarray:
    """Class means ``[4, dim]`` (rows in ``CLASS_ORDER``) whose kernel ``X Xᵀ`` is the 2FS
    kernel with eigenvalues ``(λ_G, λ_S, λ_C, λ_SC)``.

    Mode ``m`` is carried by its own direction of a random orthonormal frame, so the data is
    ``Σ_m √λ_m v_m e_mᵀ``: the exact square root of the kernel, rotated.
    """
    spectrum = np.asarray(eigenvalues, dtype=float)
    if spectrum.shape != (4,) or not np.all(np.isfinite(spectrum)) or np.any(spectrum < 0.0):
        raise ValueError(
            f"expected four finite eigenvalues >= 0 (G, S, C, SC), got {str(eigenvalues)}"
        )
    if dim < 4:
        raise ValueError(f"expected dim >= 4 so that the four modes fit, got {dim}")
    frame, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((dim, 4)))
    root = MODE_BASIS * np.sqrt(spectrum)
    return root @ frame.T


def initial_weights(
    input_dim: int,
    hidden_dim: int,
    depth: int,
    kappa: float,
    init: Initialisation = "aligned",
    seed: int = 0,
) -> list[np.ndarray]:
    """First ``depth`` weight matrices, ``[input_dim, hidden_dim]`` then ``[hidden_dim,
    hidden_dim]``, each with ``W Wᵀ = κ I`` exactly (``"aligned"``: √κ times orthonormal rows,
    the start the closed forms assume) or in expectation (``"gaussian"``: i.i.d.
    ``N(0, κ / hidden_dim)``, which is neither balanced nor aligned with the modes).
    """
    if depth < 1:
        raise ValueError(f"expected depth >= 1, got {depth}")
    if not kappa > 0.0:
        raise ValueError(f"expected kappa > 0, got {kappa}")
    if hidden_dim < input_dim:
        raise ValueError(
            f"expected hidden_dim >= input_dim so that W Wᵀ = κ I is possible, got "
            f"{hidden_dim} < {input_dim}"
        )
    if init not in ("aligned", "gaussian"):
        raise ValueError(f"unknown init {init!r}; expected 'aligned' or 'gaussian'")
    rng = np.random.default_rng(seed)
    shapes = [(input_dim, hidden_dim)] + [(hidden_dim, hidden_dim)] * (depth - 1)
    weights = []
    for rows, columns in shapes:
        if init == "aligned":
            orthogonal, _ = np.linalg.qr(rng.standard_normal((columns, columns)))
            weights.append(np.sqrt(kappa) * orthogonal[:rows])
        else:
            weights.append(rng.standard_normal((rows, columns)) * np.sqrt(kappa / columns))
    return weights


def ridge_readout(representation: np.ndarray, targets: np.ndarray, gamma: float) -> np.ndarray:
    """The readout ``R = argmin ½‖Z R − Y‖² + ‖R‖²/(2γ) = Zᵀ (Z Zᵀ + I/γ)⁻¹ Y``."""
    samples = representation.shape[0]
    system = representation @ representation.T + np.eye(samples) / gamma
    return representation.T @ np.linalg.solve(system, targets)


def loss_gradients(
    weights: list[np.ndarray], x: np.ndarray, y: np.ndarray, gamma: float
) -> list[np.ndarray]:
    """Gradients of ``½‖Z_L R − Y‖² + ‖R‖²/(2γ)`` with respect to each ``W_ℓ``, taken at the
    exact ridge readout ``R`` (variable projection), by backpropagation through the layers."""
    activations = [x]
    for weight in weights:
        activations.append(activations[-1] @ weight)
    readout = ridge_readout(activations[-1], y, gamma)
    upstream = (activations[-1] @ readout - y) @ readout.T  # ∂L/∂Z_L
    gradients = []
    for layer in range(len(weights) - 1, -1, -1):
        gradients.append(activations[layer].T @ upstream)
        upstream = upstream @ weights[layer].T
    return gradients[::-1]


@dataclass(frozen=True)
class LinearRun:
    """Recorded training of a linear network.

    Attributes:
        times: gradient-flow time ``step · learning_rate`` of each record, ``[T]``.
        kernels: hidden kernels ``Q_ℓ = Z_ℓ Z_ℓᵀ`` for ``ℓ = 1..L``, ``[T, L, 4, 4]``.
    """

    times: np.ndarray
    kernels: np.ndarray

    def alphas(self) -> np.ndarray:
        """Abstraction cosine of every hidden layer at every record, ``[T, L]``."""
        return np.array(
            [[abstraction_cosine(kernel) for kernel in layers] for layers in self.kernels]
        )


def train_linear_network(
    x: ArrayLike,
    y: ArrayLike,
    *,
    gamma: float,
    kappa: float,
    learning_rate: float,
    steps: int,
    depth: int = 1,
    hidden_dim: int | None = None,
    record_every: int = 1,
    init: Initialisation = "aligned",
    seed: int = 0,
) -> LinearRun:
    """Train the linear network on class means ``x`` ``[4, d_x]`` and targets ``y``
    ``[4, d_y]`` by gradient descent with the exact ridge readout ``1/γ`` (docs/theory.md#abstraction-dynamics).

    ``depth`` hidden layers (``1``: the two-layer network). ``hidden_dim`` defaults to
    ``d_x``. Records are taken every ``record_every`` steps, including step 0 and the last.
    """
    inputs = np.asarray(x, dtype=float)
    targets = np.asarray(y, dtype=float)
    if inputs.ndim != 2 or targets.ndim != 2 or inputs.shape[0] != 4 or targets.shape[0] != 4:
        raise ValueError(
            f"expected class means x [4, d_x] and y [4, d_y], got {inputs.shape} and "
            f"{targets.shape}"
        )
    if not gamma > 0.0 or not learning_rate > 0.0:
        raise ValueError(f"expected gamma > 0 and learning_rate > 0, got {gamma}, {learning_rate}")
    if steps < 0 or record_every < 1:
        raise ValueError(f"expected steps >= 0 and record_every >= 1, got {steps}, {record_every}")
    width = inputs.shape[1] if hidden_dim is None else hidden_dim
    weights = initial_weights(inputs.shape[1], width, depth, kappa, init, seed)
    times, kernels = [], []
    for step in range(steps + 1):
        if step % record_every == 0 or step == steps:
            times.append(step * learning_rate)
            kernels.append(_hidden_kernels(weights, inputs))
        if step < steps:
            gradients = loss_gradients(weights, inputs, targets, gamma)
            weights = [w - learning_rate * g for w, g in zip(weights, gradients)]
    return LinearRun(times=np.array(times), kernels=np.array(kernels))


def random_feature_kernel(
    Q: ArrayLike,
    activation: Activation,
    slope: float | None = None,
    width: int = 100_000,
    seed: int = 0,
) -> np.ndarray:
    """Monte-Carlo post-activation kernel ``φ(Z W) φ(Z W)ᵀ / width`` with ``Z Zᵀ = Q`` and
    ``W`` i.i.d. ``N(0, 1)`` ``[n, width]``: a random-feature layer of finite width."""
    features = _random_features(Q, activation, slope, width, seed)
    return features @ features.T / width


def random_feature_attenuation(
    Q: ArrayLike,
    activation: Activation,
    slope: float | None = None,
    width: int = 1_000_000,
    seed: int = 0,
) -> tuple[float, float]:
    """Monte-Carlo estimate of ``A_φ(Q) = α_K / α_Q`` and its standard error.

    ``α_K = Σ_k n_k / Σ_k d_k`` over features ``k`` with ``n_k = (v_S·φ_k)² − (v_SC·φ_k)²`` and
    ``d_k = (v_S·φ_k)² + (v_SC·φ_k)²``; the standard error is the delta method's for a ratio.
    """
    spectrum = decompose_2fs(Q)
    features = _random_features(Q, activation, slope, width, seed)
    signal = (MODE_BASIS[:, 1] @ features) ** 2
    interaction = (MODE_BASIS[:, 3] @ features) ** 2
    numerator, denominator = signal - interaction, signal + interaction
    alpha = numerator.mean() / denominator.mean()
    error = np.std(numerator - alpha * denominator) / (np.sqrt(width) * denominator.mean())
    return float(alpha / spectrum.alpha), float(error / abs(spectrum.alpha))


def _random_features(
    Q: ArrayLike, activation: Activation, slope: float | None, width: int, seed: int
) -> np.ndarray:
    omega = _check_activation(activation, slope)
    matrix = np.asarray(Q, dtype=float)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"expected a square kernel Q, got shape {matrix.shape}")
    eigenvalues, eigenvectors = np.linalg.eigh(0.5 * (matrix + matrix.T))
    if eigenvalues.min() < -1e-8 * max(abs(eigenvalues).max(), 1e-300):
        raise ValueError("expected a positive semi-definite kernel Q")
    root = eigenvectors * np.sqrt(np.clip(eigenvalues, 0.0, None))
    rng = np.random.default_rng(seed)
    preactivations = root @ rng.standard_normal((matrix.shape[0], width))
    if activation == "erf":
        return erf(preactivations)
    return np.where(preactivations > 0.0, preactivations, omega * preactivations)


def _hidden_kernels(weights: list[np.ndarray], inputs: np.ndarray) -> np.ndarray:
    kernels = []
    representation = inputs
    for weight in weights:
        representation = representation @ weight
        kernels.append(representation @ representation.T)
    return np.array(kernels)

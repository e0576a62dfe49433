"""Closed forms of the two-factor symmetric (2FS) abstraction model (docs/theory.md#abstraction-two-factor-model).

Conventions, fixed here so that the closed forms and the simulators in ``abstraction_sim``
agree exactly (every factor below is derived, none is fitted):

- Four classes ``(s, c)`` in the order ``CLASS_ORDER`` = (+1, +1), (+1, −1), (−1, +1), (−1, −1).
  Class-mean data is an array ``[4, d]`` whose rows follow that order.
- Kernels are 4 × 4 Gram matrices over the class means: ``Σ_x = X Xᵀ``, ``Σ_y = Y Yᵀ`` and the
  representation kernel ``Q = Z Zᵀ`` with ``Z = X W`` (``W`` is ``[d_x, h]``).
- A 2FS-symmetric kernel is diagonal in the Hadamard basis ``MODE_BASIS`` (columns ``v_G, v_S,
  v_C, v_SC`` = ½(1, 1, 1, 1), ½ s, ½ c, ½ s∘c); its eigenvalues are ``λ_m = v_mᵀ Σ v_m``.
  They are squared norms: ``λ_S = ¼‖u₊ + u₋‖²`` and ``λ_SC = ¼‖u₊ − u₋‖²`` for the difference
  vectors ``u_c = μ(+1, c) − μ(−1, c)``, hence ``cos(u₊, u₋) = (λ_S − λ_SC)/(λ_S + λ_SC)``.
- Loss ``½‖Z R − Y‖²_F + ‖R‖²_F / (2γ)`` with the readout ``R`` solved exactly (variable
  projection) leaves ``L*(W) = ½ Tr Σ_y (I + γQ)⁻¹``. Gradient flow ``dW/dt = −∂L*/∂W =
  γ Xᵀ M X W`` with ``M = (I + γQ)⁻¹ Σ_y (I + γQ)⁻¹`` gives ``dQ/dt = γ(Σ_x M Q + Q M Σ_x)``;
  on the common eigenbasis each mode obeys ``dλ/dt = 2γ λ λ^x λ^y / (1 + γλ)²``.
- Depth ``L`` counts hidden layers (``L = 1`` is the two-layer network): ``Z_ℓ = X W_1 ⋯ W_ℓ``
  and the readout acts on ``Z_L``. Every ``W_ℓ`` starts as ``√κ`` times a matrix with
  orthonormal rows, so ``λ_m(0) = κ^L λ^x_m`` (``κ λ^x_m`` for the two-layer network, the
  default of docs/theory.md#abstraction-dynamics). That start is balanced and aligned with the modes, which the flow keeps, so
  ``dλ/dt = 2Lγ λ^(2 − 1/L) (λ^x)^(1/L) λ^y / (1 + γλ)²`` for the last hidden layer.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import brentq, minimize_scalar

CLASS_ORDER = ((+1, +1), (+1, -1), (-1, +1), (-1, -1))
"""The (s, c) label of each row of class-mean data and of each row/column of a kernel."""

MODES = ("G", "S", "C", "SC")
"""Names of the 2FS modes: global mean, signal (concept s), context (c), interaction (s∘c)."""

_CONCEPT, _CONTEXT = np.array(CLASS_ORDER, dtype=float).T
MODE_BASIS = 0.5 * np.stack([np.ones(4), _CONCEPT, _CONTEXT, _CONCEPT * _CONTEXT], axis=1)
"""Orthonormal Hadamard basis; column ``m`` is ``v_m`` for ``m`` in ``MODES``."""

TOLERANCE = 1e-8
"""Default relative tolerance for symmetry, 2FS structure and non-negative eigenvalues."""

Activation = Literal["erf", "relu", "leaky_relu"]
ACTIVATIONS = ("erf", "relu", "leaky_relu")


class ModeSpectrum(NamedTuple):
    """Eigenvalues of a 2FS kernel, one per mode (docs/theory.md#abstraction-two-factor-model)."""

    G: float
    S: float
    C: float
    SC: float

    @property
    def nu(self) -> float:
        """Inverse signal-to-noise ratio ``ν = λ_SC / λ_S``."""
        if self.S == 0.0:
            return np.inf if self.SC > 0.0 else np.nan
        return self.SC / self.S

    @property
    def alpha(self) -> float:
        """Abstraction cosine ``α = (λ_S − λ_SC)/(λ_S + λ_SC) = (1 − ν)/(1 + ν)``."""
        if self.S + self.SC == 0.0:
            return np.nan
        return (self.S - self.SC) / (self.S + self.SC)


# --- 2FS decomposition -----------------------------------------------------------------------


def two_factor_kernel(eigenvalues: ArrayLike) -> np.ndarray:
    """The 2FS kernel ``Σ_m λ_m v_m v_mᵀ`` with the given ``(λ_G, λ_S, λ_C, λ_SC)``."""
    spectrum = _nonnegative(eigenvalues, "eigenvalues", shape=(4,))
    return MODE_BASIS @ np.diag(spectrum) @ MODE_BASIS.T


def decompose_2fs(kernel: ArrayLike, tolerance: float = TOLERANCE) -> ModeSpectrum:
    """Eigenvalues ``λ_m = v_mᵀ Σ v_m`` of a 2FS-symmetric 4 × 4 kernel (docs/theory.md#abstraction-two-factor-model).

    Rows and columns follow ``CLASS_ORDER``. ``tolerance`` is relative to the largest entry:
    asymmetry, off-diagonal mass in the Hadamard basis or negative eigenvalues beyond it raise
    ``ValueError``; negative eigenvalues within it (round-off) are clipped to zero.
    """
    matrix = np.asarray(kernel, dtype=float)
    if matrix.shape != (4, 4):
        raise ValueError(
            f"expected a 4x4 kernel over the classes ordered {CLASS_ORDER}, got shape "
            f"{matrix.shape}"
        )
    if not np.all(np.isfinite(matrix)):
        raise ValueError("expected a finite kernel, got NaN or infinite entries")
    if not tolerance >= 0.0:
        raise ValueError(f"expected tolerance >= 0, got {tolerance}")
    scale = max(float(np.max(np.abs(matrix))), np.finfo(float).tiny)
    asymmetry = float(np.max(np.abs(matrix - matrix.T))) / scale
    if asymmetry > tolerance:
        raise ValueError(
            f"expected a symmetric kernel, got relative asymmetry {asymmetry:.3g} "
            f"(tolerance {tolerance:.3g})"
        )
    rotated = MODE_BASIS.T @ (0.5 * (matrix + matrix.T)) @ MODE_BASIS
    off_diagonal = float(np.max(np.abs(rotated - np.diag(np.diag(rotated))))) / scale
    if off_diagonal > tolerance:
        raise ValueError(
            "expected a 2FS-symmetric kernel (diagonal in the Hadamard basis G, S, C, SC), got "
            f"relative off-diagonal mass {off_diagonal:.3g} (tolerance {tolerance:.3g})"
        )
    eigenvalues = np.diag(rotated)
    if np.min(eigenvalues) < -tolerance * scale:
        raise ValueError(
            "expected a positive semi-definite kernel, got mode eigenvalues "
            f"{dict(zip(MODES, eigenvalues.round(12)))}"
        )
    return ModeSpectrum(*(float(value) for value in np.clip(eigenvalues, 0.0, None)))


def decompose_class_means(means: ArrayLike, tolerance: float = TOLERANCE) -> ModeSpectrum:
    """2FS eigenvalues of the kernel ``μ μᵀ`` of class means ``μ`` ``[4, d]`` (rows in
    ``CLASS_ORDER``). Measured data is rarely exactly 2FS: raise ``tolerance`` to project."""
    array = np.asarray(means, dtype=float)
    if array.ndim != 2 or array.shape[0] != 4:
        raise ValueError(
            f"expected class means of shape [4, d] with rows ordered {CLASS_ORDER}, got shape "
            f"{array.shape}"
        )
    return decompose_2fs(array @ array.T, tolerance)


def abstraction_cosine(kernel: ArrayLike) -> float:
    """``cos(u₊, u₋)`` of the concept's difference vectors read from any 4 × 4 Gram matrix.

    No 2FS structure is assumed (the simulators use this on kernels that are only
    approximately 2FS); on a 2FS kernel it equals ``ModeSpectrum.alpha``.
    """
    matrix = np.asarray(kernel, dtype=float)
    if matrix.shape != (4, 4):
        raise ValueError(f"expected a 4x4 kernel, got shape {matrix.shape}")
    # u₊ = z(+,+) − z(−,+) and u₋ = z(+,−) − z(−,−) as coefficient vectors over the classes.
    difference = np.array([[1.0, 0.0, -1.0, 0.0], [0.0, 1.0, 0.0, -1.0]])
    gram = difference @ matrix @ difference.T
    norms = np.sqrt(gram[0, 0] * gram[1, 1])
    if norms == 0.0:
        raise ValueError("the concept's difference vectors vanish: abstraction is undefined")
    return float(gram[0, 1] / norms)


def alpha_from_nu(nu: ArrayLike) -> np.ndarray | float:
    """Abstraction ``α = (1 − ν)/(1 + ν)`` from the inverse SNR ``ν ≥ 0`` (``ν = ∞`` → −1)."""
    ratio = np.asarray(nu, dtype=float)
    if np.any(np.isnan(ratio)) or np.any(ratio < 0.0):
        raise ValueError(f"expected an inverse SNR nu >= 0, got {str(nu)}")
    with np.errstate(invalid="ignore"):
        alpha = np.where(np.isinf(ratio), -1.0, (1.0 - ratio) / (1.0 + ratio))
    return float(alpha) if alpha.ndim == 0 else alpha


def alpha_terminal(nu_x: ArrayLike, nu_y: ArrayLike) -> np.ndarray | float:
    """Terminal abstraction of the two-layer network: ``α_∞ = (1 − √ν̄)/(1 + √ν̄)``,
    ``ν̄ = ν(Σ_x) ν(Σ_y)`` (docs/theory.md#abstraction-dynamics)."""
    input_ratio = np.asarray(nu_x, dtype=float)
    target_ratio = np.asarray(nu_y, dtype=float)
    for name, ratio in (("nu_x", input_ratio), ("nu_y", target_ratio)):
        if np.any(np.isnan(ratio)) or np.any(ratio < 0.0):
            raise ValueError(f"expected {name} >= 0, got {ratio}")
    if np.any((input_ratio == 0.0) & np.isinf(target_ratio)) or np.any(
        np.isinf(input_ratio) & (target_ratio == 0.0)
    ):
        raise ValueError("nu_x * nu_y is 0 * inf: the terminal abstraction is undefined")
    return alpha_from_nu(np.sqrt(input_ratio * target_ratio))


# --- exact mode dynamics through the clock ---------------------------------------------------


def clock(a: ArrayLike, depth: int = 1) -> np.ndarray:
    """The clock ``F_L(a)`` that advances linearly in time for ``a = γλ`` (docs/theory.md#abstraction-dynamics).

    ``F_1(a) = a²/2 + 2a + ln a``; for depth ``L > 1`` it is the antiderivative of
    ``(1 + a)² a^(1/L − 2)``: ``−L/(L−1) a^(−(L−1)/L) + 2L a^(1/L) + L/(L+1) a^((L+1)/L)``.
    """
    _check_depth(depth)
    values = np.asarray(a, dtype=float)
    if np.any(np.isnan(values)) or np.any(values < 0.0):
        raise ValueError(f"expected a >= 0, got {str(a)}")
    with np.errstate(divide="ignore"):
        return _clock_of_log(np.log(values), depth)


def inverse_clock(tau: ArrayLike, depth: int = 1) -> np.ndarray:
    """The ``a > 0`` with ``F_L(a) = τ``; ``τ = −∞`` gives 0 (a mode that never grows)."""
    _check_depth(depth)
    return np.exp(_log_inverse_clock(np.asarray(tau, dtype=float), depth))


def mode_rate(lambda_x: ArrayLike, lambda_y: ArrayLike, gamma: float, depth: int = 1) -> np.ndarray:
    """Speed of the clock of each mode: ``F_L(γλ(t)) = F_L(γλ(0)) + rate · t`` with
    ``rate = 2L γ^(1/L) (λ^x)^(1/L) λ^y`` (``2γ λ^x λ^y`` for the two-layer network)."""
    _check_depth(depth)
    _check_positive(gamma, "gamma")
    input_modes = _nonnegative(lambda_x, "lambda_x")
    target_modes = _nonnegative(lambda_y, "lambda_y")
    return 2.0 * depth * gamma ** (1.0 / depth) * input_modes ** (1.0 / depth) * target_modes


def mode_trajectory(
    lambda_x: ArrayLike,
    lambda_y: ArrayLike,
    gamma: float,
    kappa: float,
    times: ArrayLike,
    depth: int = 1,
) -> np.ndarray:
    """Exact eigenvalues ``λ_m(t)`` of the last hidden kernel, shape ``[len(times), modes]``.

    Solves ``dλ/dt = 2Lγ λ^(2−1/L) (λ^x)^(1/L) λ^y / (1 + γλ)²`` from ``λ(0) = κ^L λ^x`` through
    the clock ``F_L`` (docs/theory.md#abstraction-dynamics; ``L = 1``: ``dλ/dt = 2γ λ λ^x λ^y / (1 + γλ)²``).
    """
    log_modes = _log_mode_trajectory(lambda_x, lambda_y, gamma, kappa, times, depth)
    return np.exp(log_modes) / gamma


def alpha_trajectory(
    sigma_x: ArrayLike,
    sigma_y: ArrayLike,
    gamma: float,
    kappa: float,
    times: ArrayLike,
    depth: int = 1,
) -> np.ndarray:
    """Exact abstraction ``α(t)`` of the last hidden layer at each of ``times`` (docs/theory.md#abstraction-dynamics).

    ``sigma_x`` and ``sigma_y`` are 2FS kernels (``CLASS_ORDER``); the network starts from
    ``λ_m(0) = κ^L λ^x_m`` and follows gradient flow with the ridge readout ``1/γ`` solved at
    every instant. ``times`` may include ``inf`` (the terminal value).
    """
    input_spectrum = decompose_2fs(sigma_x)
    target_spectrum = decompose_2fs(sigma_y)
    _check_alpha_defined(input_spectrum)
    log_modes = _log_mode_trajectory(
        [input_spectrum.S, input_spectrum.SC],
        [target_spectrum.S, target_spectrum.SC],
        gamma,
        kappa,
        times,
        depth,
    )
    # α = (1 − ρ)/(1 + ρ) = tanh(−½ ln ρ) with ρ = λ_SC/λ_S, computed in logs so that modes
    # far below the float range (tiny κ) keep their ratio.
    with np.errstate(invalid="ignore"):
        alpha = np.tanh(0.5 * (log_modes[:, 0] - log_modes[:, 1]))
    terminal = np.isinf(np.asarray(times, dtype=float).ravel())
    if np.any(terminal):
        alpha[terminal] = depth_terminal(input_spectrum.alpha, target_spectrum.alpha, depth)
    return alpha.reshape(np.shape(times))


def alpha_max(
    sigma_x: ArrayLike, sigma_y: ArrayLike, gamma: float, kappa: float, depth: int = 1
) -> float:
    """Supremum over training time of ``α(t)`` (docs/theory.md#abstraction-dynamics: it increases toward 1 as κ ↓ 0).

    α(t) overshoots ``α_∞`` even from a lazy start (the overshoot fades like 1/κ²); the
    supremum is ``α_∞`` itself only when α never exceeds it, e.g. with a noiseless target
    (``λ^y_SC = 0``), which drives α monotonically to 1.
    """
    return _peak(sigma_x, sigma_y, gamma, kappa, depth)[1]


def plateau_length(
    sigma_x: ArrayLike,
    sigma_y: ArrayLike,
    gamma: float,
    kappa: float,
    level: float = 0.95,
    depth: int = 1,
) -> float:
    """Time during which ``α(t) ≥ level``: the near-perfect plateau, ``Θ(log 1/κ)`` for the
    two-layer network (docs/theory.md#abstraction-dynamics).

    Returns 0 when α never reaches ``level`` and ``inf`` when ``α_∞ ≥ level``. α(t) rises to a
    single peak and then decays (checked on fine grids in the tests), so the plateau is the
    interval between the two crossings of ``level``.
    """
    if not -1.0 < level < 1.0:
        raise ValueError(f"expected a level in (-1, 1), got {level}")
    peak_time, peak_alpha = _peak(sigma_x, sigma_y, gamma, kappa, depth)
    if peak_alpha < level:
        return 0.0
    terminal = alpha_trajectory(sigma_x, sigma_y, gamma, kappa, [np.inf], depth)[0]
    if terminal >= level:
        return np.inf

    def excess(time: float) -> float:
        return alpha_trajectory(sigma_x, sigma_y, gamma, kappa, [time], depth)[0] - level

    start = 0.0 if excess(0.0) >= 0.0 else brentq(excess, 0.0, peak_time, xtol=1e-12 * peak_time)
    late = 2.0 * peak_time if peak_time > 0.0 else 1.0
    while excess(late) >= 0.0:
        late *= 2.0
    end = brentq(excess, peak_time, late, xtol=1e-12 * late)
    return end - start


# --- depth -----------------------------------------------------------------------------------


def depth_terminal(alpha_x: ArrayLike, alpha_y: ArrayLike, L: int) -> np.ndarray | float:
    """Terminal abstraction of the last of ``L`` hidden layers of a balanced deep linear
    network: ``artanh α_∞ = artanh α_x /(L+1) + L artanh α_y /(L+1)`` (docs/theory.md#abstraction-depth)."""
    _check_depth(L)
    input_alpha = _alpha_array(alpha_x, "alpha_x")
    target_alpha = _alpha_array(alpha_y, "alpha_y")
    if np.any((np.abs(input_alpha) == 1.0) & (input_alpha == -target_alpha)):
        raise ValueError("alpha_x = -alpha_y = ±1: the terminal abstraction is undefined")
    with np.errstate(divide="ignore"):
        result = np.tanh((np.arctanh(input_alpha) + L * np.arctanh(target_alpha)) / (L + 1))
    return float(result) if result.ndim == 0 else result


def depth_per_layer(alpha_x: float, alpha_last: ArrayLike, L: int) -> np.ndarray:
    """Abstraction of hidden layers ``ℓ = 0..L`` (``ℓ = 0`` is the input), last axis:
    ``artanh α^(ℓ) = (1 − ℓ/L) artanh α_x + (ℓ/L) artanh α^(L)`` (docs/theory.md#abstraction-depth).

    Exact at every time for the balanced, mode-aligned network: each layer multiplies mode
    ``m`` by the same gain, so ``ln ν`` is linear in ``ℓ``.
    """
    _check_depth(L)
    input_alpha = float(_alpha_array(alpha_x, "alpha_x"))
    last_alpha = _alpha_array(alpha_last, "alpha_last")
    fractions = np.arange(L + 1) / L
    with np.errstate(divide="ignore", invalid="ignore"):
        mixed = (1.0 - fractions) * np.arctanh(input_alpha) + fractions * np.arctanh(
            last_alpha[..., None]
        )
        layers = np.tanh(mixed)
    # Endpoints are the inputs themselves (avoids ∞ − ∞ when an α is ±1).
    layers[..., 0] = input_alpha
    layers[..., -1] = last_alpha
    return layers


# --- infinite-width nonlinear attenuation ----------------------------------------------------


def dual_kernel(Q: ArrayLike, activation: Activation, slope: float | None = None) -> np.ndarray:
    """Post-activation kernel ``K_ij = E_w[φ(wᵀz_i) φ(wᵀz_j)]``, ``w ~ N(0, I)``, ``Q = Z Zᵀ``.

    Closed forms (docs/theory.md#abstraction-nonlinearities): erf, the arcsine kernel
    ``(2/π) arcsin(2Q_ij / √((1 + 2Q_ii)(1 + 2Q_jj)))``; ReLU, the arc-cosine kernel
    ``√(Q_ii Q_jj)(sin θ + (π − θ) cos θ)/(2π)`` with ``cos θ = Q_ij / √(Q_ii Q_jj)``; leaky ReLU
    with slope ω, ``(1 − ω)² K_ReLU + ω Q`` (the linear part). Any positive semi-definite ``Q``.
    """
    matrix = _psd_matrix(Q)
    omega = _check_activation(activation, slope)
    diagonal = np.diag(matrix)
    if activation == "erf":
        scale = np.sqrt(np.outer(1.0 + 2.0 * diagonal, 1.0 + 2.0 * diagonal))
        return 2.0 / np.pi * np.arcsin(np.clip(2.0 * matrix / scale, -1.0, 1.0))
    norms = np.sqrt(np.outer(diagonal, diagonal))
    with np.errstate(invalid="ignore", divide="ignore"):
        cosine = np.where(norms > 0.0, matrix / norms, 1.0)
    angle = np.arccos(np.clip(cosine, -1.0, 1.0))
    rectified = norms * (np.sin(angle) + (np.pi - angle) * np.cos(angle)) / (2.0 * np.pi)
    return (1.0 - omega) ** 2 * rectified + omega * matrix


def attenuation(Q: ArrayLike, activation: Activation, slope: float | None = None) -> float:
    """Attenuation factor ``A_φ(Q) = α_K / α_Q`` of a 2FS pre-activation kernel (docs/theory.md#abstraction-nonlinearities).

    ``K`` is the infinite-width post-activation kernel (``dual_kernel``); docs/theory.md#abstraction-nonlinearities states
    ``0 ≤ A_φ ≤ 1`` whenever ``α_Q > 0``. ``activation`` is ``"erf"``, ``"relu"`` or
    ``"leaky_relu"`` (which needs ``slope`` ω in [0, 1]). Computed from the mode eigenvalues
    with differences that never cancel, so it stays accurate when one mode dwarfs the others.
    """
    spectrum = decompose_2fs(Q)
    omega = _check_activation(activation, slope)
    if spectrum.S == spectrum.SC:
        raise ValueError(
            "expected alpha_Q != 0 (lambda_S != lambda_SC): the attenuation alpha_K / alpha_Q "
            "is undefined at alpha_Q = 0"
        )
    # A 2FS kernel has one diagonal value d and one off-diagonal value q per pair of classes;
    # every pair is described by d − q and d + q, which are sums of eigenvalues (no round-off).
    # "c": classes differing in c only, "s": in s only, "sc": in both.
    diagonal = sum(spectrum) / 4.0
    below = {  # d − q
        "diag": 0.0,
        "c": (spectrum.C + spectrum.SC) / 2.0,
        "s": (spectrum.S + spectrum.SC) / 2.0,
        "sc": (spectrum.S + spectrum.C) / 2.0,
    }
    above = {  # d + q
        "diag": 2.0 * diagonal,
        "c": (spectrum.G + spectrum.S) / 2.0,
        "s": (spectrum.G + spectrum.C) / 2.0,
        "sc": (spectrum.G + spectrum.SC) / 2.0,
    }
    # α_K = (k(q_c) − k(q_sc)) / (k(d) − k(q_s)); α_Q is the same with k the identity.
    signal_gap = (spectrum.S - spectrum.SC) / 2.0  # q_c − q_sc
    total_gap = (spectrum.S + spectrum.SC) / 2.0  # d − q_s
    kernel = _KernelEntries(diagonal, below, above)
    if activation == "erf":
        numerator = _erf_kernel_gap(kernel, "c", "sc", signal_gap)
        denominator = _erf_kernel_gap(kernel, "diag", "s", total_gap)
    else:
        numerator = (1.0 - omega) ** 2 * _relu_kernel_gap(
            kernel, "c", "sc", signal_gap
        ) + omega * signal_gap
        denominator = (1.0 - omega) ** 2 * _relu_kernel_gap(
            kernel, "diag", "s", total_gap
        ) + omega * total_gap
    return float((numerator / denominator) / (signal_gap / total_gap))


# --- helpers ---------------------------------------------------------------------------------

_GAUSS_NODES, _GAUSS_WEIGHTS = np.polynomial.legendre.leggauss(24)


class _KernelEntries(NamedTuple):
    """A 2FS kernel's entries: its diagonal value d, and d − q (``below``) and d + q
    (``above``) for each pair of classes ("diag", "c", "s", "sc")."""

    diagonal: float
    below: dict[str, float]
    above: dict[str, float]


def _erf_kernel_gap(kernel: _KernelEntries, upper: str, lower: str, gap: float) -> float:
    """``arcsin x_upper − arcsin x_lower`` for ``x = 2q/(1 + 2d)`` without cancellation.

    With ``u = √((1 − x)/(1 + x))``, ``arcsin x = π/2 − 2 arctan u``, and ``u_lower − u_upper``
    has the closed form ``4 gap (1 + 2d) / ((1 + 2σ_u)(1 + 2σ_l)(u_u + u_l))``, ``σ = d + q``,
    ``gap = q_upper − q_lower``. The factor 2/π of the kernel cancels in α_K.
    """
    diagonal, below, above = kernel
    tangent = {
        pair: np.sqrt((1.0 + 2.0 * below[pair]) / (1.0 + 2.0 * above[pair]))
        for pair in (upper, lower)
    }
    difference = (
        4.0
        * gap
        * (1.0 + 2.0 * diagonal)
        / ((1.0 + 2.0 * above[upper]) * (1.0 + 2.0 * above[lower]))
        / (tangent[upper] + tangent[lower])
    )
    return 2.0 * np.arctan(difference / (1.0 + tangent[upper] * tangent[lower]))


def _relu_kernel_gap(kernel: _KernelEntries, upper: str, lower: str, gap: float) -> float:
    """``k(q_upper) − k(q_lower)`` of the arc-cosine kernel as a positive integral.

    ``dk/dq = (π − θ)/(2π)`` with ``q = d cos θ``, so the gap is
    ``(d/2π) ∫ (π − t) sin t dt`` over ``[θ_upper, θ_lower]``: a smooth positive integrand that
    Gauss–Legendre integrates to round-off. ``θ = 2 arctan √((d − q)/(d + q))``, and the
    interval length comes from the difference of arctangents in closed form.
    """
    diagonal, below, above = kernel
    if gap == 0.0:
        return 0.0
    ratio = {
        pair: np.sqrt(below[pair] / above[pair]) if above[pair] > 0 else np.inf
        for pair in (upper, lower)
    }
    start = 2.0 * np.arctan(ratio[upper])
    if np.isinf(ratio[upper]) or np.isinf(ratio[lower]):
        width = 2.0 * np.arctan(ratio[lower]) - start
    else:
        # u_l² − u_u² = 2d · gap / (σ_u σ_l), then arctan u_l − arctan u_u in closed form.
        squares_gap = 2.0 * diagonal * gap / (above[upper] * above[lower])
        tangent_gap = squares_gap / (ratio[upper] + ratio[lower])
        width = 2.0 * np.arctan(tangent_gap / (1.0 + ratio[upper] * ratio[lower]))
    nodes = start + 0.5 * width * (_GAUSS_NODES + 1.0)
    integral = 0.5 * width * np.sum(_GAUSS_WEIGHTS * (np.pi - nodes) * np.sin(nodes))
    return diagonal / (2.0 * np.pi) * integral


def _clock_of_log(log_a: np.ndarray, depth: int) -> np.ndarray:
    """``F_L(e^u)`` evaluated from ``u = ln a`` so that tiny and huge ``a`` stay in range."""
    with np.errstate(over="ignore"):
        if depth == 1:
            return 0.5 * np.exp(2.0 * log_a) + 2.0 * np.exp(log_a) + log_a
        inverse = 1.0 / depth
        return (
            -depth / (depth - 1.0) * np.exp(-(1.0 - inverse) * log_a)
            + 2.0 * depth * np.exp(inverse * log_a)
            + depth / (depth + 1.0) * np.exp((1.0 + inverse) * log_a)
        )


def _clock_slope_of_log(log_a: np.ndarray, depth: int) -> np.ndarray:
    """``d F_L(e^u) / du = (1 + a)² a^(1/L − 1)``."""
    with np.errstate(over="ignore"):
        return (1.0 + np.exp(log_a)) ** 2 * np.exp((1.0 / depth - 1.0) * log_a)


def _log_inverse_clock(tau: np.ndarray, depth: int) -> np.ndarray:
    """``u = ln a`` with ``F_L(e^u) = τ``, by safeguarded Newton steps on a bracket.

    ``F_L(e^u)`` increases strictly from −∞ to ∞, so a bracket always exists; it is grown from
    the asymptotic solution (the ``ln a`` or ``a^(−(L−1)/L)`` term for small ``a``, the
    ``a^((L+1)/L)`` term for large ``a``), and a Newton step that leaves it is replaced by
    bisection. This converges over hundreds of decades of ``a``.
    """
    tau = np.asarray(tau, dtype=float)
    if np.any(np.isnan(tau)):
        raise ValueError("expected clock values that are not NaN")
    result = np.where(tau > 0.0, np.inf, -np.inf)
    finite = np.isfinite(tau)
    target = tau[finite]
    if target.size == 0:
        return result
    knee = float(_clock_of_log(np.array(0.0), depth))
    with np.errstate(divide="ignore", invalid="ignore"):
        if depth == 1:
            small = target - 2.0
        else:
            small = -np.log(np.maximum((depth - 1.0) / depth * (knee - target), 1e-300)) / (
                1.0 - 1.0 / depth
            )
        large = depth / (depth + 1.0) * np.log(np.maximum((depth + 1.0) / depth * target, 1.0))
    guess = np.where(target < knee, small, large)
    lower, upper = guess - 1.0, guess + 1.0
    step = np.full_like(target, 1.0)
    while np.any(low := _clock_of_log(lower, depth) > target):
        lower = np.where(low, lower - step, lower)
        step = np.where(low, 2.0 * step, step)
    step[:] = 1.0
    while np.any(high := _clock_of_log(upper, depth) < target):
        upper = np.where(high, upper + step, upper)
        step = np.where(high, 2.0 * step, step)
    log_a = np.clip(guess, lower, upper)
    for _ in range(200):
        excess = _clock_of_log(log_a, depth) - target
        lower = np.where(excess <= 0.0, log_a, lower)
        upper = np.where(excess >= 0.0, log_a, upper)
        newton = log_a - excess / _clock_slope_of_log(log_a, depth)
        inside = (newton > lower) & (newton < upper)
        updated = np.where(inside, newton, 0.5 * (lower + upper))
        converged = np.abs(updated - log_a) <= 4.0 * np.finfo(float).eps * np.maximum(
            1.0, np.abs(log_a)
        )
        log_a = updated
        if np.all(converged | (excess == 0.0)):
            break
    result[finite] = log_a
    return result


def _log_mode_trajectory(
    lambda_x: ArrayLike,
    lambda_y: ArrayLike,
    gamma: float,
    kappa: float,
    times: ArrayLike,
    depth: int,
) -> np.ndarray:
    """``ln(γ λ_m(t))``, shape ``[len(times), modes]``; −∞ for a mode absent from the input."""
    _check_positive(kappa, "kappa")
    rates = mode_rate(lambda_x, lambda_y, gamma, depth)
    input_modes = np.atleast_1d(_nonnegative(lambda_x, "lambda_x"))
    moments = np.asarray(times, dtype=float).ravel()
    if np.any(np.isnan(moments)) or np.any(moments < 0.0):
        raise ValueError(f"expected times >= 0, got {str(times)}")
    with np.errstate(divide="ignore"):
        log_start = np.log(gamma * input_modes) + depth * np.log(kappa)
    start = _clock_of_log(log_start, depth)
    # A mode with no drive (rate 0) stays where it started, even at t = ∞.
    with np.errstate(invalid="ignore"):
        progress = np.where(rates > 0.0, rates * moments[:, None], 0.0)
    return _log_inverse_clock(start + progress, depth)


def _peak(
    sigma_x: ArrayLike, sigma_y: ArrayLike, gamma: float, kappa: float, depth: int
) -> tuple[float, float]:
    """Time and value of the supremum of α(t); the time is ``inf`` when it is ``α_∞``.

    The S mode grows monotonically, so its clock parametrises the whole trajectory: α is
    scanned on a logarithmic grid of ``a_S`` from its start to far past saturation, and the
    best grid point is refined by a bounded scalar search.
    """
    input_spectrum = decompose_2fs(sigma_x)
    target_spectrum = decompose_2fs(sigma_y)
    _check_depth(depth)
    _check_positive(gamma, "gamma")
    _check_positive(kappa, "kappa")
    if input_spectrum.S == 0.0 or target_spectrum.S == 0.0:
        raise ValueError(
            "expected lambda_S > 0 in both sigma_x and sigma_y: without a signal mode in the "
            "input and the target, abstraction never peaks"
        )
    signal_rate = float(mode_rate(input_spectrum.S, target_spectrum.S, gamma, depth))
    log_signal_start = np.log(gamma * input_spectrum.S) + depth * np.log(kappa)
    signal_clock_start = float(_clock_of_log(np.array(log_signal_start), depth))

    def time_at(log_signal: np.ndarray) -> np.ndarray:
        return (_clock_of_log(log_signal, depth) - signal_clock_start) / signal_rate

    def alpha_at(log_signal: np.ndarray) -> np.ndarray:
        moments = np.atleast_1d(time_at(np.atleast_1d(log_signal)))
        return alpha_trajectory(sigma_x, sigma_y, gamma, kappa, moments, depth)

    grid = np.linspace(log_signal_start, max(log_signal_start, 0.0) + 30.0, 3001)
    alphas = alpha_at(grid)
    best = int(np.argmax(alphas))
    refined = minimize_scalar(
        lambda log_signal: -alpha_at(log_signal)[0],
        bounds=(grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]),
        method="bounded",
        options={"xatol": 1e-10},
    )
    peak_log, peak_alpha = (
        (refined.x, -refined.fun)
        if -refined.fun > alphas[best]
        else (
            grid[best],
            alphas[best],
        )
    )
    terminal = depth_terminal(input_spectrum.alpha, target_spectrum.alpha, depth)
    if terminal >= peak_alpha:
        return np.inf, float(terminal)
    return float(time_at(np.array(peak_log))), float(peak_alpha)


def _check_depth(depth: int) -> None:
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ValueError(f"expected a depth L that is an integer >= 1, got {depth!r}")


def _check_positive(value: float, name: str) -> None:
    if not (np.isfinite(value) and value > 0.0):
        raise ValueError(f"expected {name} > 0, got {value}")


def _check_alpha_defined(spectrum: ModeSpectrum) -> None:
    if spectrum.S + spectrum.SC == 0.0:
        raise ValueError(
            "expected lambda_S + lambda_SC > 0 in sigma_x: with neither mode the concept's "
            "difference vectors vanish and abstraction is undefined"
        )


def _check_activation(activation: str, slope: float | None) -> float:
    """Validate the activation and return the leaky slope ω (0 for ReLU, unused for erf)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; expected one of {ACTIVATIONS}")
    if activation == "leaky_relu":
        if slope is None or not 0.0 <= slope <= 1.0:
            raise ValueError(f"leaky_relu needs a slope omega in [0, 1], got {slope}")
        return float(slope)
    if slope is not None:
        raise ValueError(f"slope applies to leaky_relu only, got slope={slope} for {activation}")
    return 0.0


def _nonnegative(values: ArrayLike, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if shape is not None and array.shape != shape:
        raise ValueError(f"expected {name} of shape {shape}, got {array.shape}")
    if not np.all(np.isfinite(array)) or np.any(array < 0.0):
        raise ValueError(f"expected finite {name} >= 0, got {str(values)}")
    return array


def _alpha_array(values: ArrayLike, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if np.any(np.isnan(array)) or np.any(np.abs(array) > 1.0):
        raise ValueError(f"expected {name} in [-1, 1], got {str(values)}")
    return array


def _psd_matrix(Q: ArrayLike, tolerance: float = TOLERANCE) -> np.ndarray:
    matrix = np.asarray(Q, dtype=float)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"expected a square kernel Q, got shape {matrix.shape}")
    if not np.all(np.isfinite(matrix)):
        raise ValueError("expected a finite kernel Q")
    scale = max(float(np.max(np.abs(matrix), initial=0.0)), np.finfo(float).tiny)
    if np.max(np.abs(matrix - matrix.T), initial=0.0) > tolerance * scale:
        raise ValueError("expected a symmetric kernel Q")
    if np.min(np.linalg.eigvalsh(matrix), initial=0.0) < -tolerance * scale:
        raise ValueError("expected a positive semi-definite kernel Q")
    return 0.5 * (matrix + matrix.T)

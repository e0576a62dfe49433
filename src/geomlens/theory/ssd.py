"""Sparse semantic dimension (SSD) and the generalisation bound it certifies (docs/sae.md, docs/theory.md).

A sparse autoencoder with a dictionary of ``m`` latents is read over a calibration stream; the
pool G of latents that were ever active has ``P`` members. The bound on the risk of the frozen
model M, evaluated on ``N`` held-out sequences with confidence ``1 - delta``, is

    U = R̂ + ε̂_loss + B η̂ + B √((SSD + ln(2/δ)) / (2N)) + B √(ln(4/δ) / (2N)),

where the loss is the smoothed bits per token, bounded by ``B = log2(V / a)``. The bound is
non-vacuous when U falls below ``log2 V``, the loss of guessing uniformly over the vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

SMOOTHING = 0.5
"""Default mixing weight ``a`` of the uniform distribution in the smoothed loss."""

DELTA = 0.05
"""Default failure probability of the bound."""


def ssd(P: float, m: float) -> float:
    """Sparse semantic dimension ``P ln(e m / P)`` of a pool of ``P`` latents out of ``m``.

    ``P = 0`` gives 0, the limit of ``P ln(e m / P)`` as ``P -> 0``. At ``P = m`` the value is
    ``m``: the log-count of pools, ``ln C(m, P) <= SSD``, is what the bound pays for.
    """
    _check_pool(P, m)
    if P == 0:
        return 0.0
    return P * (1.0 + math.log(m / P))


def smoothed_loss_bound(V: float, a: float = SMOOTHING) -> float:
    """Upper bound ``B = log2(V / a)`` of the smoothed bits per token over a vocabulary of ``V``."""
    _check_vocabulary(V)
    _check_smoothing(a)
    return math.log2(V / a)


def smoothed_probability(p: ArrayLike, V: float, a: float = SMOOTHING) -> np.ndarray:
    """Smoothed probability ``(1 - a) p + a / V`` of the observed tokens.

    Mixing in the uniform distribution floors every probability at ``a / V``, so the loss
    ``-log2`` of it lies in ``[0, log2(V / a)]``, the boundedness the bound needs.
    """
    _check_vocabulary(V)
    _check_smoothing(a)
    probabilities = np.asarray(p, dtype=float)
    if not np.all((probabilities >= 0.0) & (probabilities <= 1.0)):
        raise ValueError("p must hold probabilities in [0, 1]")
    return (1.0 - a) * probabilities + a / V


def smoothed_bits(p: ArrayLike, V: float, a: float = SMOOTHING) -> np.ndarray:
    """Smoothed loss in bits, ``-log2((1 - a) p + a / V)``, elementwise over ``p``."""
    return -np.log2(smoothed_probability(p, V, a))


@dataclass(frozen=True)
class SSDBound:
    """The terms of the bound U, by name, in bits per token."""

    empirical_risk: float
    """R̂: mean smoothed loss of the sparse proxy on the held-out sequences."""
    eps_loss: float
    """ε̂_loss: mean absolute loss gap between the model and its sparse proxy."""
    pool_mismatch: float
    """B η̂: the cost of held-out sequences that use latents outside the pool."""
    complexity: float
    """B √((SSD + ln(2/δ)) / (2N)): uniform convergence over the pools."""
    confidence: float
    """B √(ln(4/δ) / (2N)): concentration of the empirical terms."""
    total: float
    """U, the sum of the five terms above."""
    vacuity_threshold: float
    """log2 V: the loss of a uniform guess over the vocabulary."""
    non_vacuous: bool
    """Whether U < log2 V."""
    loss_bound: float
    """B = log2(V / a), the range of the smoothed loss."""
    ssd: float
    """The sparse semantic dimension that entered the complexity term."""


def bound(
    *,
    P: float,
    m: float,
    N: float,
    V: float,
    risk: float,
    eps_loss: float = 0.0,
    eta: float = 0.0,
    delta: float = DELTA,
    a: float = SMOOTHING,
) -> SSDBound:
    """The SSD generalisation bound U on ``N`` held-out sequences, term by term.

    Args:
        P: pool size, the number of latents active on the calibration stream.
        m: dictionary size of the sparse autoencoder.
        N: number of held-out sequences (real-valued so the bound can be traced continuously).
        V: vocabulary size.
        risk: empirical risk R̂ of the sparse proxy, in smoothed bits per token.
        eps_loss: mean absolute loss gap ε̂_loss between the model and the proxy.
        eta: pool mismatch η̂, the fraction of held-out sequences leaving the pool.
        delta: failure probability; the bound holds with probability ``1 - delta``.
        a: smoothing weight of the loss.
    """
    _check_sample_size(N)
    loss_bound, mismatch, sparse_dimension = _common_terms(P, m, V, risk, eps_loss, eta, delta, a)
    complexity = loss_bound * math.sqrt((sparse_dimension + math.log(2.0 / delta)) / (2.0 * N))
    confidence = loss_bound * math.sqrt(math.log(4.0 / delta) / (2.0 * N))
    return SSDBound(
        empirical_risk=risk,
        eps_loss=eps_loss,
        pool_mismatch=mismatch,
        complexity=complexity,
        confidence=confidence,
        loss_bound=loss_bound,
        ssd=sparse_dimension,
        **_against_uniform_guess(risk + eps_loss + mismatch + complexity + confidence, V),
    )


def crossing_size(
    *,
    P: float,
    m: float,
    V: float,
    risk: float,
    eps_loss: float = 0.0,
    eta: float = 0.0,
    delta: float = DELTA,
    a: float = SMOOTHING,
) -> float:
    """Held-out size N* at which the bound U reaches the vacuity threshold ``log2 V``.

    N* = (A / (log2 V - C))² with C = R̂ + ε̂_loss + B η̂ the terms that do not shrink with N
    and A = B (√((SSD + ln(2/δ)) / 2) + √(ln(4/δ) / 2)), so that U(N) = C + A / √N. The bound is
    non-vacuous for every N > N* (strictly: at N* itself U equals log2 V). When C >= log2 V no
    amount of held-out data makes the bound non-vacuous and the result is ``math.inf``. N* may
    fall below 1, in which case any held-out set certifies. Arguments are those of `bound`.
    """
    loss_bound, mismatch, sparse_dimension = _common_terms(P, m, V, risk, eps_loss, eta, delta, a)
    floor = risk + eps_loss + mismatch
    margin = math.log2(V) - floor
    if margin <= 0.0:
        return math.inf
    slope = loss_bound * (
        math.sqrt((sparse_dimension + math.log(2.0 / delta)) / 2.0)
        + math.sqrt(math.log(4.0 / delta) / 2.0)
    )
    return (slope / margin) ** 2


def _common_terms(
    P: float,
    m: float,
    V: float,
    risk: float,
    eps_loss: float,
    eta: float,
    delta: float,
    a: float,
) -> tuple[float, float, float]:
    """Validate the shared arguments; return B, B η̂ and SSD."""
    _check_nonnegative("risk", risk)
    _check_nonnegative("eps_loss", eps_loss)
    if not 0.0 <= eta <= 1.0:
        raise ValueError(f"eta is a fraction of sequences: expected 0 <= eta <= 1, got {eta}")
    _check_delta(delta)
    loss_bound = smoothed_loss_bound(V, a)
    return loss_bound, loss_bound * eta, ssd(P, m)


def _against_uniform_guess(total: float, V: float) -> dict[str, Any]:
    """The fields of either form that set U (``total``) against log2 V, a uniform guess."""
    threshold = math.log2(V)
    return {"total": total, "vacuity_threshold": threshold, "non_vacuous": total < threshold}


def _check_delta(delta: float) -> None:
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta is a failure probability: expected 0 < delta < 1, got {delta}")


def _check_pool(P: float, m: float) -> None:
    if not m >= 1:
        raise ValueError(f"m is a dictionary size: expected m >= 1, got {m}")
    if not 0 <= P <= m:
        raise ValueError(f"P is a pool of the m latents: expected 0 <= P <= m = {m}, got P = {P}")


def _check_vocabulary(V: float) -> None:
    if not 2 <= V < math.inf:
        raise ValueError(f"V is a vocabulary size: expected a finite V >= 2, got {V}")


def _check_smoothing(a: float) -> None:
    if not 0.0 < a <= 1.0:
        raise ValueError(f"a is the uniform mixing weight: expected 0 < a <= 1, got {a}")


def _check_sample_size(N: float) -> None:
    if not 1 <= N < math.inf:
        raise ValueError(f"N is a number of held-out sequences: expected a finite N >= 1, got {N}")


def _check_nonnegative(name: str, value: float) -> None:
    if not 0.0 <= value < math.inf:
        raise ValueError(f"{name} is a loss in bits: expected a finite value >= 0, got {value}")


# -- the released-code form ----------------------------------------------------------------------
#
# The authors' released code, whose output the paper's published figure shows, computes another
# form: the per-token mean active count k takes the place of the pool size, N counts held-out
# *tokens*, there is no pool-mismatch term, and a union bound over the integer k adds a term:
#
#     U_released = R̂ + ε̂ + 4B √(k ln(em/k) / N) + B √(ln(π² k² / (6δ)) / (2N)) + B √(ln(1/δ) / (2N)).
#
# It is offered beside the pool form (the default, above) so that both published numbers can be
# reproduced; the two are not interchangeable.


@dataclass(frozen=True)
class ReleasedCodeBound:
    """The terms of the released-code form of the bound, by name, in bits per token."""

    empirical_risk: float
    """R̂: mean smoothed loss of the sparse proxy."""
    eps_loss: float
    """ε̂_loss: mean absolute loss gap between the model and its sparse proxy."""
    complexity: float
    """4B √(k ln(em/k) / N)."""
    k_union: float
    """B √(ln(π² k² / (6δ)) / (2N)): the union bound over the sparsity level k."""
    confidence: float
    """B √(ln(1/δ) / (2N))."""
    total: float
    """U, the sum of the five terms above."""
    vacuity_threshold: float
    """log2 V: the loss of a uniform guess over the vocabulary."""
    non_vacuous: bool
    """Whether U < log2 V."""
    loss_bound: float
    """B = log2(V / a)."""
    sparse_dimension: float
    """k ln(em/k) with k the mean per-token active count."""


def released_bound(
    *,
    k: float,
    m: float,
    N: float,
    V: float,
    risk: float,
    eps_loss: float = 0.0,
    delta: float = DELTA,
    a: float = SMOOTHING,
) -> ReleasedCodeBound:
    """The released-code form of the bound on ``N`` held-out tokens, term by term.

    Args:
        k: mean number of active latents per token (real-valued).
        m: dictionary size of the sparse autoencoder.
        N: number of held-out tokens.
        V: vocabulary size.
        risk: empirical risk R̂ of the sparse proxy, in smoothed bits per token.
        eps_loss: mean absolute loss gap ε̂_loss between the model and the proxy.
        delta: failure probability.
        a: smoothing weight of the loss.
    """
    _check_sample_size(N)
    loss_bound, slopes = _released_terms(k, m, V, risk, eps_loss, delta, a)
    complexity, k_union, confidence = (loss_bound * s / math.sqrt(N) for s in slopes)
    return ReleasedCodeBound(
        empirical_risk=risk,
        eps_loss=eps_loss,
        complexity=complexity,
        k_union=k_union,
        confidence=confidence,
        loss_bound=loss_bound,
        sparse_dimension=ssd(k, m) if k > 0 else 0.0,
        **_against_uniform_guess(risk + eps_loss + complexity + k_union + confidence, V),
    )


def released_crossing_size(
    *,
    k: float,
    m: float,
    V: float,
    risk: float,
    eps_loss: float = 0.0,
    delta: float = DELTA,
    a: float = SMOOTHING,
) -> float:
    """Held-out size N* (in tokens) at which the released-code form reaches ``log2 V``.

    U(N) = C + A / √N with C = R̂ + ε̂ and A = B (4 √(k ln(em/k)) + √(ln(π²k²/(6δ)) / 2) +
    √(ln(1/δ) / 2)); N* = (A / (log2 V − C))², ``math.inf`` when C >= log2 V.
    """
    loss_bound, slopes = _released_terms(k, m, V, risk, eps_loss, delta, a)
    margin = math.log2(V) - (risk + eps_loss)
    if margin <= 0.0:
        return math.inf
    return (loss_bound * sum(slopes) / margin) ** 2


def _released_terms(
    k: float, m: float, V: float, risk: float, eps_loss: float, delta: float, a: float
) -> tuple[float, tuple[float, float, float]]:
    """Validate; return B and the three slopes (each term is B · slope / √N)."""
    _check_pool(k, m)
    _check_nonnegative("risk", risk)
    _check_nonnegative("eps_loss", eps_loss)
    _check_delta(delta)
    loss_bound = smoothed_loss_bound(V, a)
    dimension = ssd(k, m) if k > 0 else 0.0
    # For k < √(6δ)/π (a dictionary that almost never fires) the union term's logarithm turns
    # negative; the union over k >= 1 it stands for costs at least nothing, so it is floored at 0.
    union = max(math.log(math.pi**2 * k**2 / (6.0 * delta)), 0.0) if k > 0 else 0.0
    slopes = (
        4.0 * math.sqrt(dimension),
        math.sqrt(union / 2.0),
        math.sqrt(math.log(1.0 / delta) / 2.0),
    )
    return loss_bound, slopes

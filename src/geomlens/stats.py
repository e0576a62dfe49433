"""Mergeable streaming statistics (the sufficient statistics analyses keep between batches)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from geomlens.plain_state import state_class


@state_class
@dataclass
class StreamingMoments:
    """Per-dimension count, mean, sum of squared deviations (M2), min and max over rows.

    Updates and merges use Chan et al.'s parallel algorithm, so any split of the data into
    batches or workers gives the same mean and variance up to rounding. Kept in float64 on the
    device the data lives on.
    """

    count: int | torch.Tensor = 0
    mean: torch.Tensor | None = None
    m2: torch.Tensor | None = None
    minimum: torch.Tensor | None = None
    maximum: torch.Tensor | None = None

    def update(self, rows: torch.Tensor) -> None:
        """Add rows ``[n, d]``."""
        if rows.dim() != 2:
            raise ValueError(
                f"StreamingMoments.update takes rows [n, d]; got shape {tuple(rows.shape)}."
            )
        if rows.shape[0] == 0:
            return
        rows = rows.detach().to(torch.float64)
        other = StreamingMoments(
            count=rows.shape[0],
            mean=rows.mean(dim=0),
            m2=((rows - rows.mean(dim=0)) ** 2).sum(dim=0),
            minimum=rows.min(dim=0).values,
            maximum=rows.max(dim=0).values,
        )
        self.merge(other)

    def update_masked(
        self, values: torch.Tensor, mask: torch.Tensor, *, select: bool | None = None
    ) -> None:
        """Add the rows of ``values`` ``[n, d]`` where ``mask`` ``[n]`` is true.

        On an accelerator nothing is read back to the host: the count stays a tensor on the
        device. (Selecting the rows with ``values[mask]`` would have to learn their number
        first, which stalls a GPU once per batch.) On a CPU the rows are selected (``select``
        None); ``select`` True or False forces one way (both give the same statistics).
        """
        if values.dim() != 2 or mask.shape != values.shape[:1]:
            raise ValueError(
                f"update_masked takes rows [n, d] and a mask [n]; got {tuple(values.shape)} and "
                f"{tuple(mask.shape)}."
            )
        if (values.device.type == "cpu") if select is None else select:
            # On a CPU selecting rows stalls nothing, and the statistics then cost work on the
            # real rows only (padding is most of a batch of texts of mixed length).
            self.update(values[mask.to(values.device).bool()])
            return
        keep = mask.to(values.device).bool().unsqueeze(1)
        # Masked rows are replaced, not weighted by 0: 0 × NaN is NaN (padding may hold NaN).
        values = torch.where(keep, values.detach().to(torch.float64), 0.0)
        weight = keep.to(torch.float64)
        count = (
            weight.sum()
        )  # float64: exact to 2**53 rows, and divides without rounding to float32
        mean = (values * weight).sum(dim=0) / count.clamp(min=1)
        self.merge(
            StreamingMoments(
                count=count,
                mean=mean,
                m2=((values - mean) ** 2 * weight).sum(dim=0),
                minimum=torch.where(keep, values, torch.inf).amin(dim=0),
                maximum=torch.where(keep, values, -torch.inf).amax(dim=0),
            )
        )

    def merge(self, other: StreamingMoments) -> None:
        """Fold ``other`` (statistics of disjoint rows) into this one.

        Counts may be ints or device tensors (from :meth:`update_masked`); no branch here
        depends on a device value, so merging never synchronises with a GPU.
        """
        if other.mean is None:
            return
        # mean, m2, minimum and maximum are set together: all None or all tensors.
        assert other.m2 is not None and other.minimum is not None and other.maximum is not None
        if self.mean is None:
            self.count, self.mean, self.m2 = other.count, other.mean.clone(), other.m2.clone()
            self.minimum, self.maximum = other.minimum.clone(), other.maximum.clone()
            return
        if other.mean.shape != self.mean.shape:
            raise ValueError(
                f"Cannot merge statistics of dimension {tuple(other.mean.shape)} into "
                f"{tuple(self.mean.shape)}."
            )
        assert self.m2 is not None and self.minimum is not None and self.maximum is not None
        other_mean = other.mean.to(self.mean.device)
        total = self.count + other.count
        # Two masked batches with no real row: weights 0, and no division by zero.
        divisor = total.clamp(min=1) if isinstance(total, torch.Tensor) else max(total, 1)
        delta = other_mean - self.mean
        self.mean = self.mean + delta * (other.count / divisor)
        self.m2 = (
            self.m2 + other.m2.to(self.m2.device) + delta**2 * (self.count * other.count / divisor)
        )
        self.minimum = torch.minimum(self.minimum, other.minimum.to(self.minimum.device))
        self.maximum = torch.maximum(self.maximum, other.maximum.to(self.maximum.device))
        self.count = total

    def variance(self, ddof: int = 0) -> torch.Tensor:
        if self.m2 is None or self.count - ddof <= 0:
            raise ValueError(
                f"Variance with ddof={ddof} needs more than {ddof} rows; have {self.count}."
            )
        return self.m2 / (self.count - ddof)


def auroc(negatives: np.ndarray, positives: np.ndarray) -> np.ndarray:
    """AUROC of ``positives`` against ``negatives`` along the last axis (Mann-Whitney with
    midranks, so ties count one half): the probability that a positive scores above a negative.
    Leading axes are batch axes (one AUROC per resample)."""
    from scipy.stats import rankdata

    negatives, positives = np.asarray(negatives, float), np.asarray(positives, float)
    n0, n1 = negatives.shape[-1], positives.shape[-1]
    ranks = rankdata(np.concatenate([negatives, positives], axis=-1), axis=-1)
    return (ranks[..., n0:].sum(-1) - n1 * (n1 + 1) / 2) / (n0 * n1)


def auroc_interval(
    negatives: np.ndarray,
    positives: np.ndarray,
    *,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the AUROC, each class resampled with replacement on
    its own (stratified, so every resample keeps both class sizes). NaN with fewer than two
    scores in a class or no resamples."""
    # Sorted, so the interval depends on the scores and not on the order rows arrived in (two
    # ranks' merged lists give the interval one process gives).
    negatives = np.sort(np.asarray(negatives, float))
    positives = np.sort(np.asarray(positives, float))
    if min(len(negatives), len(positives)) < 2 or resamples < 1:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    draws_0 = negatives[rng.integers(len(negatives), size=(resamples, len(negatives)))]
    draws_1 = positives[rng.integers(len(positives), size=(resamples, len(positives)))]
    values = auroc(draws_0, draws_1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def _auroc_placements(negatives: np.ndarray, positives: np.ndarray) -> tuple[np.ndarray, ...]:
    """DeLong's placements: for each positive the share of negatives below it, for each
    negative the share of positives above it (ties one half)."""
    above = (positives[:, None] > negatives[None, :]) + 0.5 * (positives[:, None] == negatives)
    return above.mean(1), above.mean(0)


def pairing_design_effect(negatives: np.ndarray, positives: np.ndarray) -> float:
    """How much pairing changes the AUROC's variance: DeLong's variance for ``n`` pairs
    (positive i made from negative i), Var(V₁₀ᵢ + V₀₁ᵢ)/n, over his variance for independent
    samples, Var(V₁₀)/n + Var(V₀₁)/n. 1 when the unpaired variance is 0 (complete separation
    or all ties: no information on the pairing)."""
    negatives, positives = np.asarray(negatives, float), np.asarray(positives, float)
    if len(negatives) != len(positives) or len(negatives) < 2:
        raise ValueError(
            f"A paired AUROC needs as many positives as negatives (pair i is positive i and "
            f"negative i), at least two; got {len(positives)} and {len(negatives)}."
        )
    v10, v01 = _auroc_placements(negatives, positives)
    unpaired = v10.var(ddof=1) + v01.var(ddof=1)
    return float((v10 + v01).var(ddof=1) / unpaired) if unpaired > 0 else 1.0


def auroc_score_interval(
    negatives: np.ndarray,
    positives: np.ndarray,
    *,
    confidence: float = 0.95,
    paired: bool = False,
) -> tuple[float, float]:
    """Newcombe's score-type interval of the AUROC (Newcombe 2006, Part 2, method 5), valid at
    the boundary: the θ with (θ̂ − θ)² ≤ z²·V(θ), V the Hanley–McNeil variance of an AUROC of
    θ with both sample sizes replaced by their mean N* = (n₀ + n₁)/2,

        V(θ) = θ(1 − θ)·[1 + (N* − 1)·((1 − θ)/(2 − θ) + θ/(1 + θ))] / (n₀ n₁).

    Complete separation (θ̂ = 1) gives [low, 1] with low < 1, never [1, 1]. ``paired``: positive
    i was made from negative i (the same row with tokens replaced); V(θ) is then scaled by the
    pairing's design effect (:func:`pairing_design_effect`, measured at θ̂). NaN with fewer
    than two scores in a class."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    negatives = np.asarray(negatives, float)
    positives = np.asarray(positives, float)
    n0, n1 = len(negatives), len(positives)
    if min(n0, n1) < 2:
        return math.nan, math.nan
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1); got {confidence}.")
    estimate = float(auroc(negatives, positives))
    effect = pairing_design_effect(negatives, positives) if paired else 1.0
    z = float(norm.ppf(0.5 + confidence / 2))
    half = (n0 + n1) / 2 - 1

    def excess(theta: Any) -> Any:  # a number or an array of them
        variance = (
            theta * (1 - theta) * (1 + half * ((1 - theta) / (2 - theta) + theta / (1 + theta)))
        ) / (n0 * n1)
        return (estimate - theta) ** 2 - z**2 * effect * variance

    # The interval is where excess ≤ 0; it holds θ̂. Each end: the sign change on a fine grid
    # between θ̂ and the edge, refined by Brent's method (an edge inside it is the end).
    def end(edge: float) -> float:
        grid = np.linspace(estimate, edge, 2001)
        values = excess(grid)
        outside = np.flatnonzero(values > 0)
        if len(outside) == 0:
            return edge
        first = int(outside[0])
        if first == 0:
            return estimate
        return float(brentq(lambda t: float(excess(t)), grid[first - 1], grid[first], xtol=1e-12))

    return end(0.0), end(1.0)

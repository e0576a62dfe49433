"""Counting active latents: per-condition statistics, the pool G and its growth, mismatch η̂.

Everything here merges (two halves of the data give the same state as one pass).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from geomlens.analyses.sae_features.config import CALIBRATION
from geomlens.plain_state import state_class

NEVER = np.iinfo(np.int64).max


@state_class
@dataclass
class ConditionStats:
    """Mergeable statistics of one condition at one site."""

    mean_k: list[float] = field(default_factory=list)
    max_k: list[int] = field(default_factory=list)
    tokens: int = 0
    k_sum: float = 0.0
    histogram: np.ndarray | None = None
    #: Per input, the latents active anywhere in it (np.packbits of a [m] bool); not kept for
    #: calibration rows, whose union is the pool itself.
    latents: list[np.ndarray] = field(default_factory=list)
    #: Per input with a loss: (model loss, spliced loss, shuffled loss, predicted tokens).
    losses: list[tuple[float, float, float, int]] = field(default_factory=list)

    def merge(self, other: ConditionStats) -> None:
        self.mean_k += other.mean_k
        self.max_k += other.max_k
        self.tokens += other.tokens
        self.k_sum += other.k_sum
        if other.histogram is not None:
            self.histogram = (
                other.histogram.copy()
                if self.histogram is None
                else self.histogram + other.histogram
            )
        self.latents += other.latents
        self.losses += other.losses


@state_class
@dataclass
class SiteState:
    """Everything sae-features keeps for one SAE at one site."""

    m: int
    #: For each latent, the calibration token (counted in row order) where it first joined G.
    first_seen: np.ndarray
    calibration_tokens: int = 0
    conditions: dict[str, ConditionStats] = field(default_factory=dict)
    vocab_size: int | None = None

    @classmethod
    def empty(cls, m: int) -> SiteState:
        return cls(m=m, first_seen=np.full(m, NEVER, dtype=np.int64))

    def merge(self, other: SiteState) -> None:
        shifted = np.where(
            other.first_seen == NEVER, NEVER, other.first_seen + self.calibration_tokens
        )
        self.first_seen = np.minimum(self.first_seen, shifted)
        self.calibration_tokens += other.calibration_tokens
        for name, stats in other.conditions.items():
            self.conditions.setdefault(name, ConditionStats()).merge(stats)
        self.vocab_size = self.vocab_size or other.vocab_size

    @property
    def pool(self) -> np.ndarray:
        return self.first_seen != NEVER


def count_active(
    state: SiteState,
    latents: torch.Tensor,
    mask: torch.Tensor,
    conditions: np.ndarray,
    *,
    threshold: float,
    pool_top_k: int | None,
) -> None:
    """Fold one batch's latents into ``state``: k per token, and the pool G from calibration
    rows (each latent's first calibration token) or, for other rows, the latents each used."""
    active = latents > threshold
    counts = active.sum(-1)  # k per token [B, T]
    eligible = active
    if pool_top_k is not None:
        top = latents.topk(min(pool_top_k, state.m), dim=-1).indices
        eligible = torch.zeros_like(active).scatter_(-1, top, True) & active
    eligible = eligible & mask[..., None]
    for row, condition in enumerate(conditions):
        real = mask[row]
        k = counts[row][real].cpu().numpy()
        if len(k) == 0:
            continue
        stats = state.conditions.setdefault(str(condition), ConditionStats())
        stats.mean_k.append(float(k.mean()))
        stats.max_k.append(int(k.max()))
        stats.tokens += len(k)
        stats.k_sum += float(k.sum())
        histogram = np.bincount(k, minlength=state.m + 1).astype(np.int64)
        stats.histogram = histogram if stats.histogram is None else stats.histogram + histogram
        used = eligible[row][real]  # [tokens, m]
        if condition == CALIBRATION:
            seen = used.any(0).cpu().numpy()
            first = used.int().argmax(0).cpu().numpy()  # first token where each is active
            new = seen & (state.first_seen == NEVER)
            state.first_seen[new] = state.calibration_tokens + first[new]
            state.calibration_tokens += len(k)
        else:
            stats.latents.append(np.packbits(used.any(0).cpu().numpy()))


def pool_mismatch(latents: list[np.ndarray], pool: np.ndarray, m: int) -> float:
    """Fraction of inputs with any active latent outside the pool."""
    outside = ~pool
    leaves = [
        bool((np.unpackbits(packed, count=m).astype(bool) & outside).any()) for packed in latents
    ]
    return float(np.mean(leaves))


def pool_growth(site: str, state: SiteState, points: int = 40) -> list[dict[str, Any]]:
    if state.calibration_tokens == 0:
        return []
    first = np.sort(state.first_seen[state.first_seen != NEVER])
    grid = np.unique(np.geomspace(1, state.calibration_tokens, points).round().astype(np.int64))
    sizes = np.searchsorted(first, grid, side="left")  # latents first seen before token t
    return [{"site": site, "tokens": int(t), "pool_size": int(p)} for t, p in zip(grid, sizes)]

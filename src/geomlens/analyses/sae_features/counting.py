"""Counting active latents: per-condition statistics, the pool G and its growth, mismatch η̂.

Everything here merges (two halves of the data give the same state as one pass).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from geomlens.analyses.sae_features.config import CALIBRATION, HELDOUT
from geomlens.hooks.content_tokens import TokenSelection
from geomlens.plain_state import state_class

#: What ``geomlens.analyses.sae_features`` re-exports from here (the counting functions are
#: the analysis's own).
__all__ = ["NEVER", "ConditionStats", "SiteState"]

NEVER = np.iinfo(np.int64).max


@state_class
@dataclass
class ConditionStats:
    """Mergeable statistics of one condition at one site.

    ``mean_k`` ... ``histogram`` count every real token (the paper's way, special tokens and
    sinks included); the ``*_content`` fields count only content tokens (sae-lens's way). An
    input whose every token is excluded gets NaN content counts.
    """

    mean_k: list[float] = field(default_factory=list)
    max_k: list[int] = field(default_factory=list)
    tokens: int = 0
    k_sum: float = 0.0
    histogram: np.ndarray | None = None
    mean_k_content: list[float] = field(default_factory=list)
    max_k_content: list[float] = field(default_factory=list)
    tokens_content: int = 0
    k_sum_content: float = 0.0
    histogram_content: np.ndarray | None = None
    #: Real tokens per input; special tokens and sinks among them.
    lengths: list[int] = field(default_factory=list)
    special_tokens: int = 0
    sink_tokens: int = 0
    sinks_at_first_position: int = 0
    #: On content tokens: Σ‖x − x̂‖², Σ‖x‖² and Σx, for the explained variance.
    residual_sq: float = 0.0
    input_sq: float = 0.0
    input_sum: np.ndarray | None = None
    #: Per input, the latents active anywhere in it (np.packbits of a [m] bool); not kept for
    #: calibration rows, whose union is the pool itself.
    latents: list[np.ndarray] = field(default_factory=list)
    #: Per input with a loss: (model loss, spliced loss, shuffled loss, predicted tokens).
    losses: list[tuple[float, float, float, int]] = field(default_factory=list)

    def merge(self, other: ConditionStats) -> None:
        for name in ("mean_k", "max_k", "mean_k_content", "max_k_content", "lengths"):
            getattr(self, name).extend(getattr(other, name))
        for name in (
            "tokens", "k_sum", "tokens_content", "k_sum_content", "special_tokens",
            "sink_tokens", "sinks_at_first_position", "residual_sq", "input_sq",
        ):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("histogram", "histogram_content", "input_sum"):
            theirs = getattr(other, name)
            if theirs is not None:
                mine = getattr(self, name)
                setattr(self, name, theirs.copy() if mine is None else mine + theirs)
        self.latents += other.latents
        self.losses += other.losses

    @property
    def explained_variance(self) -> float:
        """1 − Σ‖x − x̂‖² / Σ‖x − x̄‖² over content tokens (sae-lens's explained variance)."""
        if self.tokens_content == 0 or self.input_sum is None:
            return math.nan
        total = self.input_sq - float(self.input_sum @ self.input_sum) / self.tokens_content
        return 1.0 - self.residual_sq / total if total > 0 else math.nan


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
    #: Latents active on at least one content token of any condition (the rest are dead).
    fired: np.ndarray | None = None

    @classmethod
    def empty(cls, m: int) -> SiteState:
        return cls(m=m, first_seen=np.full(m, NEVER, dtype=np.int64), fired=np.zeros(m, bool))

    def merge(self, other: SiteState) -> None:
        shifted = np.where(
            other.first_seen == NEVER, NEVER, other.first_seen + self.calibration_tokens
        )
        self.first_seen = np.minimum(self.first_seen, shifted)
        self.calibration_tokens += other.calibration_tokens
        for name, stats in other.conditions.items():
            self.conditions.setdefault(name, ConditionStats()).merge(stats)
        self.vocab_size = self.vocab_size or other.vocab_size
        if other.fired is not None:
            self.fired = other.fired.copy() if self.fired is None else self.fired | other.fired

    @property
    def pool(self) -> np.ndarray:
        return self.first_seen != NEVER


def count_active(
    state: SiteState,
    latents: torch.Tensor,
    selection: TokenSelection,
    conditions: np.ndarray,
    *,
    threshold: float,
    pool_top_k: int | None,
) -> None:
    """Fold one batch's latents into ``state``: k per token both ways (every real token, and
    content tokens only), lengths and excluded tokens, the latents that fired on in-distribution
    content, and the pool G from calibration rows (each latent's first calibration token) or,
    for other rows, the latents each used."""
    mask = selection.real.to(latents.device)
    content = selection.content.to(latents.device)
    active = latents > threshold
    counts = active.sum(-1)  # k per token [B, T]
    # Dead latents are judged on in-distribution text (calibration and held-out rows).
    in_distribution = torch.from_numpy(np.isin(conditions, (CALIBRATION, HELDOUT)))
    in_distribution = in_distribution.to(latents.device)[:, None, None]
    fired = (active & content[..., None] & in_distribution).any(dim=(0, 1)).cpu().numpy()
    state.fired = fired if state.fired is None else state.fired | fired
    eligible = active
    if pool_top_k is not None:
        top = latents.topk(min(pool_top_k, state.m), dim=-1).indices
        eligible = torch.zeros_like(active).scatter_(-1, top, True) & active
    eligible = eligible & mask[..., None]
    host_counts, host_mask = counts.cpu().numpy(), mask.cpu().numpy()
    host_content = content.cpu().numpy()
    host_special, host_sink = selection.special.cpu().numpy(), selection.sink.cpu().numpy()
    for row, condition in enumerate(conditions):
        real = host_mask[row]
        k = host_counts[row][real]
        if len(k) == 0:
            continue
        stats = state.conditions.setdefault(str(condition), ConditionStats())
        stats.mean_k.append(float(k.mean()))
        stats.max_k.append(int(k.max()))
        stats.tokens += len(k)
        stats.k_sum += float(k.sum())
        histogram = np.bincount(k, minlength=state.m + 1).astype(np.int64)
        stats.histogram = histogram if stats.histogram is None else stats.histogram + histogram
        stats.lengths.append(len(k))
        stats.special_tokens += int(host_special[row].sum())
        sinks = host_sink[row]
        stats.sink_tokens += int(sinks.sum())
        stats.sinks_at_first_position += int(sinks[np.flatnonzero(real)[0]])
        kept = host_counts[row][host_content[row]]
        stats.mean_k_content.append(float(kept.mean()) if len(kept) else math.nan)
        stats.max_k_content.append(float(kept.max()) if len(kept) else math.nan)
        stats.tokens_content += len(kept)
        stats.k_sum_content += float(kept.sum())
        histogram = np.bincount(kept, minlength=state.m + 1).astype(np.int64)
        stats.histogram_content = (
            histogram if stats.histogram_content is None else stats.histogram_content + histogram
        )
        used = eligible[row][mask[row]]  # [tokens, m]
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

"""Counting active latents: per-condition statistics, the pool G and its growth, mismatch η̂.

Everything here merges (two halves of the data give the same state as one pass).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import torch

from geomlens.analyses.sae_features.config import CALIBRATION, HELDOUT
from geomlens.inputs.content_tokens import TokenSelection
from geomlens.inputs.encoding import to_device
from geomlens.plain_state import state_class

#: What ``geomlens.analyses.sae_features`` re-exports from here (the counting functions are
#: the analysis's own).
__all__ = ["NEVER", "ConditionStats", "SiteState"]

NEVER = np.iinfo(np.int64).max


Count = int | torch.Tensor  # a host number once settled, a 0-dim device tensor while counting
Total = float | torch.Tensor

#: Columns of :attr:`ConditionStats.pending_rows`.
_ROW_COLUMNS = (
    "mean_k", "max_k", "lengths", "mean_k_content", "max_k_content", "pairs", "norms",
)  # fmt: skip
_SUMS = (
    "tokens", "k_sum", "tokens_content", "k_sum_content", "special_tokens", "sink_tokens",
    "sinks_at_first_position", "residual_sq", "input_sq",
)  # fmt: skip
_INTEGER_SUMS = ("tokens", "tokens_content", "special_tokens", "sink_tokens")
_VECTORS = ("histogram", "histogram_content", "input_sum")


@state_class
@dataclass
class ConditionStats:
    """Mergeable statistics of one condition at one site.

    ``mean_k`` ... ``histogram`` count every real token (the paper's way, special tokens and
    sinks included); the ``*_content`` fields count only content tokens (sae-lens's way). An
    input whose every token is excluded gets NaN content counts.

    While batches are counted, the sums, histograms and the per-input records stay on the
    device (``pending_*``: one tensor per batch), so that no batch waits for a read;
    :meth:`settle` brings them to the host fields below, once, when the state is read.
    """

    mean_k: list[float] = field(default_factory=list)
    max_k: list[int] = field(default_factory=list)
    tokens: Count = 0
    k_sum: Total = 0.0
    histogram: np.ndarray | torch.Tensor | None = None
    mean_k_content: list[float] = field(default_factory=list)
    max_k_content: list[float] = field(default_factory=list)
    tokens_content: Count = 0
    k_sum_content: Total = 0.0
    histogram_content: np.ndarray | torch.Tensor | None = None
    #: Real tokens per input; special tokens and sinks among them.
    lengths: list[int] = field(default_factory=list)
    special_tokens: Count = 0
    sink_tokens: Count = 0
    sinks_at_first_position: Count = 0
    #: On content tokens: Σ‖x − x̂‖², Σ‖x‖² and Σx, for the explained variance.
    residual_sq: Total = 0.0
    input_sq: Total = 0.0
    input_sum: np.ndarray | torch.Tensor | None = None
    #: Per input, the held-out row it is paired with (its ``source_row``; −1: none) and the
    #: mean activation norm over its content tokens (NaN without one).
    pairs: list[int] = field(default_factory=list)
    norms: list[float] = field(default_factory=list)
    #: Per input, the latents active anywhere in it (np.packbits of a [m] bool); not kept for
    #: calibration rows, whose union is the pool itself.
    latents: list[np.ndarray] = field(default_factory=list)
    #: Per input, its mean activation over content tokens (float64 [d]; NaN without one), for
    #: the Mahalanobis baseline; not kept for calibration rows.
    pooled: list[np.ndarray] = field(default_factory=list)
    #: Per input with a loss: (model loss, spliced loss, shuffled loss, predicted tokens).
    losses: list[tuple[float, float, float, int]] = field(default_factory=list)
    #: Not yet settled, per batch on the device: ``[n, 5]`` float64 (the columns of
    #: ``_ROW_COLUMNS``; inputs without a real token are dropped when settled), their packed
    #: latents ``[n, ⌈m/8⌉]`` uint8, and ``[n, 4]`` float64 losses (inputs that predicted no
    #: token are dropped when settled).
    pending_rows: list[torch.Tensor] = field(default_factory=list)
    pending_latents: list[torch.Tensor] = field(default_factory=list)
    pending_pooled: list[torch.Tensor] = field(default_factory=list)
    pending_losses: list[torch.Tensor] = field(default_factory=list)

    def add(self, name: str, value: torch.Tensor) -> None:
        """Add a device sum (0-dim, or a histogram or Σx vector) to field ``name``."""
        current = getattr(self, name)
        if current is None:
            setattr(self, name, value)
            return
        if isinstance(current, np.ndarray):  # settled before: back to the device
            current = torch.from_numpy(current)
        if isinstance(current, torch.Tensor):
            current = current.to(value.device)
        setattr(self, name, current + value)

    def settle(self) -> None:
        """Bring what is on the device to the host fields (one read per kind); idempotent."""
        if self.pending_rows:
            rows = _host(self.pending_rows)
            real = rows[:, 2] > 0
            for column, values in zip(_ROW_COLUMNS, rows[real].T):
                kind = int if column in ("max_k", "lengths", "pairs") else float
                getattr(self, column).extend(kind(v) for v in values)
            if self.pending_latents:
                self.latents.extend(row.copy() for row in _host(self.pending_latents)[real])
            if self.pending_pooled:
                self.pooled.extend(row.copy() for row in _host(self.pending_pooled)[real])
            self.pending_rows, self.pending_latents, self.pending_pooled = [], [], []
        if self.pending_losses:
            losses = _host(self.pending_losses)
            self.losses.extend(
                (float(a), float(b), float(c), int(n)) for a, b, c, n in losses[losses[:, 3] > 0]
            )
            self.pending_losses = []
        for name in _SUMS:
            value = getattr(self, name)
            if isinstance(value, torch.Tensor):
                setattr(self, name, int(value) if name in _INTEGER_SUMS else float(value))
        for name in _VECTORS:
            value = getattr(self, name)
            if isinstance(value, torch.Tensor):
                setattr(self, name, value.cpu().numpy())

    def settled(self) -> ConditionStats:
        """These statistics settled, as new statistics (this one stays as it is: its lists are
        copied, never its tensors)."""
        lists: dict[str, Any] = {
            f.name: list(v) for f in fields(self) if isinstance(v := getattr(self, f.name), list)
        }
        copied = replace(self, **lists)
        copied.settle()
        return copied

    def merge(self, other: ConditionStats) -> None:
        self.settle()
        other = other.settled()  # other's state stays as it is
        for name in ("mean_k", "max_k", "mean_k_content", "max_k_content", "lengths", "pairs",
                     "norms"):  # fmt: skip
            getattr(self, name).extend(getattr(other, name))
        for name in _SUMS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in _VECTORS:
            theirs = getattr(other, name)
            if theirs is not None:
                mine = getattr(self, name)
                setattr(self, name, theirs.copy() if mine is None else mine + theirs)
        self.latents += other.latents
        self.pooled += other.pooled
        self.losses += other.losses

    @property
    def explained_variance(self) -> float:
        """1 − Σ‖x − x̂‖² / Σ‖x − x̄‖² over content tokens (sae-lens's explained variance)."""
        self.settle()
        if self.tokens_content == 0 or self.input_sum is None:
            return math.nan
        total = float(self.input_sq) - float(self.input_sum @ self.input_sum) / int(
            self.tokens_content
        )
        return 1.0 - float(self.residual_sq) / total if total > 0 else math.nan


def _host(parts: list[torch.Tensor]) -> np.ndarray:
    """Per-batch device tensors as one host array (one read)."""
    device = parts[-1].device
    return torch.cat([p.to(device) for p in parts]).cpu().numpy()


@state_class
@dataclass
class SiteState:
    """Everything sae-features keeps for one SAE at one site.

    While counting, ``first_seen``, ``calibration_tokens`` and ``fired`` are device tensors;
    :meth:`settle` brings them (and every condition's statistics) to the host."""

    m: int
    #: For each latent, the calibration token (counted in row order) where it first joined G.
    first_seen: np.ndarray | torch.Tensor
    calibration_tokens: Count = 0
    conditions: dict[str, ConditionStats] = field(default_factory=dict)
    vocab_size: int | None = None
    #: Latents active on at least one content token of any condition (the rest are dead).
    fired: np.ndarray | torch.Tensor | None = None

    @classmethod
    def empty(cls, m: int) -> SiteState:
        return cls(m=m, first_seen=np.full(m, NEVER, dtype=np.int64), fired=np.zeros(m, bool))

    def on_device(self, device: torch.device) -> None:
        """``first_seen``, ``calibration_tokens`` and ``fired`` as tensors on ``device``."""
        self.first_seen = to_device(self.first_seen, device)
        self.calibration_tokens = to_device(self.calibration_tokens, device)
        if self.fired is not None:
            self.fired = to_device(self.fired, device)

    def settle(self) -> None:
        """Everything on the device brought to the host; idempotent."""
        if isinstance(self.first_seen, torch.Tensor):
            self.first_seen = self.first_seen.cpu().numpy()
        if isinstance(self.calibration_tokens, torch.Tensor):
            self.calibration_tokens = int(self.calibration_tokens)
        if isinstance(self.fired, torch.Tensor):
            self.fired = self.fired.cpu().numpy()
        for stats in self.conditions.values():
            stats.settle()

    def settled(self) -> SiteState:
        """This state settled, as a new state (this one stays as it is)."""
        conditions = {name: stats.settled() for name, stats in self.conditions.items()}
        copied = replace(self, conditions=conditions)
        copied.settle()
        return copied

    def merge(self, other: SiteState) -> None:
        self.settle()
        other = other.settled()  # other's state stays as it is
        shifted = np.where(
            other.first_seen == NEVER, NEVER, other.first_seen + self.calibration_tokens
        )
        self.first_seen = np.minimum(self.first_seen, shifted)
        self.calibration_tokens += other.calibration_tokens
        for name, stats in other.conditions.items():
            self.conditions.setdefault(name, ConditionStats()).merge(stats)
        self.vocab_size = self.vocab_size or other.vocab_size
        if other.fired is not None:
            assert isinstance(other.fired, np.ndarray)  # settled above
            self.fired = other.fired.copy() if self.fired is None else self.fired | other.fired

    @property
    def pool(self) -> np.ndarray:
        self.settle()
        return np.asarray(self.first_seen != NEVER)


def pack_bits(bits: torch.Tensor) -> torch.Tensor:
    """``np.packbits`` along the last axis, on the device: ``[..., m]`` bool → ``[..., ⌈m/8⌉]``
    uint8, most significant bit first, the last byte padded with zeros."""
    m = bits.shape[-1]
    padded = torch.nn.functional.pad(bits.to(torch.uint8), (0, (-m) % 8))
    weights = torch.tensor([128, 64, 32, 16, 8, 4, 2, 1], dtype=torch.uint8, device=bits.device)
    return (padded.reshape(*bits.shape[:-1], -1, 8) * weights).sum(-1, dtype=torch.uint8)


def count_active(
    state: SiteState,
    latents: torch.Tensor,
    selection: TokenSelection,
    conditions: np.ndarray,
    *,
    threshold: float,
    pool_top_k: int | None,
    activation: torch.Tensor | None = None,
    pairs: np.ndarray | None = None,
) -> None:
    """Fold one batch's latents into ``state``: k per token both ways (every real token, and
    content tokens only), lengths and excluded tokens, the latents that fired on in-distribution
    content, and the pool G from calibration rows (each latent's first calibration token) or,
    for other rows, the latents each used.

    ``activation`` (the SAE's input, [B, T, d]) gives each input's mean content-token norm
    and mean content activation (the baselines' scores); ``pairs`` each input's
    ``source_row`` (None: −1, unpaired).

    Everything is computed and kept on the latents' device (the conditions, host labels, go
    there; nothing comes back): the state is read back when it settles, in finalize."""
    device = latents.device
    state.on_device(device)
    mask = selection.real.to(device).bool()
    content = selection.content.to(device).bool()
    active = latents > threshold
    counts = active.sum(-1)  # k per token [B, T]
    # Dead latents are judged on in-distribution text (calibration and held-out rows).
    in_distribution = to_device(np.isin(conditions, (CALIBRATION, HELDOUT)), device)
    fired = (active & content[..., None] & in_distribution[:, None, None]).any(dim=(0, 1))
    state.fired = fired if state.fired is None else state.fired | fired
    top_k = min(pool_top_k, state.m) if pool_top_k is not None else None
    eligible = _pool_eligible(latents, active, top_k) & mask[..., None]
    per_input, totals = _per_input(counts, mask, content, len(conditions), pairs)
    pooled = None
    if activation is not None:
        pooled = _activation_scores(per_input, activation, content, totals["tokens_content"])
    special = selection.special.to(device).bool() & mask
    sink = selection.sink.to(device).bool() & mask
    first_real = mask.int().argmax(-1, keepdim=True)  # an empty row's 0 is not a sink (& mask)
    totals["special_tokens"], totals["sink_tokens"] = special, sink
    totals["sinks_at_first_position"] = sink.gather(1, first_real).squeeze(1)
    histogram_index = counts.reshape(-1)
    for condition in dict.fromkeys(conditions.tolist()):
        chosen = np.flatnonzero(conditions == condition)
        rows = to_device(chosen, device)
        stats = state.conditions.setdefault(str(condition), ConditionStats())
        stats.pending_rows.append(per_input[rows])
        for name, per_row in totals.items():  # tokens, k sums, special tokens, sinks
            stats.add(name, per_row[rows].sum())
        picked = to_device(np.isin(np.arange(len(conditions)), chosen), device)[:, None]
        for name, tokens in (("histogram", mask), ("histogram_content", content)):
            weights = (tokens & picked).reshape(-1).long()
            zeros = torch.zeros(state.m + 1, dtype=torch.int64, device=device)
            stats.add(name, zeros.scatter_add_(0, histogram_index, weights))
        used = eligible[rows]  # [n, T, m], real tokens only
        if condition == CALIBRATION:
            _first_calibration_tokens(state, used, mask[rows], totals["tokens"][rows])
        else:
            stats.pending_latents.append(pack_bits(used.any(1)))
            if pooled is not None:
                stats.pending_pooled.append(pooled[rows])


def _pool_eligible(latents: torch.Tensor, active: torch.Tensor, top_k: int | None) -> torch.Tensor:
    """The latents that may join the pool at each token: the active ones, or (``top_k``) only
    those among each token's ``top_k`` largest."""
    if top_k is None:
        return active
    top = latents.topk(top_k, dim=-1).indices
    return torch.zeros_like(active).scatter_(-1, top, True) & active


def _per_input(
    counts: torch.Tensor,
    mask: torch.Tensor,
    content: torch.Tensor,
    inputs: int,
    pairs: np.ndarray | None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per input [B, 7]: k's mean and max over real tokens, the length, k's mean and max over
    content tokens (NaN without any), the paired ``source_row`` (−1: unpaired) and a NaN
    column for the activation norm; with the per-input totals the conditions add up, by name
    (tokens, k sums, both ways)."""
    device = counts.device
    lengths, content_lengths = mask.sum(-1), content.sum(-1)
    k_sums, k_sums_content = (counts * mask).sum(-1), (counts * content).sum(-1)
    nan = torch.tensor(math.nan, dtype=torch.float64, device=device)
    none = torch.tensor(-1, dtype=counts.dtype, device=device)
    max_k = torch.where(mask, counts, none).amax(-1)
    max_k_content = torch.where(content, counts, none).amax(-1).double()
    per_input = torch.stack(
        [
            k_sums.double() / lengths.clamp(min=1),
            max_k.double(),
            lengths.double(),
            torch.where(content_lengths > 0, k_sums_content.double() / content_lengths, nan),
            torch.where(content_lengths > 0, max_k_content, nan),
            to_device(
                np.full(inputs, -1.0) if pairs is None else np.asarray(pairs, float), device
            ).double(),
            torch.full_like(lengths, math.nan, dtype=torch.float64),
        ],
        dim=-1,
    )
    totals = {
        "tokens": lengths,
        "k_sum": k_sums,
        "tokens_content": content_lengths,
        "k_sum_content": k_sums_content,
    }
    return per_input, totals


def _activation_scores(
    per_input: torch.Tensor,
    activation: torch.Tensor,
    content: torch.Tensor,
    content_lengths: torch.Tensor,
) -> torch.Tensor:
    """Fill ``per_input``'s last column with each input's mean content-token norm and return
    its mean content activation [B, d] (the baselines' scores; NaN without content)."""
    device = per_input.device
    nan = torch.tensor(math.nan, dtype=torch.float64, device=device)
    x = torch.where(content[..., None], activation.detach().to(device, torch.float64), 0.0)
    divisor = torch.where(content_lengths > 0, content_lengths.double(), nan)[:, None]
    per_input[:, 6] = x.norm(dim=-1).sum(-1) / divisor[:, 0]
    return x.sum(1) / divisor


def _first_calibration_tokens(
    state: SiteState, used: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor
) -> None:
    """Each latent's first calibration token (counted over real tokens, rows in order) among
    these calibration rows, where it had none yet; the rows' tokens added to the count.

    Row r's tokens are numbered from ``calibration_tokens`` + the lengths of the rows before
    it, so the earliest use over all rows is the minimum of those numbers (kept on the
    device)."""
    # on_device() made first_seen a device tensor before counting.
    assert isinstance(state.first_seen, torch.Tensor)
    starts = state.calibration_tokens + lengths.cumsum(0) - lengths  # [n]
    position = (mask.long().cumsum(-1) - 1).clamp(min=0)  # [n, T]: a real token's number
    first = used.to(torch.uint8).argmax(1)  # [n, m]: first position where each is active
    number = starts[:, None] + position.gather(1, first)
    never = torch.full_like(number, NEVER)
    earliest = torch.where(used.any(1), number, never).amin(0)
    state.first_seen = torch.minimum(state.first_seen, earliest)
    state.calibration_tokens = state.calibration_tokens + lengths.sum()


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

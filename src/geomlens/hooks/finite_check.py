"""Catch NaN / Inf activations and name the site and the batch where they first appeared.

A non-finite activation poisons every statistic an analysis folds it into, silently: means,
covariances and probes all become NaN, and the result looks like a broken analysis. The engine
watches every captured site instead. The check stays on the device (a running "first bad batch"
per site, no host read per batch, so a GPU run is not stalled) and is read when the pass ends
or before a checkpoint is saved; only real (non-padding) tokens count.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch


class NonFiniteActivationError(ValueError):
    """Activations at a site held NaN or Inf; the message names the site and the batch."""


class NonFiniteWatch:
    """Per site, the number of the first batch whose real tokens held a NaN or an Inf."""

    def __init__(self) -> None:
        self._first_bad: dict[str, torch.Tensor] = {}
        self._rows: dict[int, tuple[int, int]] = {}

    def update(
        self,
        number: int,
        activations: Mapping[str, torch.Tensor],
        attention_mask: torch.Tensor,
        index: np.ndarray,
    ) -> None:
        """Fold batch ``number`` (dataset rows ``index``) into the watch, on the device."""
        if len(index):
            self._rows[number] = (int(np.min(index)), int(np.max(index)))
        for site, activation in activations.items():
            bad = _has_non_finite(activation, attention_mask)
            first = self._first_bad.get(site)
            if first is None:
                first = torch.full((), -1, dtype=torch.long, device=activation.device)
            self._first_bad[site] = torch.where((first < 0) & bad, number, first)

    def raise_if_any(self) -> None:
        """Raise :class:`NonFiniteActivationError` if any site has seen a non-finite value."""
        found = {site: int(first) for site, first in self._first_bad.items() if int(first) >= 0}
        if not found:
            return
        site, number = min(found.items(), key=lambda item: item[1])
        low, high = self._rows.get(number, (-1, -1))
        others = sorted(set(found) - {site})
        also = f" (also at {', '.join(others)})" if others else ""
        raise NonFiniteActivationError(
            f"Activations at site {site!r} hold NaN or Inf in batch {number} (dataset rows "
            f"{low}..{high}){also}. Check those inputs and the model's numerics (dtype: try "
            "float32 instead of float16, or a smaller input), or choose another site."
        )


#: Elements checked at once: bounds the temporary boolean tensor (16 MB), so that checking the
#: logits of a large vocabulary never doubles a batch's memory.
_CHUNK_ELEMENTS = 2**24


def _has_non_finite(activation: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """A 0-d bool tensor on the activation's device: whether any real token holds NaN / Inf.

    Padding positions may hold anything (a fully masked attention row can give NaN), so only
    positions the mask marks real count when the activation is ``[B, T, ...]`` like the mask.
    """
    if activation.dim() == 0:
        return ~torch.isfinite(activation)
    mask = attention_mask.to(activation.device).bool()
    per_token = activation.dim() >= 2 and tuple(activation.shape[:2]) == tuple(mask.shape)
    rows = max(1, _CHUNK_ELEMENTS // max(1, activation[0].numel()))
    bad = torch.zeros((), dtype=torch.bool, device=activation.device)
    for start in range(0, activation.shape[0], rows):
        finite = torch.isfinite(activation[start : start + rows])
        if per_token:
            # [rows, T, ...] -> [rows, T]: a token is finite when all its features are.
            finite = finite.flatten(2).all(dim=-1) if finite.dim() > 2 else finite
            bad = bad | (~finite & mask[start : start + rows]).any()
        else:
            bad = bad | ~finite.all()
    return bad

"""Pooling token activations to one vector per example."""

from __future__ import annotations

import torch

POOLINGS = ("mean", "last", "first", "span")


def pool_tokens(
    activation: torch.Tensor,
    attention_mask: torch.Tensor,
    how: str = "mean",
    span_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Pool ``[B, T, d]`` activations to ``[B, d]``.

    ``how``: ``"mean"`` over real tokens, ``"last"`` real token (left or right padding), ``"first"``
    real token, or ``"span"``: mean over the tokens of the ``[[marked]]`` word.
    """
    if activation.dim() == 2:
        return activation
    mask = attention_mask.to(activation.device).bool()
    if how == "mean":
        weights = mask.to(activation.dtype)
    elif how == "span":
        if span_mask is None:
            raise ValueError(
                "pooling='span' needs texts with a marked word, e.g. 'the year [[1630]]'."
            )
        weights = (span_mask.to(activation.device).bool() & mask).to(activation.dtype)
    elif how in ("last", "first"):
        positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
        masked = torch.where(
            mask, positions, torch.full_like(positions, -1 if how == "last" else mask.shape[1])
        )
        idx = masked.max(dim=1).values if how == "last" else masked.min(dim=1).values
        return activation[torch.arange(activation.shape[0], device=activation.device), idx]
    else:
        raise ValueError(f"Unknown pooling {how!r}; use 'mean', 'last', 'first' or 'span'.")
    # Select, never multiply: 0 × NaN is NaN, so a NaN at a padded position would reach the mean.
    keep = weights.bool().view(*weights.shape, *([1] * (activation.dim() - 2)))
    selected = torch.where(keep, activation, torch.zeros((), dtype=activation.dtype))
    counts = weights.sum(dim=1, keepdim=True).clamp(min=1)
    return selected.sum(dim=1) / counts.view(-1, *([1] * (activation.dim() - 2)))

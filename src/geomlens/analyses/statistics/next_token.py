"""The summed next-token cross-entropy of a batch, from each token's log-probability of the
next one (the ``logits.next_token_logprob`` site, scored inside the pass): linearization-effect's
fidelity cost and llc's loss at the model's own weights."""

from __future__ import annotations

import torch

from geomlens.analyses.base import Batch


def next_token_loss(log_probs: torch.Tensor, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed next-token cross-entropy over real (token, next token) pairs, and their count,
    from each token's log-probability of the next; tensors on the model's device (nothing is
    read back to the host), NaN at padding ignored."""
    if batch.inputs.input_ids is None:
        raise ValueError("The next-token loss needs token ids (a text model's inputs).")
    mask = batch.attention_mask.to(log_probs.device).bool()
    pairs = mask[:, :-1] & mask[:, 1:]
    losses = -log_probs[:, :-1].to(torch.float64)
    return torch.where(pairs, losses, 0.0).sum(), pairs.sum()

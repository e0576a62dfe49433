"""Splicing an SAE's reconstruction into the model and the loss it costs: smoothed bits per token
on a causal LM, 1 − cosine of the final hidden states on an encoder."""

from __future__ import annotations

from typing import Any

import torch

from geomlens.inputs.encoding import to_device

#: What ``geomlens.analyses.sae_features`` re-exports from here (``reconstruct`` is the
#: analysis's own).
__all__ = [
    "cosine_distance_per_sequence",
    "smoothed_bits_from_log_probs",
    "smoothed_bits_per_sequence",
]


def reconstruct(
    sae: Any,
    activation: torch.Tensor,
    permutation: torch.Tensor | None = None,
    *,
    splice_pool: list[int] | None = None,
    splice_top_k: int | None = None,
    keep_original: torch.Tensor | None = None,
) -> torch.Tensor:
    """The SAE's reconstruction of ``activation`` (what is spliced in its place), keeping only
    ``splice_pool`` latents or each token's top ``splice_top_k``, latents permuted if asked.

    ``keep_original`` ``[B, T]`` marks positions where the model's own activation stays (special
    tokens and attention sinks, as sae-lens's ``get_recons_loss`` leaves them)."""
    latents = sae.encode(activation.to(sae.dtype))
    if splice_pool is not None:
        keep = torch.zeros(latents.shape[-1], dtype=torch.bool, device=latents.device)
        keep[torch.as_tensor(splice_pool, dtype=torch.long)] = True
        latents = latents * keep
    if splice_top_k is not None:
        top = latents.topk(min(splice_top_k, latents.shape[-1]), dim=-1)
        latents = torch.zeros_like(latents).scatter_(-1, top.indices, top.values)
    if permutation is not None:
        latents = latents[..., to_device(permutation, latents.device)]
    spliced = sae.decode(latents).to(activation.dtype)
    if keep_original is None:
        return spliced
    return torch.where(keep_original.to(activation.device)[..., None], activation, spliced)


def smoothed_bits_per_sequence(
    logits: torch.Tensor, input_ids: torch.Tensor, mask: torch.Tensor, a: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean smoothed bits ``-log2((1 - a) p + a / V)`` of each sequence's next tokens, and how
    many tokens were predicted (positions t whose token t+1 is also real); on the logits'
    device (sae-features reads them back in finalize)."""
    vocab = logits.shape[-1]
    targets = input_ids[:, 1:].to(logits.device)
    # One sequence at a time: a float64 log-softmax of the whole batch is [B, T, V] × 8 bytes
    # (Gemma 3's V = 262,144 ran a 24 GB machine out of memory); row by row it is the same
    # arithmetic (the softmax is over V alone) in 1/B of the memory.
    p = torch.stack(
        [
            torch.log_softmax(row[:-1].to(torch.float64), dim=-1)
            .gather(-1, target[:, None])
            .squeeze(-1)
            .exp()
            for row, target in zip(logits, targets)
        ]
    )
    return _mean_smoothed_bits(p, mask, a, vocab)


def smoothed_bits_from_log_probs(
    log_probs: torch.Tensor, mask: torch.Tensor, a: float, vocab: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`smoothed_bits_per_sequence` from each token's log-probability of the next
    (``[B, T]``, the ``logits.next_token_logprob`` site scored inside the pass) and the
    vocabulary size ``vocab``: the same arithmetic without the [B, T, V] logits."""
    if vocab < 1:
        raise ValueError(f"The smoothed-bits loss needs the vocabulary size; got {vocab}.")
    return _mean_smoothed_bits(log_probs[:, :-1].to(torch.float64).exp(), mask, a, vocab)


def _mean_smoothed_bits(
    p: torch.Tensor, mask: torch.Tensor, a: float, vocab: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each sequence's mean smoothed bits over the positions whose next token is real, from
    the probabilities ``p`` of the next tokens (``[B, T - 1]``, on their device), and how many
    such positions it has."""
    valid = (mask[:, :-1].bool() & mask[:, 1:].bool()).to(p.device)
    bits = -torch.log2((1.0 - a) * p + a / vocab)
    counts = valid.sum(-1)
    # Selected, not multiplied: anything at a padded position (even NaN) never reaches a mean.
    means = torch.where(valid, bits, 0.0).sum(-1) / counts.clamp(min=1)
    return means, counts


def cosine_distance_per_sequence(
    clean: torch.Tensor, edited: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Mean over each sequence's real tokens of ``1 - cos(clean, edited)``, on their device."""
    cosine = torch.nn.functional.cosine_similarity(
        clean.to(torch.float64), edited.to(torch.float64), dim=-1
    )
    valid = mask.to(cosine.device).bool()
    distance = torch.where(valid, 1.0 - cosine, 0.0)  # padded positions (even NaN) left out
    return distance.sum(-1) / valid.sum(-1).clamp(min=1)

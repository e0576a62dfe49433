"""Scoring the next token inside the forward pass: log p(x_{t+1} | x_≤t) without [B, T, V].

A causal LM's logits are ``[B, T, vocab]``; in float32 at B = 32, T = 128 that is 4.3 GB for
Gemma 3's 262,144-token vocabulary. What a loss keeps of them is one number per token: the
log-probability of the token that follows. :func:`target_log_probs` applies the model's LM head
to the final hidden states a chunk of tokens at a time and keeps only that number, so the peak
is one chunk's logits (:data:`CHUNK_ELEMENTS` values) whatever B·T·V. The arithmetic is the
full-logit formula's: float32 logits from the head, ``log_softmax`` in float64 over the
vocabulary, the target gathered; the softmax is over V alone, so chunking tokens changes
nothing.

A next-token choice keeps the logits at each input's last real token: :func:`last_token_logits`
applies the head to that token's hidden state alone, ``[B, vocab]``.

The adapters serve them as the sites :data:`NEXT_TOKEN_SITE` and :data:`LAST_LOGITS_SITE`
wherever they offer ``logits`` (:func:`head_sites`): they
read the LM head's input in the pass, stop the pass there, and score. What a model's forward
does after its head is applied here too (:func:`post_head`: Gemma 2's final soft-capping,
Cohere's logit scale), so the scores are those of the logits the model returns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from geomlens.hooks.sites import HEAD_SITES, LAST_LOGITS_SITE, NEXT_TOKEN_SITE

__all__ = [
    "CHUNK_ELEMENTS",
    "HEAD_SITES",
    "LAST_LOGITS_SITE",
    "NEXT_TOKEN_SITE",
    "head_sites",
    "last_token_logits",
    "post_head",
    "target_log_probs",
]

#: Logit values scored at once (float32 logits, their float64 copy and log-softmax: about
#: 20 bytes each, 335 MB): 64 tokens of Gemma 3, 341 of SmolLM2.
CHUNK_ELEMENTS = 2**24


def post_head(config: Any) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """What the model's forward applies to its head's output, read from its config: final
    logit soft-capping (Gemma 2; TransformerLens's ``output_logits_soft_cap``) and a logit scale
    (Cohere). None when the head's output is the logits."""
    cap = getattr(config, "final_logit_softcapping", None)
    if cap is None:
        cap = getattr(config, "output_logits_soft_cap", None)
    scale = getattr(config, "logit_scale", None)
    cap = float(cap) if cap is not None and float(cap) > 0 else None
    scale = float(scale) if isinstance(scale, (int, float)) and float(scale) != 1.0 else None
    if cap is None and scale is None:
        return None

    def apply(logits: torch.Tensor) -> torch.Tensor:
        if scale is not None:
            logits = logits * scale
        if cap is not None:
            logits = cap * torch.tanh(logits / cap)
        return logits

    return apply


def target_log_probs(
    head: Callable[[torch.Tensor], torch.Tensor],
    hidden: torch.Tensor,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    chunk_elements: int | None = None,
) -> torch.Tensor:
    """``[B, T]`` float64: at position t, ``log_softmax(head(hidden[:, t]))[input_ids[:, t+1]]``
    where tokens t and t+1 are both real, else 0; the head applied ``chunk_elements // V``
    tokens at a time (default :data:`CHUNK_ELEMENTS`). ``head`` may be the identity on logits
    already computed."""
    chunk = CHUNK_ELEMENTS if chunk_elements is None else chunk_elements
    if hidden.dim() != 3:
        raise ValueError(
            f"Next-token scoring reads hidden states [B, T, d]; got shape {tuple(hidden.shape)}."
        )
    batch, length = hidden.shape[:2]
    device = hidden.device
    ids = input_ids.to(device)
    mask = attention_mask.to(device).bool()
    pairs = torch.zeros(batch, length, dtype=torch.bool, device=device)
    pairs[:, :-1] = mask[:, :-1] & mask[:, 1:]
    targets = torch.zeros(batch, length, dtype=torch.long, device=device)
    targets[:, :-1] = ids[:, 1:]
    flat = hidden.reshape(batch * length, hidden.shape[-1])
    flat_targets = targets.reshape(-1)
    out = torch.zeros(batch * length, dtype=torch.float64, device=device)
    start, step = 0, 1  # the first chunk is one token: it tells the vocabulary size
    while start < len(flat):
        stop = min(start + step, len(flat))
        logits = head(flat[start:stop])
        scored = torch.log_softmax(logits.to(torch.float64), dim=-1)
        out[start:stop] = scored.gather(-1, flat_targets[start:stop, None]).squeeze(-1)
        step = max(1, chunk // max(1, int(logits.shape[-1])))
        start = stop
        del logits, scored
    # Selected, not multiplied: a padded position (even NaN) holds 0.
    return torch.where(pairs, out.reshape(batch, length), 0.0)


def last_token_logits(
    head: Callable[[torch.Tensor], torch.Tensor],
    hidden: torch.Tensor,
    attention_mask: torch.Tensor,
) -> torch.Tensor:
    """``[B, V]``: ``head`` at each input's last real token (left or right padding), the
    position ``pool_tokens(..., "last")`` reads."""
    mask = attention_mask.to(hidden.device).bool()
    positions = torch.arange(mask.shape[1], device=hidden.device).expand_as(mask)
    last = torch.where(mask, positions, torch.full_like(positions, -1)).max(dim=1).values
    rows = torch.arange(len(hidden), device=hidden.device)
    return head(hidden[rows, last.clamp(min=0)])


def head_sites(
    head: Callable[[torch.Tensor], torch.Tensor],
    hidden: torch.Tensor,
    input_ids: torch.Tensor | None,
    attention_mask: torch.Tensor,
    sites: Any,
) -> dict[str, torch.Tensor]:
    """The :data:`HEAD_SITES` among ``sites``, from the LM head's input ``hidden`` (or from
    full logits with the identity as ``head``)."""
    out: dict[str, torch.Tensor] = {}
    if NEXT_TOKEN_SITE in sites:
        if input_ids is None:
            raise ValueError(
                f"{NEXT_TOKEN_SITE!r} scores the next token and needs token ids; these inputs "
                "carry none."
            )
        out[NEXT_TOKEN_SITE] = target_log_probs(head, hidden, input_ids, attention_mask)
    if LAST_LOGITS_SITE in sites:
        out[LAST_LOGITS_SITE] = last_token_logits(head, hidden, attention_mask).detach()
    return out

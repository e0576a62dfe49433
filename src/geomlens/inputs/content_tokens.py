"""Which token positions an SAE reads: every real token except special tokens and attention sinks.

A causal LM writes a residual vector orders of magnitude larger than the rest at the first
position (the attention sink: SmolLM2-135M, middle layer, about 120 × the median token norm;
BOS-prepending models put their BOS there). One such position dominates an SAE trained on it,
its active count k and its reconstruction error, which is why sae-lens trains and evaluates
without special tokens (``exclude_special_tokens``, ``ignore_tokens`` in its evals). Two rules
decide, per position:

- **special**: the token id is one of the tokenizer's structural special tokens (sae-lens's
  ``get_special_token_ids``: BOS, EOS, PAD, SEP, decoder start) or its CLS token (the BOS of
  BERT-style encoders, which sae-lens's list leaves out);
- **sink**: the activation's norm exceeds ``ratio`` × a reference norm of its own row, the
  median of the row's real tokens with the row's largest one left out (so one huge position
  cannot raise its own reference; a row of one token has no reference and no sink).

Both rules read only the row itself, so any split of the data into batches flags the same
positions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from geomlens.run_defaults import SINK_NORM_RATIO


def special_token_ids(tokenizer: Any) -> list[int]:
    """The structural special ids sae-lens excludes, plus the CLS token of encoders."""
    from sae_lens.util import get_special_token_ids

    ids = set(get_special_token_ids(tokenizer)) if tokenizer is not None else set()
    cls_id = getattr(tokenizer, "cls_token_id", None)
    if cls_id is not None:
        ids.add(int(cls_id))
    return sorted(int(i) for i in ids)


@dataclass
class TokenSelection:
    """Per position ``[B, T]``: real tokens, which of them are special, which are sinks."""

    real: torch.Tensor
    special: torch.Tensor
    sink: torch.Tensor

    @property
    def excluded(self) -> torch.Tensor:
        return self.real & (self.special | self.sink)

    @property
    def content(self) -> torch.Tensor:
        """Real tokens an SAE reads the sae-lens way: neither special nor a sink."""
        return self.real & ~self.special & ~self.sink


def sink_positions(
    activation: torch.Tensor, mask: torch.Tensor, ratio: float = SINK_NORM_RATIO
) -> torch.Tensor:
    """``[B, T]`` bool: real positions whose norm exceeds ``ratio`` × their row's reference."""
    if ratio <= 0:
        raise ValueError(f"The sink norm ratio must be positive; got {ratio}.")
    mask = mask.to(activation.device).bool()
    norms = activation.detach().to(torch.float32).norm(dim=-1)
    candidates = norms.masked_fill(~mask, float("nan"))
    # Leave each row's largest real norm out of its reference.
    largest = torch.nan_to_num(candidates, nan=-1.0).argmax(dim=-1, keepdim=True)
    reference = candidates.scatter(-1, largest, float("nan")).nanmedian(dim=-1, keepdim=True)
    return mask & (norms > ratio * reference.values)  # NaN reference (one token): never


def select_tokens(
    activation: torch.Tensor,
    attention_mask: torch.Tensor,
    input_ids: torch.Tensor | None,
    special_ids: Iterable[int] = (),
    sink_ratio: float | None = SINK_NORM_RATIO,
) -> TokenSelection:
    """Which real positions of ``activation`` ``[B, T, d]`` are special tokens or sinks.

    ``input_ids`` None (recorded activations without ids) flags no special token;
    ``sink_ratio`` None flags no sink.
    """
    real = attention_mask.to(activation.device).bool()
    special = torch.zeros_like(real)
    ids = list(special_ids)
    if input_ids is not None and ids:
        special = torch.isin(input_ids.to(activation.device), torch.tensor(ids, device=real.device))
        special &= real
    sink = (
        sink_positions(activation, real, sink_ratio)
        if sink_ratio is not None
        else torch.zeros_like(real)
    )
    return TokenSelection(real=real, special=special, sink=sink)

"""Model inputs: tokenisation, padding, position ids and marked spans, done once for every backend.

A text may mark one word with double brackets, ``"It happened in the year [[1630]]."``: the
brackets are removed before tokenising and the tokens that overlap the marked characters form
the example's *span* (pooling by span averages over them). Position ids are always derived from
the attention mask, because left-padded batches of absolute-position models get them wrong when
a backend infers them from the sequence index (a known TransformerBridge / nnsight trap).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import torch

PaddingSide = Literal["left", "right"]
SPAN_PATTERN = re.compile(r"\[\[(.+?)\]\]")


@dataclass
class ModelInputs:
    """One batch ready for a forward pass.

    ``input_ids``, ``attention_mask``, ``position_ids`` and ``span_mask`` are ``[B, T]``; the
    masks are bool. ``index`` holds the rows of the dataset the batch came from. For recorded
    activations ``input_ids`` is None and the adapter reads rows by ``index``.
    """

    index: np.ndarray
    attention_mask: torch.Tensor
    input_ids: torch.Tensor | None = None
    position_ids: torch.Tensor | None = None
    span_mask: torch.Tensor | None = None
    padding_side: PaddingSide = "right"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def batch_size(self) -> int:
        return int(self.attention_mask.shape[0])

    def to(self, device: torch.device | str) -> ModelInputs:
        target = torch.device(device)

        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else to_device(t, target)

        return replace(
            self,
            attention_mask=to_device(self.attention_mask, target),
            input_ids=move(self.input_ids),
            position_ids=move(self.position_ids),
            span_mask=move(self.span_mask),
            extra={k: move(v) if isinstance(v, torch.Tensor) else v for k, v in self.extra.items()},
        )


def to_device(
    values: torch.Tensor | np.ndarray | int | float, device: torch.device | str
) -> torch.Tensor:
    """``values`` (a tensor, or host data such as a batch's labels) on ``device``, without
    making the host wait for the device: from the CPU to CUDA the copy goes through pinned
    memory without blocking, since a plain copy from pageable memory waits for the GPU's queue
    (once per batch, in a loop over batches)."""
    tensor = torch.as_tensor(values)
    target = torch.device(device)
    if tensor.device == target:
        return tensor
    if target.type == "cuda" and tensor.device.type == "cpu":
        return tensor.pin_memory().to(target, non_blocking=True)
    return tensor.to(target)


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions counted over real tokens only: 0 at each example's first real token."""
    mask = attention_mask.long()
    return (mask.cumsum(-1) - 1).clamp(min=0)


def numbered_positions(
    positions: torch.Tensor, attention_mask: torch.Tensor, *, first: int, pad: int
) -> torch.Tensor:
    """Shift 0-based positions so real tokens count from ``first`` and pads sit at ``pad``.

    RoBERTa-style models reserve position ``padding_idx`` for pads and number real tokens from
    ``padding_idx + 1``; handing them positions from 0 shifts every embedding by two rows.
    """
    mask = attention_mask.bool()
    return torch.where(mask, positions + first, torch.full_like(positions, pad))


def strip_span_marker(text: str) -> tuple[str, tuple[int, int] | None]:
    """Remove ``[[...]]`` from ``text``; return the plain text and the marked character range."""
    matches = list(SPAN_PATTERN.finditer(text))
    if not matches:
        return text, None
    if len(matches) > 1:
        raise ValueError(
            f"Text {text!r} marks {len(matches)} spans with [[...]]; mark at most one word per text."
        )
    match = matches[0]
    plain = text[: match.start()] + match.group(1) + text[match.end() :]
    return plain, (match.start(), match.start() + len(match.group(1)))


def pad_sequences(
    sequences: Sequence[Sequence[int]], pad_id: int, padding_side: PaddingSide
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad token-id lists to one ``[B, T]`` tensor; return ids and the bool attention mask."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"padding_side must be 'left' or 'right', got {padding_side!r}.")
    if len(sequences) == 0:
        raise ValueError("Cannot build a batch from zero sequences.")
    lengths = [len(s) for s in sequences]
    if min(lengths) == 0:
        raise ValueError(
            "An input has zero tokens after tokenisation; every input needs at least one."
        )
    width = max(lengths)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.bool)
    for row, seq in enumerate(sequences):
        start = 0 if padding_side == "right" else width - len(seq)
        ids[row, start : start + len(seq)] = torch.as_tensor(list(seq), dtype=torch.long)
        mask[row, start : start + len(seq)] = True
    return ids, mask


def encode_texts(
    tokenizer: Any,
    texts: Sequence[str],
    index: np.ndarray,
    *,
    padding_side: PaddingSide = "right",
    max_length: int | None = None,
    add_special_tokens: bool = True,
) -> ModelInputs:
    """Tokenise ``texts`` with a Hugging Face tokenizer into a padded batch with spans.

    Padding is ours (not the tokenizer's) so that both sides are exact and the tokenizer's own
    ``padding_side`` setting on a user's object is never touched.
    """
    if tokenizer is None:
        raise ValueError(
            "This model has no tokenizer, so it cannot take strings. Pass token ids "
            "(a LongTensor [N, T] or lists of ids), or attach the model with a tokenizer."
        )
    plain_and_spans = [strip_span_marker(t) for t in texts]
    plain = [p for p, _ in plain_and_spans]
    has_span = any(span is not None for _, span in plain_and_spans)
    encoded = tokenizer(
        plain,
        add_special_tokens=add_special_tokens,
        truncation=max_length is not None,
        max_length=max_length,
        return_offsets_mapping=has_span,
    )
    sequences = encoded["input_ids"]
    pad_id = tokenizer.pad_token_id
    if pad_id is None:
        pad_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
    ids, mask = pad_sequences(sequences, pad_id, padding_side)
    span_mask = None
    if has_span:
        span_mask = torch.zeros_like(mask)
        for row, ((text, span), offsets) in enumerate(
            zip(plain_and_spans, encoded["offset_mapping"])
        ):
            if span is None:
                raise ValueError(
                    f"Text {text!r} has no [[...]] span but others in the batch do; "
                    "mark a span in every text or in none."
                )
            shift = 0 if padding_side == "right" else ids.shape[1] - len(offsets)
            hits = [
                pos
                for pos, (lo, hi) in enumerate(offsets)
                if hi > lo and lo < span[1] and hi > span[0]
            ]
            if not hits:
                covered = max((hi for lo, hi in offsets if hi > lo), default=0)
                if max_length is not None and span[0] >= covered:
                    raise ValueError(
                        f"The marked span of {text!r} falls outside the tokens kept "
                        f"(max_length={max_length}); raise max_length or shorten the text."
                    )
                marked = text[span[0] : span[1]]
                shown = " ".join(f"U+{ord(c):04X}" for c in marked[:8])
                raise ValueError(
                    f"The marked span [[{marked}]] of {text!r} covers no token: the tokenizer "
                    f"drops its characters ({shown}: invisible or blank); mark a word with "
                    "visible characters."
                )
            span_mask[row, [h + shift for h in hits]] = True
    return _padded_inputs(index, ids, mask, padding_side, span_mask=span_mask)


def encode_token_ids(
    sequences: Sequence[Sequence[int]] | torch.Tensor,
    index: np.ndarray,
    *,
    pad_id: int = 0,
    padding_side: PaddingSide = "right",
    attention_mask: torch.Tensor | None = None,
) -> ModelInputs:
    """Batch token ids: a ``[B, T]`` tensor (with an optional mask) or ragged lists of ids."""
    if isinstance(sequences, torch.Tensor):
        if sequences.dim() != 2 or sequences.dtype not in (torch.long, torch.int32, torch.int64):
            raise ValueError(
                f"Token ids must be an integer tensor [batch, tokens]; got dtype "
                f"{sequences.dtype} and shape {tuple(sequences.shape)}."
            )
        if attention_mask is None:
            mask = torch.ones_like(sequences, dtype=torch.bool)
            ids = sequences.long()
        else:
            rows = [seq[m.bool()].tolist() for seq, m in zip(sequences, attention_mask)]
            ids, mask = pad_sequences(rows, pad_id, padding_side)
    else:
        ids, mask = pad_sequences(sequences, pad_id, padding_side)
    return _padded_inputs(index, ids, mask, padding_side)


def _padded_inputs(
    index: np.ndarray,
    ids: torch.Tensor,
    mask: torch.Tensor,
    padding_side: PaddingSide,
    span_mask: torch.Tensor | None = None,
) -> ModelInputs:
    """A batch of padded token ids, positions numbered along each row's real tokens."""
    return ModelInputs(
        index=np.asarray(index),
        input_ids=ids,
        attention_mask=mask,
        position_ids=position_ids_from_mask(mask),
        span_mask=span_mask,
        padding_side=padding_side,
    )

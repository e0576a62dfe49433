"""A content fingerprint of the weights behind an adapter (what a checkpoint or a cached SAE
was made from): the same path may hold other weights by now, a model retrained into its folder."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import torch


def _weight_tensors(adapter: Any) -> list[tuple[str, torch.Tensor]]:
    """The tensors a run's numbers come from: the model's parameters and buffers (each storage
    once, however many modules share it), or the recorded activations of a model-less adapter."""
    recorded = getattr(adapter, "recorded_arrays", None)
    if recorded is not None:
        return sorted(recorded.items())
    # A TransformerLens bridge adds tensors it derives from the model's own (GPT-2's split
    # q/k/v, a zero LM-head bias): the Hugging Face module it was built from, kept untouched
    # beside it, is what nnsight traces too.
    model = getattr(adapter, "reference_module", None) or getattr(adapter, "model", None)
    return module_tensors(model)


def module_tensors(model: Any) -> list[tuple[str, torch.Tensor]]:
    """A module's parameters and buffers, each storage once (none for what is not a module)."""
    if not isinstance(model, torch.nn.Module):
        return []
    seen: set[tuple[int, int, tuple[int, ...]]] = set()
    tensors = []
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        if tensor is None:
            continue
        key = (tensor.data_ptr(), int(tensor.storage_offset()), tuple(tensor.shape))
        if tensor.is_meta or key not in seen:
            seen.add(key)
            tensors.append((name, tensor))
    return tensors


#: Elements taken to float64 at a time. A float64 reduction of a float32 tensor copies it whole
#: first: Gemma 3's 262,144 × 640 embedding made 1.3 GB more at the peak of every run that
#: fingerprints the model (an SAE's cache key, a sweep's checkpoints).
CHUNK_ELEMENTS = 1 << 22


def _four_sums(matrix: torch.Tensor) -> torch.Tensor:
    """Sum, squared norm, row-number-weighted and column-number-weighted sums of ``matrix``
    ([rows, columns], any real dtype), in float64, a block of rows at a time."""
    count, width = matrix.shape
    step = max(1, CHUNK_ELEMENTS // max(width, 1))
    f64, device = torch.float64, matrix.device
    total, squares, by_row = (torch.zeros((), dtype=f64, device=device) for _ in range(3))
    column_sums = torch.zeros(width, dtype=f64, device=device)
    for start in range(0, count, step):
        block = matrix[start : start + step].to(torch.float64)
        row_sums = block.sum(dim=1)
        total += row_sums.sum()
        squares += (block * block).sum()
        numbers = torch.arange(start + 1, start + 1 + len(block), dtype=f64, device=device)
        by_row += (row_sums * numbers).sum()
        column_sums += block.sum(dim=0)
    by_column = (column_sums * torch.arange(1, width + 1, dtype=f64, device=device)).sum()
    return torch.stack([total, squares, by_row, by_column]).cpu()


def weights_fingerprint(adapter: Any) -> str:
    """A content fingerprint of the weights (or recorded activations) behind ``adapter``.

    A checkpoint's identity must include the weights, not only the model's path: a model
    retrained into the same folder would otherwise resume with rows of both. Per tensor, four
    float64 sums computed where it lives (its sum, its squared norm, and sums weighted by row
    and by column number, so a permutation of rows or columns changes it too), read back once.

    The same weights give the same fingerprint on every backend: a model's tensors are taken
    without their names (a TransformerLens bridge renames the modules nnsight traces under
    their Hugging Face names) as a sorted multiset of (shape, dtype, sums), each storage once.
    Recorded activations keep their site names (they are what the names say).
    """
    named = getattr(adapter, "recorded_arrays", None) is not None
    now = tensors_fingerprint(_weight_tensors(adapter), named=named)
    # A bridge built on the Hugging Face module itself (gl.load(..., backend="transformer-lens"))
    # rewrote its tensors: while they are as the bridge left them, the weights are the ones the
    # module had before, and so is their fingerprint (the same as through nnsight).
    source = getattr(adapter, "source_fingerprint", None)
    if getattr(adapter, "reference_module", None) is None and source is not None:
        before, bridged = source
        if now == bridged:
            return str(before)
    return now


def tensors_fingerprint(tensors: list[tuple[str, torch.Tensor]], *, named: bool = False) -> str:
    """The fingerprint of :func:`weights_fingerprint` over ``tensors`` (names kept if
    ``named``)."""
    described: list[Any] = []
    sums: list[torch.Tensor] = []
    for name, tensor in tensors:
        described.append([name if named else "", list(tensor.shape), str(tensor.dtype)])
        if tensor.is_meta or tensor.numel() == 0:
            sums.append(torch.full((4,), math.nan, dtype=torch.float64))
            continue
        values = tensor.detach()
        if values.is_complex():
            values = torch.view_as_real(values)
        sums.append(_four_sums(values.reshape(values.shape[0] if values.dim() else 1, -1)))
    numbers = torch.stack(sums).tolist() if sums else []
    entries = sorted(
        json.dumps([entry, [float.hex(x) for x in values]])
        for entry, values in zip(described, numbers)
    )
    text = json.dumps(entries)
    return hashlib.sha256(text.encode()).hexdigest()[:20]

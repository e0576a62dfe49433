"""The model's own forward pass, the referee of every check: which Hugging Face module it is,
how its ``hidden_states`` are indexed, and its hidden states for one example run alone.
Shared by the conformance checks and their float64 reference."""

from __future__ import annotations

from typing import Any

import torch

from geomlens.inputs.encoding import ModelInputs
from geomlens.models.adapter import Adapter

__all__ = ["HIDDEN_STATES_FROM_FIRST_BLOCK", "reference_model"]


def reference_model(adapter: Adapter) -> torch.nn.Module | None:
    """The Hugging Face module whose own forward referees the adapter, where there is one."""
    model = getattr(adapter, "model", None)
    if adapter.backend == "nnsight":
        return model
    untouched = getattr(adapter, "reference_module", None)  # the module a bridge copied
    if isinstance(untouched, torch.nn.Module):
        return untouched
    original = getattr(model, "original_model", None)  # a TransformerBridge
    return original if isinstance(original, torch.nn.Module) else None


#: Model types whose ``hidden_states`` leave out the embeddings: entry ``L`` is block ``L``'s
#: output and the last entry is the final norm's (transformers' Mamba models), so block ``L``'s
#: ``resid_pre`` is entry ``L - 1`` there.
HIDDEN_STATES_FROM_FIRST_BLOCK = frozenset({"mamba", "mamba2", "falcon_mamba"})


def _hidden_state_offset(model: torch.nn.Module) -> int:
    """How far the model's ``hidden_states`` index lies before block ``L``'s input (0, or 1
    where the embeddings are left out)."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    return 1 if model_type in HIDDEN_STATES_FROM_FIRST_BLOCK else 0


def _reference_positions(model: torch.nn.Module, length: int) -> torch.Tensor | None:
    """Positions for the reference run of one unpadded example, where the model would number
    them from its token ids: RoBERTa-style embeddings (a position table with a padding row)
    count from ``padding_idx + 1`` over tokens that differ from the pad id, so a real token
    that happens to equal the pad id (token 1 in a tokenizer-less check) would be given the
    padding position. The adapters number real tokens by the attention mask; so does this."""
    for module in model.modules():
        table = getattr(module, "position_embeddings", None)
        pad = getattr(module, "padding_idx", None)
        if (
            isinstance(table, torch.nn.Embedding)
            and isinstance(pad, int)
            and table.padding_idx is not None
        ):
            return (torch.arange(length) + pad + 1).unsqueeze(0)
    return None


def _own_hidden_states(
    model: torch.nn.Module, inputs: ModelInputs, row: int
) -> tuple[torch.Tensor, ...] | None:
    """The model's own hidden states for one example run alone (unpadded), or None."""
    if inputs.input_ids is None:  # no token ids to run the model on
        return None
    ids = inputs.input_ids[row][inputs.attention_mask[row].bool()].unsqueeze(0)
    kwargs: dict[str, Any] = {"input_ids": ids, "output_hidden_states": True}
    positions = _reference_positions(model, ids.shape[1])
    if positions is not None:
        kwargs["position_ids"] = positions.to(ids.device)
    try:
        with torch.no_grad():
            out = model(**kwargs)
    except (TypeError, ValueError, RuntimeError, AttributeError):
        return None
    hidden = getattr(out, "hidden_states", None)
    if hidden is None:
        hidden = getattr(out, "encoder_hidden_states", None)
    return tuple(hidden) if hidden else None

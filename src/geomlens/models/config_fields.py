"""Model-config field names, in the spellings of the Hugging Face families and TransformerLens:
one table, read wherever geomlens asks a config for a width, a length or a count."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: The residual stream's width (``d_model``).
RESIDUAL_WIDTH_FIELDS = ("hidden_size", "n_embd", "d_model", "dim")
#: The MLP's hidden width (GPT-2 configs leave ``n_inner`` unset for 4 × the residual width).
MLP_WIDTH_FIELDS = (
    "intermediate_size", "ffn_dim", "d_ff", "hidden_dim", "ffn_hidden_size", "n_inner", "d_mlp",
)  # fmt: skip
#: The token embedding's width where it differs from the residual stream's (ALBERT).
EMBED_WIDTH_FIELDS = ("embedding_size",)
#: The number of positions a model takes (its learned or rotary position range).
POSITION_FIELDS = ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len")
#: The number of transformer blocks.
LAYER_COUNT_FIELDS = ("num_hidden_layers", "n_layer", "num_layers")
#: The number of experts of a mixture-of-experts MLP.
EXPERT_COUNT_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts")


def first_field(config: Any, names: Sequence[str]) -> int | None:
    """The first of ``names`` that ``config`` sets to a positive integer, or None."""
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None

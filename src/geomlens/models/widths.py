"""The width each kind of site has, read from a model's config without a forward pass.

One place for the families whose config does not say it plainly: a TransformerBridge derives
its own ``cfg`` (OPT's ``d_mlp`` comes out 4 × d_model whatever the config's ``ffn_dim``), so
the Hugging Face config it wraps is read instead; transformers' MPT MLP is 4 × d_model wide
whatever ``expansion_ratio`` (or a stray ``intermediate_size``) says; GPT-2-style configs leave
``n_inner`` unset for 4 × d_model. The conformance check (``geomlens check``) and the SAE width
check (:func:`geomlens.sae.loading.site_width`) both read it.
"""

from __future__ import annotations

from typing import Any

import torch

from geomlens.hooks.sites import EMBED_SITE, LOGITS_SITE
from geomlens.models.adapter import Adapter
from geomlens.models.config_fields import (
    EMBED_WIDTH_FIELDS,
    MLP_WIDTH_FIELDS,
    RESIDUAL_WIDTH_FIELDS,
    first_field,
)


def expected_widths(adapter: Adapter) -> dict[str, int]:
    """The width each kind of site must have, from the model's config (kinds left out are not
    known): ``"d_model"``, ``"d_mlp"``, ``"embed"`` and ``"vocab"``."""
    model = adapter.model
    cfg = getattr(model, "cfg", None)  # TransformerLens
    original = getattr(model, "original_model", None)  # a TransformerBridge's Hugging Face model
    if cfg is not None and isinstance(original, torch.nn.Module) and hasattr(original, "config"):
        # A bridge's cfg is derived, and not always right (OPT: d_mlp = 4 * d_model whatever
        # the config's ffn_dim); the Hugging Face config is what the model was built from.
        return _hf_widths(original.config, original)
    if cfg is not None and getattr(cfg, "d_model", None):
        widths = {"d_model": cfg.d_model, "embed": cfg.d_model, "vocab": cfg.d_vocab_out}
        if getattr(cfg, "d_mlp", None):
            widths["d_mlp"] = cfg.d_mlp
        return widths
    return _hf_widths(adapter.config, model)


def _hf_widths(config: Any, model: Any) -> dict[str, int]:
    """:func:`expected_widths` from a Hugging Face config (and the model's output head)."""
    d_model = first_field(config, RESIDUAL_WIDTH_FIELDS)
    if d_model is None:
        return {}
    widths = {"d_model": d_model, "embed": first_field(config, EMBED_WIDTH_FIELDS) or d_model}
    if getattr(config, "model_type", None) == "mpt":
        # transformers' MptMLP is 4 * d_model wide whatever the config's expansion_ratio (or a
        # stray intermediate_size) says.
        d_mlp: int | None = 4 * d_model
    else:
        d_mlp = first_field(config, MLP_WIDTH_FIELDS)
    if d_mlp is None and (
        hasattr(config, "n_inner") or getattr(config, "model_type", None) == "bloom"
    ):
        d_mlp = 4 * d_model  # GPT-2-style configs leave n_inner unset for 4 * d_model
    if d_mlp is not None:
        widths["d_mlp"] = d_mlp
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is not None and getattr(head, "weight", None) is not None:
        widths["vocab"] = int(head.weight.shape[0])
    return widths


def width_kind(site: str) -> str:
    """Which of :func:`expected_widths`'s kinds ``site`` has: ``"embed"``, ``"vocab"``,
    ``"d_mlp"`` (an MLP's hidden activations) or ``"d_model"``."""
    if site == EMBED_SITE:
        return "embed"
    if site == LOGITS_SITE:
        return "vocab"
    return "d_mlp" if ".mlp.hook_" in site else "d_model"

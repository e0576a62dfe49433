"""Where each canonical site lives in a Hugging Face model, written as data per architecture family.

A table maps a canonical site (a TransformerLens hook name) to the module whose output or input
holds it, so that reading the module gives the tensor TransformerLens names the same way for the
same weights. Paths are relative to the model's *base model* (``model.base_model``: the
``GPT2Model`` inside a ``GPT2LMHeadModel``, the ``BertModel`` inside a ``BertForMaskedLM`` or the
model itself when it has no head), so one table serves a model with or without a task head.
Per-block paths are relative to the block; ``""`` is the block itself.

Models whose family has no table get a discovered one: the layer list is the largest
``nn.ModuleList`` (by parameter count) whose length is the config's number of layers, and only
``hook_resid_pre`` (block input) and ``hook_resid_post`` (block output) are offered, since
nothing else about an unknown block's inside can be known without reading its code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from geomlens.hooks.base import EMBED_SITE, LAYER_SITE_TEMPLATES

Port = Literal["output", "input"]
#: How a family numbers token positions: from 0 (GPT-2, BERT, rotary models), from
#: ``padding_idx + 1`` (RoBERTa, XLM-R, CamemBERT, MPNet: position ``padding_idx`` is reserved for
#: pads), or not at all (the forward takes no position ids: ALiBi, relative attention biases).
PositionNumbering = Literal["from_zero", "after_padding_idx", "none"]

#: Canonical per-block site names without their ``blocks.{L}.`` prefix, in forward order.
BLOCK_SITES: tuple[str, ...] = tuple(t.split(".", 2)[2] for t in LAYER_SITE_TEMPLATES)


@dataclass(frozen=True)
class SiteRead:
    """How one site is read: a module's forward output (or first input), element ``tuple_index``
    when that value is a tuple, available only when every ``requires`` config entry matches."""

    module: str
    port: Port = "output"
    tuple_index: int = 0
    requires: tuple[tuple[str, Any], ...] = ()

    def applies_to(self, config: Any) -> bool:
        return all(getattr(config, key, None) == value for key, value in self.requires)


@dataclass(frozen=True)
class ArchitectureTable:
    """The canonical sites of one architecture family.

    ``layers`` is the path of the block list; ``embed`` reads ``hook_embed`` (relative to the base
    model); ``block`` maps the per-block site names of :data:`BLOCK_SITES` to reads relative to
    one block.
    """

    family: str
    model_types: tuple[str, ...]
    layers: str
    embed: SiteRead | None
    block: Mapping[str, SiteRead] = field(default_factory=dict)
    note: str = ""
    positions: PositionNumbering = "from_zero"

    def __post_init__(self) -> None:
        unknown = set(self.block) - set(BLOCK_SITES)
        if unknown:
            raise ValueError(
                f"Table {self.family!r} names sites that are not canonical: {sorted(unknown)}; "
                f"per-block sites are {', '.join(BLOCK_SITES)}."
            )

    def block_sites(self, config: Any) -> list[str]:
        """The per-block site names this model offers, in forward order."""
        return [s for s in BLOCK_SITES if s in self.block and self.block[s].applies_to(config)]

    def locate(self, site: str) -> tuple[str, SiteRead]:
        """The module path (relative to the base model) and read of a canonical site."""
        if site == EMBED_SITE:
            if self.embed is None:
                raise KeyError(site)
            return self.embed.module, self.embed
        _, layer, name = site.split(".", 2)
        read = self.block[name]
        path = f"{self.layers}.{layer}" + (f".{read.module}" if read.module else "")
        return path, read


def _pre_ln_block(
    *, attn: str, ln2: str, mlp: str, mlp_pre: str, mlp_post: str
) -> dict[str, SiteRead]:
    """Reads of a pre-LayerNorm block: ``x + attn(ln1(x))``, then ``+ mlp(ln2(.))``.

    ``resid_mid`` is the input of the second norm; ``mlp.hook_post`` is the input of the MLP's
    output projection (for a gated MLP that is ``act(gate) * up``, as TransformerLens defines it).
    """
    return {
        "hook_resid_pre": SiteRead("", "input"),
        "hook_attn_out": SiteRead(attn),
        "hook_resid_mid": SiteRead(ln2, "input"),
        "mlp.hook_pre": SiteRead(mlp_pre),
        "mlp.hook_post": SiteRead(mlp_post, "input"),
        "hook_mlp_out": SiteRead(mlp),
        "hook_resid_post": SiteRead(""),
    }


GPT2 = ArchitectureTable(
    family="gpt2",
    model_types=("gpt2",),
    layers="h",
    embed=SiteRead("wte"),
    block=_pre_ln_block(
        attn="attn", ln2="ln_2", mlp="mlp", mlp_pre="mlp.c_fc", mlp_post="mlp.c_proj"
    ),
)

_NEOX_BLOCK = _pre_ln_block(
    attn="attention",
    ln2="post_attention_layernorm",
    mlp="mlp",
    mlp_pre="mlp.dense_h_to_4h",
    mlp_post="mlp.dense_4h_to_h",
)
GPT_NEOX = ArchitectureTable(
    family="gpt_neox",
    model_types=("gpt_neox",),
    layers="layers",
    embed=SiteRead("embed_in"),
    # With a parallel residual (Pythia's default) attention and MLP both read the block input, so
    # there is no residual stream between them: TransformerLens offers no resid_mid there either.
    block={
        **_NEOX_BLOCK,
        "hook_resid_mid": SiteRead(
            "post_attention_layernorm", "input", requires=(("use_parallel_residual", False),)
        ),
    },
    note="hook_resid_mid only without a parallel residual (use_parallel_residual=False).",
)

_GATED_BLOCK = _pre_ln_block(
    attn="self_attn",
    ln2="post_attention_layernorm",
    mlp="mlp",
    mlp_pre="mlp.gate_proj",
    mlp_post="mlp.down_proj",
)
LLAMA = ArchitectureTable(
    family="llama",
    model_types=("llama", "mistral", "qwen2", "qwen3"),
    layers="layers",
    embed=SiteRead("embed_tokens"),
    block=_GATED_BLOCK,
)

# Gemma scales the token embedding by sqrt(d_model); TransformerLens's hook_embed is the scaled
# one. Older transformers scale in the model's forward, newer ones inside the embedding module,
# so the first block's input is the one place that holds the scaled embedding in every version.
_GEMMA_EMBED = SiteRead("layers.0", "input")
GEMMA = ArchitectureTable(
    family="gemma",
    model_types=("gemma",),
    layers="layers",
    embed=_GEMMA_EMBED,
    block=_GATED_BLOCK,
)
# Gemma 2 and 3 normalise each sublayer's output before adding it back ("sandwich" norms); what
# reaches the residual stream, and what TransformerLens calls attn_out / mlp_out, is the output
# of those post-norms.
GEMMA2 = ArchitectureTable(
    family="gemma2",
    model_types=("gemma2", "gemma3_text"),
    layers="layers",
    embed=_GEMMA_EMBED,
    block={
        **_GATED_BLOCK,
        "hook_attn_out": SiteRead("post_attention_layernorm"),
        "hook_resid_mid": SiteRead("pre_feedforward_layernorm", "input"),
        "hook_mlp_out": SiteRead("post_feedforward_layernorm"),
    },
)

# BERT is post-LayerNorm: each sublayer's output is added to the residual and the sum normalised.
# attn_out / mlp_out are the sublayer outputs after their output projections, before that add;
# resid_mid is the residual stream between the sublayers, i.e. the attention LayerNorm's output.
BERT = ArchitectureTable(
    family="bert",
    model_types=("bert",),
    layers="encoder.layer",
    embed=SiteRead("embeddings.word_embeddings"),
    block={
        "hook_resid_pre": SiteRead("", "input"),
        "hook_attn_out": SiteRead("attention.output.dense"),
        "hook_resid_mid": SiteRead("attention.output.LayerNorm"),
        "mlp.hook_pre": SiteRead("intermediate.dense"),
        "mlp.hook_post": SiteRead("output.dense", "input"),
        "hook_mlp_out": SiteRead("output.dense"),
        "hook_resid_post": SiteRead(""),
    },
    note="post-LN: resid_mid is the attention LayerNorm's output, resid_post the block output.",
)

TABLES: tuple[ArchitectureTable, ...] = (GPT2, GPT_NEOX, LLAMA, GEMMA, GEMMA2, BERT)


def _known_names() -> list[str]:
    names = {t.family for t in TABLES} | {m for t in TABLES for m in t.model_types}
    return sorted(names)


def table_named(name: str) -> ArchitectureTable:
    """The table for a family name or a ``config.model_type`` (``"llama"``, ``"qwen2"``, ...)."""
    for table in TABLES:
        if name == table.family or name in table.model_types:
            return table
    raise ValueError(f"No architecture table named {name!r}. Known: {', '.join(_known_names())}.")


def table_for_config(config: Any) -> ArchitectureTable | None:
    """The table for a Hugging Face config, from its ``model_type``; None when there is none."""
    model_type = getattr(config, "model_type", None)
    for table in TABLES:
        if model_type in table.model_types:
            return table
    return None


def configured_layer_count(config: Any) -> int | None:
    """The number of blocks a config declares, under whichever name its family uses."""
    for attr in ("num_hidden_layers", "n_layer", "num_layers"):
        value = getattr(config, attr, None)
        if isinstance(value, int):
            return value
    return None


def discover_table(base_model: torch.nn.Module, config: Any) -> ArchitectureTable:
    """A residual-stream-only table for a model family without one (see the module docstring)."""
    n_layers = configured_layer_count(config)
    if n_layers is None:
        raise ValueError(
            f"Cannot find the blocks of a {type(base_model).__name__}: its config declares no "
            "num_hidden_layers / n_layer / num_layers. Pass architecture= with a known family "
            f"({', '.join(_known_names())})."
        )
    candidates = [
        (sum(p.numel() for p in module.parameters()), name)
        for name, module in base_model.named_modules()
        if isinstance(module, torch.nn.ModuleList) and len(module) == n_layers
    ]
    if not candidates:
        raise ValueError(
            f"Found no nn.ModuleList of {n_layers} blocks (the config's layer count) in a "
            f"{type(base_model).__name__}; pass architecture= with a known family "
            f"({', '.join(_known_names())})."
        )
    _, layers = max(candidates)
    return ArchitectureTable(
        family=f"discovered:{getattr(config, 'model_type', type(base_model).__name__)}",
        model_types=(),
        layers=layers,
        embed=None,
        block={"hook_resid_pre": SiteRead("", "input"), "hook_resid_post": SiteRead("")},
        note="unknown family: layer list discovered; only resid_pre / resid_post are offered.",
    )

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
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import torch

from geomlens.hooks.sites import EMBED_SITE, LAYER_SITE_TEMPLATES
from geomlens.models.config_fields import LAYER_COUNT_FIELDS, first_field

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
    #: The module sees tokens flattened to ``[B*T, d]`` (OPT's MLP); read back as ``[B, T, d]``.
    flat_tokens: bool = False

    def applies_to(self, config: Any) -> bool:
        return all(getattr(config, key, None) == value for key, value in self.requires)

    def unmet(self, config: Any) -> str:
        """Why this read does not apply to ``config`` ("" when it does)."""
        missing = [
            f"{key}={value!r} (this config has {getattr(config, key, None)!r})"
            for key, value in self.requires
            if getattr(config, key, None) != value
        ]
        return "only offered with " + ", ".join(missing) if missing else ""


@dataclass(frozen=True)
class ArchitectureTable:
    """The canonical sites of one architecture family.

    ``layers`` is the path of the block list; ``embed`` reads ``hook_embed`` (relative to the base
    model); ``block`` maps the per-block site names of :data:`BLOCK_SITES` to reads relative to
    one block. ``refused`` maps per-block site names this family does not have to the reason,
    which the adapter gives when such a site is asked for. ``shared_block``: ``layers`` is one
    block module that the model runs ``num_hidden_layers`` times (ALBERT); block ``L``'s sites
    are read at its ``L``-th call.
    """

    family: str
    model_types: tuple[str, ...]
    layers: str
    embed: SiteRead | None
    block: Mapping[str, SiteRead] = field(default_factory=dict)
    note: str = ""
    positions: PositionNumbering = "from_zero"
    refused: Mapping[str, str] = field(default_factory=dict)
    shared_block: bool = False
    #: Post-LayerNorm blocks (BERT): sub-layer outputs are normalised with the residual, so the
    #: sites do not add up.
    post_ln: bool = False
    #: A block that offers no resid_mid is parallel (attention and MLP read the same input).
    parallel: bool = False
    #: The padding index positions are numbered after, when the family fixes it (MPNet: 1)
    #: rather than reading the config's ``pad_token_id``.
    padding_idx: int | None = None
    #: Config entries the table is written for; a model with other values is refused at attach.
    config_requires: tuple[tuple[str, Any], ...] = ()

    def check_config(self, config: Any) -> None:
        """Raise if ``config`` is outside what this table describes."""
        unmet = SiteRead("", requires=self.config_requires).unmet(config)
        if unmet:
            raise ValueError(f"The {self.family!r} architecture table is {unmet}.")

    def __post_init__(self) -> None:
        unknown = (set(self.block) | set(self.refused)) - set(BLOCK_SITES)
        if unknown:
            raise ValueError(
                f"Table {self.family!r} names sites that are not canonical: {sorted(unknown)}; "
                f"per-block sites are {', '.join(BLOCK_SITES)}."
            )

    def block_sites(self, config: Any) -> list[str]:
        """The per-block site names this model offers, in forward order."""
        return [s for s in BLOCK_SITES if s in self.block and self.block[s].applies_to(config)]

    def block_refusals(self, config: Any) -> dict[str, str]:
        """Each per-block site name this model does not offer, with the reason."""
        reasons: dict[str, str] = {}
        for name in BLOCK_SITES:
            if name in self.refused:
                reasons[name] = self.refused[name]
            elif name in self.block and not self.block[name].applies_to(config):
                reasons[name] = self.block[name].unmet(config)
            elif name not in self.block:
                reasons[name] = self.note or f"the {self.family!r} table does not locate it"
        return reasons

    def locate(self, site: str) -> tuple[str, SiteRead]:
        """The module path (relative to the base model) and read of a canonical site."""
        if site == EMBED_SITE:
            if self.embed is None:
                raise KeyError(site)
            return self.embed.module, self.embed
        _, layer, name = site.split(".", 2)
        read = self.block[name]
        block = self.layers if self.shared_block else f"{self.layers}.{layer}"
        path = block + (f".{read.module}" if read.module else "")
        return path, read


def _block(*, attn: str, mid: SiteRead, up: str, down: str, mlp_out: str) -> dict[str, SiteRead]:
    """The seven block sites, read the same way in every layout but ``hook_resid_mid``:
    ``up`` is the MLP's first projection (its output is the hidden layer before the activation),
    ``down`` its output projection (whose input is the hidden layer after it)."""
    return {
        "hook_resid_pre": SiteRead("", "input"),
        "hook_attn_out": SiteRead(attn),
        "hook_resid_mid": mid,
        "mlp.hook_pre": SiteRead(up),
        "mlp.hook_post": SiteRead(down, "input"),
        "hook_mlp_out": SiteRead(mlp_out),
        "hook_resid_post": SiteRead(""),
    }


def _pre_ln_block(
    *, attn: str, ln2: str, mlp: str, mlp_pre: str, mlp_post: str
) -> dict[str, SiteRead]:
    """Reads of a pre-LayerNorm block: ``x + attn(ln1(x))``, then ``+ mlp(ln2(.))``.

    ``resid_mid`` is the input of the second norm; ``mlp.hook_post`` is the input of the MLP's
    output projection (for a gated MLP that is ``act(gate) * up``, as TransformerLens defines it).
    """
    return _block(attn=attn, mid=SiteRead(ln2, "input"), up=mlp_pre, down=mlp_post, mlp_out=mlp)


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
_PARALLEL_RESIDUAL_NOTE = (
    "hook_resid_mid only without a parallel residual (use_parallel_residual=False)."
)


def _mid_unless_parallel(block: dict[str, SiteRead]) -> dict[str, SiteRead]:
    """A pre-LN block whose resid_mid exists only when ``use_parallel_residual`` is off: with a
    parallel residual attention and MLP both read the block input, so there is no residual
    stream between them (TransformerLens offers no resid_mid there either)."""
    mid = block["hook_resid_mid"]
    flag = (("use_parallel_residual", False),)
    return {**block, "hook_resid_mid": replace(mid, requires=flag)}


GPT_NEOX = ArchitectureTable(
    family="gpt_neox",
    model_types=("gpt_neox",),
    layers="layers",
    embed=SiteRead("embed_in"),
    block=_mid_unless_parallel(_NEOX_BLOCK),
    note=_PARALLEL_RESIDUAL_NOTE,
    parallel=True,
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
def _post_ln_block(*, attn: str, attn_norm: str, up: str, down: str) -> dict[str, SiteRead]:
    """Reads of a post-LayerNorm block: ``attn`` / ``down`` are the attention and MLP output
    projections, ``attn_norm`` the LayerNorm after the attention's residual add, ``up`` the MLP's
    first projection (its output is the hidden layer before the activation)."""
    return _block(attn=attn, mid=SiteRead(attn_norm), up=up, down=down, mlp_out=down)


BERT = ArchitectureTable(
    family="bert",
    model_types=("bert",),
    layers="encoder.layer",
    embed=SiteRead("embeddings.word_embeddings"),
    block=_post_ln_block(
        attn="attention.output.dense",
        attn_norm="attention.output.LayerNorm",
        up="intermediate.dense",
        down="output.dense",
    ),
    note="post-LN: resid_mid is the attention LayerNorm's output, resid_post the block output.",
    post_ln=True,
)

# The RoBERTa family is BERT's block with positions numbered from padding_idx + 1.
ROBERTA = replace(
    BERT,
    family="roberta",
    model_types=("roberta", "xlm-roberta", "camembert"),
    positions="after_padding_idx",
)
# ELECTRA (its embedding projection sits before block 0) and DeBERTa-v2 (disentangled attention
# inside attention.self) keep BERT's module names around the residual stream.
ELECTRA = replace(BERT, family="electra", model_types=("electra",))
DEBERTA_V2 = replace(BERT, family="deberta_v2", model_types=("deberta-v2",))
MPNET = ArchitectureTable(
    family="mpnet",
    model_types=("mpnet",),
    layers="encoder.layer",
    embed=SiteRead("embeddings.word_embeddings"),
    block=_post_ln_block(
        attn="attention.attn.o",
        attn_norm="attention.LayerNorm",
        up="intermediate.dense",
        down="output.dense",
    ),
    note=BERT.note,
    post_ln=True,
    positions="after_padding_idx",
    padding_idx=1,  # fixed in MPNet's embeddings, whatever the config's pad_token_id
)
DISTILBERT = ArchitectureTable(
    family="distilbert",
    model_types=("distilbert",),
    layers="transformer.layer",
    embed=SiteRead("embeddings.word_embeddings"),
    block=_post_ln_block(
        attn="attention.out_lin", attn_norm="sa_layer_norm", up="ffn.lin1", down="ffn.lin2"
    ),
    note=BERT.note,
    post_ln=True,
)
# ALBERT runs one shared layer (group 0, layer 0) num_hidden_layers times; its sites are per
# application. Its embedding (embedding_size wide) is projected to hidden_size before block 0.
ALBERT = ArchitectureTable(
    family="albert",
    model_types=("albert",),
    layers="encoder.albert_layer_groups.0.albert_layers.0",
    embed=SiteRead("embeddings.word_embeddings"),
    block=_post_ln_block(
        attn="attention.dense", attn_norm="attention.LayerNorm", up="ffn", down="ffn_output"
    ),
    note="one shared layer run num_hidden_layers times: block L is its L-th application; "
    "post-LN like BERT; one layer group with one inner layer only.",
    shared_block=True,
    post_ln=True,
    config_requires=(("num_hidden_groups", 1), ("inner_group_num", 1)),
)
# T5-style encoders: relative attention biases (no position ids), pre-RMSNorm sublayers each
# adding back into the residual stream; the feed-forward's activation reads the gate for gated
# variants (T5 v1.1, Flan-T5), as TransformerLens defines mlp.hook_pre.
T5_ENCODER = ArchitectureTable(
    family="t5_encoder",
    model_types=("t5", "mt5", "umt5"),
    layers="encoder.block",
    embed=SiteRead("encoder.embed_tokens"),
    block={
        "hook_resid_pre": SiteRead("", "input"),
        "hook_attn_out": SiteRead("layer.0.SelfAttention"),
        "hook_resid_mid": SiteRead("layer.1.layer_norm", "input"),
        "mlp.hook_pre": SiteRead("layer.1.DenseReluDense.act", "input"),
        "mlp.hook_post": SiteRead("layer.1.DenseReluDense.wo", "input"),
        "hook_mlp_out": SiteRead("layer.1.DenseReluDense"),
        "hook_resid_post": SiteRead(""),
    },
    note="the encoder stack only (T5EncoderModel, or the encoder of a T5 model).",
    positions="none",
)

# Decoders whose blocks read as a pre-LN llama block under other module names.
OLMO = replace(LLAMA, family="olmo", model_types=("olmo",))
STABLELM = ArchitectureTable(
    family="stablelm",
    model_types=("stablelm",),
    layers="layers",
    embed=SiteRead("embed_tokens"),
    block=_mid_unless_parallel(_GATED_BLOCK),
    note=_PARALLEL_RESIDUAL_NOTE,
    parallel=True,
)
STARCODER2 = ArchitectureTable(
    family="starcoder2",
    model_types=("starcoder2",),
    layers="layers",
    embed=SiteRead("embed_tokens"),
    block=_pre_ln_block(
        attn="self_attn",
        ln2="post_attention_layernorm",
        mlp="mlp",
        mlp_pre="mlp.c_fc",
        mlp_post="mlp.c_proj",
    ),
)
# Phi-3 fuses gate and up projections (gate_up_proj is 2 * d_mlp wide): the activation's input
# is the gate alone, which is TransformerLens's mlp.hook_pre for a gated MLP.
PHI3 = ArchitectureTable(
    family="phi3",
    model_types=("phi3",),
    layers="layers",
    embed=SiteRead("embed_tokens"),
    block={**_GATED_BLOCK, "mlp.hook_pre": SiteRead("mlp.activation_fn", "input")},
)
# OLMo-2 normalises each sublayer's output (no pre-norms): the MLP reads the residual directly.
OLMO2 = ArchitectureTable(
    family="olmo2",
    model_types=("olmo2",),
    layers="layers",
    embed=SiteRead("embed_tokens"),
    block={
        **_GATED_BLOCK,
        "hook_attn_out": SiteRead("post_attention_layernorm"),
        "hook_resid_mid": SiteRead("mlp", "input"),
        "hook_mlp_out": SiteRead("post_feedforward_layernorm"),
    },
)
GPT_BIGCODE = replace(GPT2, family="gpt_bigcode", model_types=("gpt_bigcode",))
# GPT-Neo (and the TinyStories models built on it) keeps GPT-2's module names.
GPT_NEO = replace(GPT2, family="gpt_neo", model_types=("gpt_neo",))
MPT = ArchitectureTable(
    family="mpt",
    model_types=("mpt",),
    layers="blocks",
    embed=SiteRead("wte"),
    # MPT's MLP module adds the residual itself: mlp_out is its output projection.
    block={
        **_pre_ln_block(
            attn="attn", ln2="norm_2", mlp="ffn", mlp_pre="ffn.up_proj", mlp_post="ffn.down_proj"
        ),
        "hook_mlp_out": SiteRead("ffn.down_proj"),
    },
    note="ALiBi (no position ids); the MLP module adds the residual itself.",
    positions="none",
)
# OPT has no MLP module: fc1 / fc2 sit in the block. Pre-LN unless do_layer_norm_before=False
# (OPT-350m), whose residual between the sublayers is the attention LayerNorm's output instead.
OPT = ArchitectureTable(
    family="opt",
    model_types=("opt",),
    layers="decoder.layers",
    embed=SiteRead("decoder.embed_tokens"),
    block={
        "hook_resid_pre": SiteRead("", "input"),
        "hook_attn_out": SiteRead("self_attn"),
        "hook_resid_mid": SiteRead(
            "final_layer_norm",
            "input",
            requires=(("do_layer_norm_before", True),),
            flat_tokens=True,
        ),
        "mlp.hook_pre": SiteRead("fc1", flat_tokens=True),
        "mlp.hook_post": SiteRead("fc2", "input", flat_tokens=True),
        "hook_mlp_out": SiteRead("fc2", flat_tokens=True),
        "hook_resid_post": SiteRead(""),
    },
    note="hook_resid_mid only when pre-LN (do_layer_norm_before=True).",
)
# BLOOM's attention and MLP modules add the residual themselves, so attn_out / mlp_out are their
# output projections; hook_embed is the token lookup, before the embedding LayerNorm. With
# pretraining_tp > 1 the output projections run in slices, so those sites are not offered.
_UNSLICED = (("pretraining_tp", 1),)
BLOOM = ArchitectureTable(
    family="bloom",
    model_types=("bloom",),
    layers="h",
    embed=SiteRead("word_embeddings"),
    block={
        "hook_resid_pre": SiteRead("", "input"),
        "hook_attn_out": SiteRead("self_attention.dense", requires=_UNSLICED),
        "hook_resid_mid": SiteRead("post_attention_layernorm", "input"),
        "mlp.hook_pre": SiteRead("mlp.dense_h_to_4h"),
        "mlp.hook_post": SiteRead("mlp.dense_4h_to_h", "input", requires=_UNSLICED),
        "hook_mlp_out": SiteRead("mlp.dense_4h_to_h", requires=_UNSLICED),
        "hook_resid_post": SiteRead(""),
    },
    note="ALiBi (no position ids); residual added inside the attention and MLP modules.",
    positions="none",
)

# Parallel-residual families: attention and MLP both read the block input (through one or two
# norms) and both outputs are added to it at once, so there is no residual stream between them.
_PARALLEL_NOTE = "parallel residual: attention and MLP read the same input, so no hook_resid_mid."
_NO_MID = {"hook_resid_mid": _PARALLEL_NOTE}


def _parallel_block(*, attn: str, mlp: str, mlp_pre: str, mlp_post: str) -> dict[str, SiteRead]:
    return {
        "hook_resid_pre": SiteRead("", "input"),
        "hook_attn_out": SiteRead(attn),
        "mlp.hook_pre": SiteRead(mlp_pre),
        "mlp.hook_post": SiteRead(mlp_post, "input"),
        "hook_mlp_out": SiteRead(mlp),
        "hook_resid_post": SiteRead(""),
    }


def _parallel_table(family: str, *, layers: str, embed: str, **modules: str) -> ArchitectureTable:
    """A parallel-residual family's table: :func:`_parallel_block` of ``modules``, with no
    hook_resid_mid (refused, saying why)."""
    return ArchitectureTable(
        family=family,
        model_types=(family,),
        layers=layers,
        embed=SiteRead(embed),
        block=_parallel_block(**modules),
        note=_PARALLEL_NOTE,
        refused=_NO_MID,
        parallel=True,
    )


PHI = _parallel_table(
    "phi", layers="layers", embed="embed_tokens",
    attn="self_attn", mlp="mlp", mlp_pre="mlp.fc1", mlp_post="mlp.fc2",
)  # fmt: skip
GPTJ = _parallel_table(
    "gptj", layers="h", embed="wte",
    attn="attn", mlp="mlp", mlp_pre="mlp.fc_in", mlp_post="mlp.fc_out",
)  # fmt: skip
COHERE = _parallel_table(
    "cohere", layers="layers", embed="embed_tokens",
    attn="self_attn", mlp="mlp", mlp_pre="mlp.gate_proj", mlp_post="mlp.down_proj",
)  # fmt: skip
# Falcon is parallel by default (parallel_attn=True, or new_decoder_architecture); the MLP's
# output is then summed with the attention output in place, after it was read here.
FALCON = ArchitectureTable(
    family="falcon",
    model_types=("falcon",),
    layers="h",
    embed=SiteRead("word_embeddings"),
    block={
        **_parallel_block(
            attn="self_attention",
            mlp="mlp",
            mlp_pre="mlp.dense_h_to_4h",
            mlp_post="mlp.dense_4h_to_h",
        ),
        "hook_resid_mid": SiteRead(
            "post_attention_layernorm",
            "input",
            requires=(("parallel_attn", False), ("new_decoder_architecture", False)),
        ),
    },
    note="hook_resid_mid only for a sequential block (parallel_attn=False).",
    parallel=True,
)

# Mixture-of-experts blocks: the MLP is a router over experts (plus a shared expert for
# Qwen2-MoE), so there is no single hidden layer for mlp.hook_pre / hook_post to name.
MOE_REASON = (
    "a mixture-of-experts block has no single MLP hidden layer (each token goes through its "
    "routed experts); hook_mlp_out is the mixture's output"
)
_MOE_REFUSED = {"mlp.hook_pre": MOE_REASON, "mlp.hook_post": MOE_REASON}
_MOE_BLOCK = {k: v for k, v in _GATED_BLOCK.items() if k not in _MOE_REFUSED}
MIXTRAL = ArchitectureTable(
    family="mixtral",
    model_types=("mixtral", "qwen2_moe"),
    layers="layers",
    embed=SiteRead("embed_tokens"),
    block=_MOE_BLOCK,
    note="mixture of experts: no mlp.hook_pre / mlp.hook_post.",
    refused=_MOE_REFUSED,
)

TABLES: tuple[ArchitectureTable, ...] = (
    GPT2,
    GPT_NEOX,
    LLAMA,
    GEMMA,
    GEMMA2,
    BERT,
    ROBERTA,
    ELECTRA,
    DEBERTA_V2,
    MPNET,
    DISTILBERT,
    ALBERT,
    T5_ENCODER,
    OLMO,
    OLMO2,
    STABLELM,
    STARCODER2,
    PHI3,
    GPT_BIGCODE,
    GPT_NEO,
    MPT,
    OPT,
    BLOOM,
    PHI,
    GPTJ,
    COHERE,
    FALCON,
    MIXTRAL,
)


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
    return first_field(config, LAYER_COUNT_FIELDS)


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

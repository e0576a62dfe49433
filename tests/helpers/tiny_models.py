"""Tiny, seeded Hugging Face models and a word-level tokenizer, built offline for backend tests.

Every builder returns ``(hf_model, tokenizer)`` with the model in eval mode and its vocabulary
sized to the tokenizer, so texts and token ids both work. The tokenizer is a fast tokenizer
(offsets, hence ``[[marked]]`` spans, work) over a small lower-cased English vocabulary; unknown
words map to ``<unk>``.
"""

from __future__ import annotations

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    BertConfig,
    BertModel,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerFast,
)

from geomlens.experiments.word_tokenizer import word_level_tokenizer

_VOCABULARY_TEXT = """
. , ! ? the a an of in on at to and or but is was are were it this that he she they we you i
king queen man woman boy girl cat dog fox bird tree house city river year day night happened
quick brown lazy jumps over sat mat red green blue big small old new first last one two three
four five six seven eight nine ten 1630 1776 1914 2024 geometry representations model layer
token word sentence
"""
WORDS = tuple(_VOCABULARY_TEXT.split())

#: Positions every tiny model supports; tests keep their inputs shorter.
MAX_POSITIONS = 64


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """A word-level fast tokenizer: ids 0-3 are ``<pad> <unk> <bos> <eos>``, then ``WORDS``;
    text is lower-cased first."""
    return word_level_tokenizer(WORDS, lowercase=True)


def _seeded(build: type[PreTrainedModel], config: object, seed: int) -> PreTrainedModel:
    torch.manual_seed(seed)
    return build(config).eval()


def tiny_gpt2(seed: int = 0) -> tuple[GPT2LMHeadModel, PreTrainedTokenizerFast]:
    """GPT-2 (absolute learned positions, pre-LN, GELU): 2 layers, width 32, 4 heads."""
    tokenizer = tiny_tokenizer()
    config = GPT2Config(
        n_layer=2,
        n_embd=32,
        n_head=4,
        vocab_size=len(tokenizer),
        n_positions=MAX_POSITIONS,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return _seeded(GPT2LMHeadModel, config, seed), tokenizer


def tiny_llama(
    seed: int = 0,
    tokenizer: PreTrainedTokenizerFast | None = None,
    hidden_size: int = 32,
    intermediate_size: int = 64,
) -> tuple[LlamaForCausalLM, PreTrainedTokenizerFast]:
    """Llama (rotary positions, RMSNorm, gated SiLU MLP, grouped KV heads): 2 layers, width 32
    (or ``hidden_size``); over ``tokenizer`` when given (its vocabulary sizes the model)."""
    tokenizer = tokenizer or tiny_tokenizer()
    config = LlamaConfig(
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=len(tokenizer),
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return _seeded(LlamaForCausalLM, config, seed), tokenizer


def tiny_bert(seed: int = 0) -> tuple[BertModel, PreTrainedTokenizerFast]:
    """A headless BERT encoder (post-LN, GELU, absolute positions) shaped like MiniLM's
    ``BertModel``: 2 layers, width 32, 4 heads."""
    tokenizer = tiny_tokenizer()
    config = BertConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        vocab_size=len(tokenizer),
        max_position_embeddings=MAX_POSITIONS,
        pad_token_id=tokenizer.pad_token_id,
    )
    return _seeded(BertModel, config, seed), tokenizer


def tiny_decoder(
    model_type: str, seed: int = 0, **config: object
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """Any Hugging Face causal-LM family by ``config.model_type`` (``"gpt_neox"``, ``"gemma2"``,
    ``"mistral"``, ``"opt"``, ...): 2 layers, width 32, 4 heads (2 key/value heads where the
    family has them), MLP width 64; ``config`` overrides any of these or adds family-specific
    fields."""
    tokenizer = tiny_tokenizer()
    shape: dict[str, object] = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "vocab_size": len(tokenizer),
        "max_position_embeddings": MAX_POSITIONS,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    # Only the fields this family's config has: a stray one (grouped KV heads on GPT-NeoX) is
    # ignored by transformers but read by TransformerLens, and the two would disagree.
    defaults = AutoConfig.for_model(model_type)
    known = {
        key: value for key, value in shape.items() if _settable(defaults, key) and key not in config
    }
    hf_config = AutoConfig.for_model(model_type, **known, **config)
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(hf_config).eval(), tokenizer


def _settable(config: object, key: str) -> bool:
    """Whether ``config`` has a field ``key`` that can be set (Falcon derives head_dim)."""
    attribute = getattr(type(config), key, None)
    return hasattr(config, key) and not (isinstance(attribute, property) and attribute.fset is None)


#: Encoder config field names per family, where they differ from BERT's.
_ENCODER_FIELDS: dict[str, dict[str, str]] = {
    "distilbert": {
        "hidden_size": "dim",
        "intermediate_size": "hidden_dim",
        "num_hidden_layers": "n_layers",
        "num_attention_heads": "n_heads",
    },
    "t5": {
        "hidden_size": "d_model",
        "intermediate_size": "d_ff",
        "num_hidden_layers": "num_layers",
        "num_attention_heads": "num_heads",
    },
}


def tiny_encoder(
    model_type: str, seed: int = 0, **config: object
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """A headless encoder of any family by ``model_type`` (``"roberta"``, ``"mpnet"``, ``"t5"``
    gives a ``T5EncoderModel``, ...): 2 layers, width 32, 4 heads, MLP width 64."""
    from transformers import AutoModel, T5EncoderModel

    tokenizer = tiny_tokenizer()
    names = _ENCODER_FIELDS.get(model_type, {})
    shape: dict[str, object] = {
        names.get(key, key): value
        for key, value in {
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
        }.items()
    }
    shape.update(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        # RoBERTa-style positions start at pad_token_id + 1: leave room for that offset.
        max_position_embeddings=MAX_POSITIONS + tokenizer.pad_token_id + 2,
    )
    if model_type == "t5":
        shape["d_kv"] = 8
    hf_config = AutoConfig.for_model(model_type, **{**shape, **config})
    torch.manual_seed(seed)
    build = T5EncoderModel if model_type == "t5" else AutoModel.from_config
    return build(hf_config).eval(), tokenizer


def tiny_hooked_transformer(positional_embedding_type: str = "standard", **overrides: object):
    """TransformerLens's own HookedTransformer (LayerNorm, GELU): 2 layers, width 32, 4 heads,
    vocabulary sized to :func:`tiny_tokenizer`; ``overrides`` change config fields
    (``act_fn="silu", gated_mlp=True``)."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    torch.manual_seed(0)
    config = HookedTransformerConfig(
        n_layers=2,
        d_model=32,
        n_heads=4,
        d_head=8,
        d_mlp=64,
        d_vocab=len(tiny_tokenizer()),
        n_ctx=MAX_POSITIONS,
        act_fn=overrides.pop("act_fn", "gelu"),
        normalization_type="LN",
        positional_embedding_type=positional_embedding_type,
        **overrides,
    )
    return HookedTransformer(config).eval()

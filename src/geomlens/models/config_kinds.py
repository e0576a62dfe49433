"""What kind of model a Hugging Face config describes: a causal LM (loaded with its LM head) or a
vision-language model (loaded with its processor)."""

from __future__ import annotations

from typing import Any


def is_decoder(config: Any) -> bool:
    """Whether a checkpoint is a causal LM (loaded with its LM head) rather than an encoder."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    architectures = getattr(config, "architectures", None) or []
    if architectures:
        return any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in architectures)
    model_type = getattr(config, "model_type", None)
    return (
        model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES
    )


def is_vision_language(config: Any) -> bool:
    """Whether a checkpoint is an image-text-to-text model (Llava, Qwen2.5-VL, Gemma 3, …)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )

    return getattr(config, "model_type", None) in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

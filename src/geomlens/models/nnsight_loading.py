"""Loading a Hugging Face model and its tokenizer (or processor) by hub name or folder, for nnsight."""

from __future__ import annotations

import os
from typing import Any

import torch

from geomlens.models.config_kinds import is_decoder, is_vision_language
from geomlens.models.nnsight import NNsightAdapter
from geomlens.models.nnsight_twin import quiet_envoy


def load_nnsight(
    name_or_path: str | os.PathLike[str],
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
    trust_remote_code: bool = False,
    device_map: str | dict[str, Any] | None = None,
    max_memory: dict[Any, str] | None = None,
) -> NNsightAdapter:
    """Load a Hugging Face model and its tokenizer by hub name or local folder, for nnsight.

    ``device_map`` / ``max_memory`` go to ``from_pretrained`` (accelerate places the layers);
    ``device`` then must be None.

    Decoders (a causal-LM architecture in the config) load with ``AutoModelForCausalLM``,
    encoders such as BERT / MiniLM with ``AutoModel``, vision-language models with
    ``AutoModelForImageTextToText`` and their processor (``adapter.processor``). A local folder is read without any
    network access; a hub name follows the usual Hugging Face cache and ``HF_HUB_OFFLINE``
    rules. A checkpoint without tokenizer files loads with ``tokenizer=None`` (token ids only).
    """
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

    source = os.fspath(name_or_path)
    local_only = os.path.isdir(source)
    # Safe loading: no code from the model's files unless asked, and weights only from
    # safetensors or torch.load(weights_only=True) (a pickle carrying code is refused).
    safe = {"local_files_only": local_only, "trust_remote_code": trust_remote_code}
    config = AutoConfig.from_pretrained(source, **safe)
    # transformers' Auto classes share no public base type to annotate with.
    loader: Any = AutoModelForCausalLM if is_decoder(config) else AutoModel
    if getattr(config, "is_encoder_decoder", False):
        # Representations are read from the encoder (T5, Flan-T5): its stack alone runs on
        # token ids, where the whole model would also need decoder inputs.
        from transformers import AutoModelForTextEncoding as loader
    vision_language = is_vision_language(config)
    if vision_language:  # with its LM head, so that the logits site exists
        from transformers import AutoModelForImageTextToText as loader
    placement = {"device_map": device_map, "max_memory": max_memory} if device_map else {}
    model = loader.from_pretrained(
        source, config=config, dtype=dtype, weights_only=True, **safe, **placement
    )
    if device is not None:
        model = model.to(device)
    model.eval()
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **safe)
    except (OSError, ValueError):
        tokenizer = None
    if tokenizer is not None and tokenizer.vocab_size == 0:
        # transformers 5 builds an empty tokenizer for a folder without tokenizer files.
        tokenizer = None
    processor = None
    if vision_language:  # images (and prompts) become model inputs through the processor
        from transformers import AutoProcessor

        processor = AutoProcessor.from_pretrained(source, **safe)
        tokenizer = getattr(processor, "tokenizer", None) or tokenizer
    return NNsightAdapter(
        quiet_envoy(model), tokenizer=tokenizer, model_id=source, processor=processor
    )

"""The language part of a vision-language model: where its canonical site names live.

A VLM (Llava, Gemma 3, …) wraps a vision tower and a language model whose family the
architecture tables know. Its canonical names (``blocks.{L}.hook_resid_post``, …) are those of
the language model, read at the module the VLM holds as ``language_model``, with the text
config; everything else (the vision tower, the projector) is reached by ``module:PATH``.
"""

from __future__ import annotations

from typing import Any

import torch

from geomlens.models.architectures import table_for_config


def language_model_of(base: torch.nn.Module, config: Any) -> tuple[torch.nn.Module, Any] | None:
    """``(language model, its config)`` of a VLM whose text family has a table, else None."""
    text_config = getattr(config, "text_config", None)
    language = getattr(base, "language_model", None)
    if text_config is None or not isinstance(language, torch.nn.Module):
        return None
    if table_for_config(text_config) is None:
        return None
    return language, text_config

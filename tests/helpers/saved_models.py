"""Tiny models saved to a folder, as a user's local model (safetensors and tokenizer files)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def saved_model(folder: Path, build: Callable[[], tuple[Any, Any]]) -> Path:
    """Save ``build()``'s (model, tokenizer) with ``save_pretrained`` into ``folder``."""
    model, tokenizer = build()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder

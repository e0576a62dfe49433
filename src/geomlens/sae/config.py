"""How an SAE is trained offline (kept apart from the training code, which imports sae-lens,
so that the command line can show these defaults without importing it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TrainingConfig:
    """How to train an SAE offline (every field enters the cache key)."""

    d_sae: int = 1536
    """Dictionary size m (number of latents)."""
    tokens: int = 20_000
    """Distinct activation vectors (tokens) captured (about 2 minutes for MiniLM on a CPU)."""
    l1_coefficient: float = 5.0
    """Weight of sae-lens's L1 sparsity penalty (on activations normalised to norm √d_in)."""
    lr: float = 1e-3
    """Adam learning rate (constant)."""
    batch_tokens: int = 256
    """Activation vectors per training step."""
    rows_per_chunk: int = 64
    """Texts captured per chunk; tokens are shuffled within a chunk before training on them."""
    passes: int = 4
    """Times the trainer sees each captured chunk (reshuffled each time): on a CPU the forward
    passes cost far more than the SAE's steps, so captured activations are reused."""
    max_length: int = 128
    """Texts are truncated to this many tokens."""
    exclude_special: bool = True
    """Train without special tokens (BOS, EOS, PAD, SEP, CLS), as sae-lens's
    ``exclude_special_tokens``."""
    sink_norm_ratio: float | None = 10.0
    """Train without attention sinks: positions whose activation norm exceeds this many times
    the median of their row's other tokens (``geomlens.hooks.content_tokens``; None: keep)."""
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def default_corpus_name() -> str:
    """Cache-key name of the default training data: the bundled corpus's training part, which
    depends on the Python version (its docstrings are the text)."""
    import platform

    return f"stdlib-docstrings/training/python-{platform.python_version()}"


def check_training_overrides(overrides: dict[str, Any]) -> None:
    """Fail at once, naming the valid fields, when ``overrides`` has a key TrainingConfig lacks."""
    valid = {f.name for f in dataclasses.fields(TrainingConfig)}
    unknown = sorted(set(overrides) - valid)
    if unknown:
        raise ValueError(
            f"training options {unknown} are not fields of TrainingConfig; valid: {sorted(valid)}."
        )

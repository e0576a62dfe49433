"""How an SAE is trained offline (kept apart from the training code, which imports sae-lens,
so that the command line can show these defaults without importing it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

#: Decoder-bias initialisations :class:`TrainingConfig` knows.
B_DEC_INITS = ("zeros", "mean")


@dataclass(frozen=True)
class TrainingConfig:
    """How to train an SAE offline (every field enters the cache key)."""

    d_sae: int = 1536
    """Dictionary size m (number of latents)."""
    tokens: int = 20_000
    """Content tokens read through the model and trained on, each ``passes`` times (about 2
    minutes for MiniLM on a CPU); reading stops there, and no row is read twice."""
    l1_coefficient: float = 5.0
    """Weight of sae-lens's L1 sparsity penalty (on activations normalised to norm √d_in)."""
    lr: float = 1e-3
    """Adam learning rate (constant unless ``lr_warmup`` / ``lr_decay`` say otherwise)."""
    lr_warmup: float = 0.0
    """Fraction of the steps over which the learning rate rises linearly from 0 (sae-lens's
    ``lr_warm_up_steps``)."""
    lr_decay: float = 0.0
    """Fraction of the last steps over which the learning rate falls linearly to 0 (sae-lens's
    ``lr_decay_steps``)."""
    l1_warmup: float = 0.0
    """Fraction of the steps over which the L1 coefficient rises linearly from 0 (sae-lens's
    ``l1_warm_up_steps``): latents form before the penalty can kill them."""
    b_dec_init: str = "zeros"
    """Decoder bias at the start: ``"zeros"`` (sae-lens's) or ``"mean"`` (the mean of the
    captured activations, so the latents start by coding the deviations from it)."""
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
    the median of their row's other tokens (``geomlens.inputs.content_tokens``; None: keep)."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.b_dec_init not in B_DEC_INITS:
            raise ValueError(
                f"TrainingConfig b_dec_init={self.b_dec_init!r} is not one of "
                f"{', '.join(map(repr, B_DEC_INITS))}."
            )
        for name in ("lr_warmup", "lr_decay", "l1_warmup"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(
                    f"TrainingConfig {name} is a fraction of the steps, from 0 to 1; got "
                    f"{getattr(self, name)}."
                )
        if self.lr_warmup + self.lr_decay > 1.0:
            raise ValueError(
                "TrainingConfig lr_warmup + lr_decay must not exceed 1 (they are fractions of "
                f"the same steps); got {self.lr_warmup} + {self.lr_decay}."
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: The encoder default (MiniLM's README numbers come from it): :class:`TrainingConfig` as it is.
ENCODER_TRAINING = TrainingConfig()

#: The default for causal LMs, for SmolLM2-135M at its middle block, where the encoder
#: default's 312 steps left ε̂_loss near 1 bit with most latents dead. The 40,000 tokens read
#: are kept in one buffer (``rows_per_chunk`` covers the corpus; reading stops at ``tokens``)
#: and trained on for 2 500 reshuffled steps: on a CPU the forward passes cost far more than
#: the SAE's steps. In the default report on SmolLM2 it gives ε̂_loss well under 1 bit
#: (docs/sae.md).
CAUSAL_LM_TRAINING = TrainingConfig(
    d_sae=2304,
    tokens=40_000,
    rows_per_chunk=4096,
    passes=16,
    l1_coefficient=3.0,
    lr=1e-3,
    lr_warmup=0.05,
    lr_decay=0.2,
    l1_warmup=0.05,
    b_dec_init="mean",
)


def default_training(is_causal_lm: bool) -> tuple[TrainingConfig, str]:
    """The default :class:`TrainingConfig` for a model, and its name for notes and provenance:
    the causal-LM recipe for a causal LM, the encoder default otherwise."""
    if is_causal_lm:
        return CAUSAL_LM_TRAINING, "causal-LM default"
    return ENCODER_TRAINING, "encoder default"


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

"""resolution's options."""

from __future__ import annotations

from dataclasses import dataclass

from geomlens.analyses.declaration import option
from geomlens.analyses.similarity.config import SimilarityConfig


@dataclass
class ResolutionConfig(SimilarityConfig):
    bootstrap: int = option(
        1000,
        "Bootstrap resamples of the stimuli for the ε, half-width and Δ intervals (each "
        "interval end is reported with its Monte-Carlo error).",
        low=0,
    )
    confidence: float = option(0.95, "Coverage of the bootstrap intervals.", low=0, high=1)
    draws: str = option(
        "independent",
        "Trials for the (p_S, p_I) numbers: 'independent' (the theory) or 'distinct' stimuli "
        "(the paper's experiments).",
    )
    choice: str = option(
        "expected", "'expected' Luce accuracy, or 'sampled' choices (seeded Monte Carlo)."
    )
    samples: int = option(200_000, "Monte-Carlo trials when exact enumeration is too large.", low=1)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mode != "representational":
            raise ValueError(
                "resolution fits representational similarity; for choice-based g(d) run "
                "'similarity' with mode='behavioural'."
            )
        if self.similarity == "negative-distance":
            raise ValueError(
                "resolution needs a similarity with g(0) = 1: use 'centred-cosine' or 'cosine'."
            )
        if self.draws not in ("independent", "distinct") or self.choice not in (
            "expected",
            "sampled",
        ):
            raise ValueError(
                "draws must be 'independent' or 'distinct' and choice 'expected' or 'sampled'; "
                f"got {self.draws!r}, {self.choice!r}."
            )
        if not 0 < self.confidence < 1 or self.bootstrap < 0:
            raise ValueError("confidence must be in (0, 1) and bootstrap >= 0.")

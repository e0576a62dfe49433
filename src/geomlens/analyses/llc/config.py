"""llc's options: the SGLD sampler's settings and how the data become sequences."""

from __future__ import annotations

from dataclasses import dataclass

from geomlens.analyses.declaration import AnalysisConfig, option


@dataclass
class LLCConfig(AnalysisConfig):
    chains: int = option(4, "Independent SGLD chains (the interval is over chains).", low=1)
    draws: int = option(100, "SGLD steps per chain after burn-in (one loss draw each).", low=1)
    burnin_steps: int = option(0, "SGLD steps per chain before the first draw.", low=0)
    step_size: float = option(
        1e-4, "SGLD step size ε (devinterp's lr): too large and the chains diverge.", low=0.0
    )
    localization: float = option(
        100.0, "γ, the pull of each chain back to the checkpoint's weights (0: none).", low=0.0
    )
    n_beta: float | None = option(
        None,
        "Inverse temperature nβ; None: B / ln B for B = sgld_batch_size (devinterp's usual "
        "default).",
        low=0.0,
    )
    sgld_batch_size: int = option(
        8, "Sequences per SGLD step (and per batch of the initial loss).", low=2
    )
    sequence_length: int = option(
        32, "Tokens per sequence: the data's real tokens, in row order, cut into these.", low=2
    )
    init_loss_batches: int = option(
        8,
        "Batches the loss at the checkpoint's own weights (the LLC's origin) is averaged on.",
        low=1,
    )
    sampler_seed: int | None = option(
        None, "The sampler's seed (chain c uses seed + c); None: the run's seed."
    )

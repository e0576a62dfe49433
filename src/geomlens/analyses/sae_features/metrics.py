"""The sae-features analysis's metrics: words, units, headlines (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

from typing import Any

from geomlens.analyses.spec import MetricSpec as M


def _active_latents(suffix: str, tokens: str) -> tuple[M, ...]:
    """The counts of active latents on one set of tokens: ``suffix`` ends their names and
    ``tokens`` their words (both empty for the default set)."""
    return (
        M(f"mean_k{suffix}", f"mean active latents k{tokens}", "latents"),
        M(f"max_k{suffix}", f"max active latents k{tokens}", "latents"),
        M(f"mean_max_k{suffix}", unit="latents"),
        M(f"token_mean_k{suffix}", unit="latents"),
    )


#: How a quantity read from a saturated pool is refused (its words begin so).
SATURATED = "not read: the pool is saturated"


def pool_not_saturated(result: Any, key: str) -> str | None:
    """Refuse SSD and everything derived from it (the bound U, N*) when the site's pool is
    saturated (``<site>.pool_saturated``: within 5 % of the dictionary), which then says
    nothing about the model."""
    site = next(
        (k[: -len(".pool_saturated")] for k in result.metrics
         if k.endswith(".pool_saturated") and key.startswith(k[: -len("pool_saturated")])),
        None,
    )  # fmt: skip
    if site is not None and result.metrics.get(f"{site}.pool_saturated"):
        return (
            f"{SATURATED} (the SAE fires nearly every latent), so this says nothing about the model"
        )
    return None


#: SSD and the quantities computed from it.
FROM_POOL = (pool_not_saturated,)

METRIC_SPECS: tuple[M, ...] = (
    # k and AUROC the content way (special tokens and attention sinks left out, sae-lens's
    # way) are the headlines; the *_all values are in the result beside them (docs/sae.md).
    M("pool_size", "pool size P", "latents", headline=True),
    M("dictionary_size", "dictionary size m", "latents", headline=True),
    M("ssd", "sparse semantic dimension", headline=True, guards=FROM_POOL),
    M("mean_k_content.heldout", headline=True),
    M("auroc_content.random_tokens", headline=True),
    M("auroc_content.replaced_15pct", headline=True),
    M("auroc_content.python_source", headline=True),
    M("explained_variance", "SAE explained variance", headline=True),
    M("bound", "generalisation bound U", "bits per token", headline=True, guards=FROM_POOL),
    M("n_star", "held-out sequences needed N*", "sequences", guards=FROM_POOL),
    # The released form counts predicted tokens, not sequences (docs/sae.md).
    M(
        "n_star.released",
        "held-out predicted tokens needed N* (released form)",
        "tokens",
        guards=FROM_POOL,
    ),
    M("eta", "pool mismatch η̂"),
    M("risk", "proxy risk", "bits per token"),
    M("vacuity_threshold", unit="bits per token"),
    M("epsilon_loss", "loss gap ε̂_loss", "bits per token"),
    M("epsilon_loss_shuffled", "loss gap with shuffled features"),
    M("heldout_sequences", "held-out sequences", "sequences"),
    M("calibration_tokens", "calibration tokens", "tokens"),
    M("heldout_predicted_tokens", unit="tokens"),
    *_active_latents("", ""),
    M("auroc", "AUROC"),
    *_active_latents("_content", " (content tokens)"),
    *_active_latents("_all", " (every token)"),
    M("auroc_content", "AUROC (content tokens)"),
    M("auroc_all", "AUROC (every token)"),
    M("auroc_norm", "AUROC of the activation norm (baseline)"),
    M("auroc_mahalanobis", "AUROC of the Mahalanobis distance (baseline)"),
    M("l0", "SAE L0", "latents"),
    M("dead_latents", "dead latents", "latents"),
    M("decoder_norm_spread", "decoder norm spread"),
)

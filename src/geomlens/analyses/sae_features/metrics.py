"""The sae-features analysis's metrics: words, units, headlines (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

from typing import Any

from geomlens.analyses.spec import MetricSpec as M

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
    M("eta", "pool mismatch η̂"),
    M("risk", "proxy risk", "bits per token"),
    M("vacuity_threshold", unit="bits per token"),
    M("epsilon_loss", "loss gap ε̂_loss"),
    M("epsilon_loss_shuffled", "loss gap with shuffled features"),
    M("heldout_sequences", "held-out sequences", "sequences"),
    M("calibration_tokens", "calibration tokens", "tokens"),
    M("heldout_predicted_tokens", unit="tokens"),
    M("mean_k", "mean active latents k", "latents"),
    M("max_k", "max active latents k", "latents"),
    M("mean_max_k", unit="latents"),
    M("token_mean_k", unit="latents"),
    M("auroc", "AUROC"),
    M("mean_k_content", "mean active latents k (content tokens)", "latents"),
    M("max_k_content", "max active latents k (content tokens)", "latents"),
    M("mean_max_k_content", unit="latents"),
    M("token_mean_k_content", unit="latents"),
    M("mean_k_all", "mean active latents k (every token)", "latents"),
    M("max_k_all", "max active latents k (every token)", "latents"),
    M("mean_max_k_all", unit="latents"),
    M("token_mean_k_all", unit="latents"),
    M("auroc_content", "AUROC (content tokens)"),
    M("auroc_all", "AUROC (every token)"),
    M("auroc_norm", "AUROC of the activation norm (baseline)"),
    M("auroc_mahalanobis", "AUROC of the Mahalanobis distance (baseline)"),
    M("l0", "SAE L0", "latents"),
    M("dead_latents", "dead latents", "latents"),
    M("decoder_norm_spread", "decoder norm spread"),
)

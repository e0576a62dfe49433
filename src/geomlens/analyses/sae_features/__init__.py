"""sae-features: SAE feature counts, the sparse semantic dimension, its bound, and OOD detection.

An sae-lens SAE reads a site of the model. Per token, ``k`` latents are active (``f_j > τ``);
per input its mean and max. Rows carry a ``condition``: ``calibration`` rows build the pool G
of latents ever active (P = |G|, SSD = P ln(em/P)); ``heldout`` rows give the pool mismatch η̂
(the fraction of sequences using a latent outside G) and the bound's empirical terms; every
other condition is an out-of-distribution set scored by mean (or max) k, with AUROC against
``heldout``. With a model to run, the SAE's reconstruction is spliced in place of the site
(``adapter.intervene``) and the loss gap ε̂_loss measured: smoothed bits per token on causal
LMs (through the ``logits`` site), or an output-space fidelity on encoders (1 − cosine of the
final hidden states, named in the result). A feature-shuffle ablation permutes latent indices
before decoding (same L0, broken semantics). docs/sae.md gives every formula.
"""

from geomlens.analyses.sae_features.analysis import SAEFeatures
from geomlens.analyses.sae_features.config import (
    CALIBRATION,
    COSINE_FIDELITY,
    DEFAULT_CALIBRATION_ROWS,
    DEFAULT_HELDOUT_ROWS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_OOD_ROWS,
    HELDOUT,
    POOL_SATURATION,
    SMOOTHED_BITS,
    SAEFeaturesConfig,
)
from geomlens.analyses.sae_features.counting import NEVER, ConditionStats, SiteState
from geomlens.analyses.sae_features.splicing import (
    cosine_distance_per_sequence,
    smoothed_bits_per_sequence,
)

__all__ = [
    "CALIBRATION",
    "COSINE_FIDELITY",
    "DEFAULT_CALIBRATION_ROWS",
    "DEFAULT_HELDOUT_ROWS",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_OOD_ROWS",
    "HELDOUT",
    "NEVER",
    "POOL_SATURATION",
    "SMOOTHED_BITS",
    "ConditionStats",
    "SAEFeatures",
    "SAEFeaturesConfig",
    "SiteState",
    "cosine_distance_per_sequence",
    "smoothed_bits_per_sequence",
]

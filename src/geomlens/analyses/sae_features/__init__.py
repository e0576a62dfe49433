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

This folder holds everything about the analysis (the class, its options, example, metric specs,
reading and figure); the registry finds it by ``ANALYSIS``.
"""

# Each submodule's ``__all__`` names what it contributes here: one list per name, no copy to drift.
from geomlens.analyses.sae_features import analysis, config, counting, splicing
from geomlens.analyses.sae_features.analysis import *  # noqa: F403
from geomlens.analyses.sae_features.config import *  # noqa: F403
from geomlens.analyses.sae_features.counting import *  # noqa: F403
from geomlens.analyses.sae_features.splicing import *  # noqa: F403

__all__: list[str] = []
__all__ += analysis.__all__
__all__ += config.__all__
__all__ += counting.__all__
__all__ += splicing.__all__

ANALYSIS = SAEFeatures  # noqa: F405

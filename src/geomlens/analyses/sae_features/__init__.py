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
before decoding (same L0, broken semantics). docs/sae.md gives every formula."""

from geomlens.analyses.declaration import Declaration
from geomlens.lazy import lazy_attributes

from .config import SAEFeaturesConfig
from .metrics import METRIC_SPECS

DECLARATION = Declaration(
    name="sae-features",
    aliases=("sae_features", "ssd"),
    summary=(
        "SAE active counts k, pool P and SSD, pool mismatch η̂, ε̂_loss, the SSD bound, OOD AUROC."
    ),
    config=SAEFeaturesConfig,
    default_data=(
        "Calibration and held-out English (disjoint parts of the bundled corpus) and three OOD "
        "sets as long as the held-out set, row for row: uniform random token ids and 15 % "
        "replaced tokens (made from the held-out rows, each paired with its source row), and "
        "Python standard-library source cut to the held-out lengths."
    ),
    metrics=METRIC_SPECS,
    # A small SAE: 5,000 tokens (reading through the model stops there).
    quick={"training": {"tokens": 5_000}},
    example=".example:EXAMPLE",
    reading=".reading:reading",
    analysis=".analysis:SAEFeatures",
)

# Each submodule's ``__all__`` names what it lends here, imported on first use.
__getattr__ = lazy_attributes(__name__, fallback=(".analysis", ".config", ".counting", ".splicing"))

"""SAEs from sae-lens in geomlens: attach them to a model, train small ones offline, cache them.

SAEs are sae-lens objects used as they are (``encode`` / ``decode``); geomlens loads them,
checks them against the model before any forward pass, and trains new ones with sae-lens's own
trainer fed by the engine's streaming pass. See docs/sae.md.
"""

from geomlens.sae.cache import CACHE_ENV, sae_cache_dir
from geomlens.sae.loading import check_sae_fits, load_sae, resolve_saes, sae_site, site_width
from geomlens.sae.training import (
    TrainedSAE,
    TrainingConfig,
    activation_batches,
    cached_sae,
    corpus_texts,
    train_sae,
)

__all__ = [
    "CACHE_ENV",
    "TrainedSAE",
    "TrainingConfig",
    "activation_batches",
    "cached_sae",
    "check_sae_fits",
    "corpus_texts",
    "load_sae",
    "resolve_saes",
    "sae_cache_dir",
    "sae_site",
    "site_width",
    "train_sae",
]

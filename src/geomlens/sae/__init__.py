"""SAEs from sae-lens in geomlens: attach them to a model, train small ones offline, cache them.

SAEs are sae-lens objects used as they are (``encode`` / ``decode``); geomlens loads them,
checks them against the model before any forward pass, and trains new ones with sae-lens's own
trainer fed by the engine's streaming pass. See docs/sae.md.

Names are imported on first use, so ``geomlens --help`` does not pay for importing sae-lens.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "CACHE_ENV": "cache",
    "sae_cache_dir": "cache",
    "check_sae_fits": "loading",
    "load_sae": "loading",
    "resolve_saes": "loading",
    "sae_site": "loading",
    "site_width": "loading",
    "TrainedSAE": "training",
    "TrainingConfig": "config",
    "activation_batches": "training",
    "cached_sae": "training",
    "corpus_texts": "training",
    "train_sae": "training",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'geomlens.sae' has no attribute {name!r}")
    return getattr(importlib.import_module(f"geomlens.sae.{_WHERE[name]}"), name)

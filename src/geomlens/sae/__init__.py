"""SAEs from sae-lens in geomlens: attach them to a model, train small ones offline, cache them.

SAEs are sae-lens objects used as they are (``encode`` / ``decode``); geomlens loads them,
checks them against the model before any forward pass, and trains new ones with sae-lens's own
trainer fed by the engine's streaming pass. See docs/sae.md.

Each name is imported from its module (so ``geomlens --help`` does not pay for sae-lens):
:mod:`~geomlens.sae.loading` (``load_sae``, ``resolve_saes``, ``check_sae_fits``, ``sae_site``,
``site_width``), :mod:`~geomlens.sae.training` (``train_sae``, ``cached_sae``, ``TrainedSAE``,
``activation_batches``, ``corpus_texts``), :mod:`~geomlens.sae.config` (``TrainingConfig``,
``ENCODER_TRAINING``, ``CAUSAL_LM_TRAINING``) and :mod:`~geomlens.sae.cache` (``sae_cache_dir``,
``CACHE_ENV``).
"""

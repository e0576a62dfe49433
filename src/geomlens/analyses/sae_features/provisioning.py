"""Where sae-features' SAE comes from when none is given: a small sae-lens SAE trained offline on
the bundled corpus at the middle block, cached, and reused by every later run.

Training reads activations through the batch loop (:mod:`geomlens.inputs.batches`), not through a
run of the engine: an analysis's ``setup`` never starts a nested run.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from geomlens.models.adapter import Adapter


def default_site(adapter: Adapter) -> str:
    """The site to train on: the middle block's residual stream."""
    # The middle of the network: where SAEs are usually trained (gpt2-small-res-jb reads
    # blocks.6 of 12), past the token-level early layers, before the output-specific ones.
    return f"blocks.{adapter.n_layers // 2}.hook_resid_post"


def default_sae(adapter: Adapter, site: str, training: dict[str, Any]) -> tuple[Any, str]:
    """The cached (or freshly trained) SAE at ``site``, and a note saying which it was and with
    which recipe; ``training`` overrides the model's default :class:`geomlens.sae.config.TrainingConfig`
    (:func:`geomlens.sae.config.default_training`: one for causal LMs, one for encoders)."""
    from geomlens.sae.config import default_corpus_name, default_training
    from geomlens.sae.training import cached_sae, corpus_texts

    base, recipe = default_training(adapter.is_causal_lm)
    config = dataclasses.replace(base, **training)
    trained = cached_sae(
        adapter, site, corpus=default_corpus_name(), data=corpus_texts(), config=config
    )
    changed = f", overridden: {sorted(training)}" if training else ""
    note = (
        f"{'reused' if trained.reused else 'trained'} {trained.path} (sae-lens standard SAE, "
        f"m={trained.sae.cfg.d_sae}, {config.tokens} tokens of the corpus's training part, "
        f"{config.passes} passes; training recipe: the {recipe}{changed})"
    )
    return trained.sae, note

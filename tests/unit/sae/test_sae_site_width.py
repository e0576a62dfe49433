"""The SAE width check reads a site's width from the model's config the way the conformance
check does (``models/widths.py``): OPT's ``ffn_dim`` also through a TransformerBridge (whose own
cfg says 4 × d_model), and MPT's MLP at 4 × d_model whatever ``expansion_ratio`` or a stray
``intermediate_size`` says. The truth each case is held to is the width the model captures."""

import numpy as np
import pytest
from helpers.tiny_models import tiny_decoder
from helpers.tiny_saes import random_sae

import geomlens as gl
from geomlens.data.dataset import Dataset
from geomlens.sae.loading import check_sae_fits, site_width

FAMILIES = {
    "opt": ("opt", {"ffn_dim": 48, "word_embed_proj_dim": 32}),
    "mpt": ("mpt", {"expansion_ratio": 2}),
    "mpt with a stray intermediate_size": ("mpt", {"expansion_ratio": 2, "intermediate_size": 40}),
}
SITES = ("blocks.0.mlp.hook_pre", "blocks.0.mlp.hook_post", "blocks.0.hook_resid_post")


@pytest.fixture(scope="module", params=list(FAMILIES))
def model(request):
    model_type, config = FAMILIES[request.param]
    return tiny_decoder(model_type, **config)


@pytest.mark.parametrize("backend", ["nnsight", "transformer-lens"])
def test_site_width_is_the_width_the_model_captures(model, backend):
    hf_model, tokenizer = model
    adapter = gl.attach(hf_model, tokenizer=tokenizer, backend=backend)
    inputs = adapter.encode(Dataset(texts=["the cat sat on the mat"]), np.arange(1))
    captured = adapter.capture(inputs, SITES)
    for site in SITES:
        width = captured[site].shape[-1]
        assert site_width(adapter, site) == width, site
        assert check_sae_fits(random_sae(width, site, d_sae=8), adapter, site) == site

"""Acceptance: the same weights through TransformerBridge and through nnsight give the same
activations at every canonical site both backends expose."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.tiny_models import tiny_bert, tiny_decoder, tiny_gpt2, tiny_llama

from geomlens.inputs.encoding import encode_token_ids
from geomlens.models.adapter import LOGITS_SITE, canonical_sites
from geomlens.models.nnsight import NNsightAdapter
from geomlens.models.transformer_lens import TransformerLensAdapter

ATOL = 1e-5
ROWS = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14, 15, 16, 17]]

#: Family -> builder of (hf_model, tokenizer). GPT-2, Llama and BERT are the acceptance trio;
#: the others check the rest of the nnsight architecture tables against the bridge.
FAMILIES = {
    "gpt2": tiny_gpt2,
    "llama": tiny_llama,
    "bert": tiny_bert,
    "mistral": lambda: tiny_decoder("mistral"),
    "qwen2": lambda: tiny_decoder("qwen2"),
    "qwen3": lambda: tiny_decoder("qwen3"),
    "neox-parallel": lambda: tiny_decoder("gpt_neox"),
    "neox-sequential": lambda: tiny_decoder("gpt_neox", use_parallel_residual=False),
    "gemma": lambda: tiny_decoder("gemma"),
    "gemma2": lambda: tiny_decoder("gemma2"),
    "gemma3": lambda: tiny_decoder("gemma3_text"),
}


@pytest.fixture(scope="module", params=list(FAMILIES))
def backends(request):
    hf_model, tokenizer = FAMILIES[request.param]()
    # from_hf bridges a copy, so both backends hold the very same weights.
    bridge = TransformerLensAdapter.from_hf(hf_model, tokenizer)
    return request.param, bridge, NNsightAdapter(hf_model, tokenizer=tokenizer)


def test_both_backends_expose_the_same_sites(backends):
    name, bridge, nnsight = backends
    assert nnsight.sites() == bridge.sites()
    expected = canonical_sites(nnsight.n_layers)
    if name == "neox-parallel":  # no residual stream between attention and MLP
        expected = [s for s in expected if not s.endswith("hook_resid_mid")]
    if name != "bert":  # every other family here is a causal LM with its head
        expected.append(LOGITS_SITE)
    assert nnsight.sites() == expected


@pytest.mark.parametrize("side", ["left", "right"])
def test_identical_activations_at_every_site(backends, side):
    _, bridge, nnsight = backends
    sites = [s for s in nnsight.sites() if s in bridge.sites()]
    inputs = encode_token_ids(ROWS, np.arange(len(ROWS)), padding_side=side)
    through_bridge = bridge.capture(inputs, sites)
    through_nnsight = nnsight.capture(inputs, sites)
    real = inputs.attention_mask
    for site in sites:
        torch.testing.assert_close(
            through_nnsight[site][real], through_bridge[site][real], atol=ATOL, rtol=0, msg=site
        )


def test_the_same_edit_has_the_same_effect(backends):
    _, bridge, nnsight = backends
    edited, downstream = "blocks.0.mlp.hook_post", "blocks.1.hook_resid_post"
    inputs = encode_token_ids(ROWS, np.arange(len(ROWS)), padding_side="left")
    results = []
    for adapter in (bridge, nnsight):
        with adapter.intervene(edited, lambda act: act * 0.5):
            results.append(adapter.capture(inputs, [downstream])[downstream])
        assert adapter.hook_count() == 0
    real = inputs.attention_mask
    torch.testing.assert_close(results[1][real], results[0][real], atol=ATOL, rtol=0)


def test_fallback_sites_agree_with_the_bridge():
    """An architecture without a nnsight table (Granite) still agrees on the residual stream."""
    hf_model, tokenizer = tiny_decoder("granite")
    bridge = TransformerLensAdapter.from_hf(hf_model, tokenizer)
    nnsight = NNsightAdapter(hf_model, tokenizer=tokenizer)
    assert set(nnsight.sites()) < set(bridge.sites())
    inputs = encode_token_ids(ROWS, np.arange(len(ROWS)), padding_side="left")
    through_bridge = bridge.capture(inputs, nnsight.sites())
    through_nnsight = nnsight.capture(inputs, nnsight.sites())
    real = inputs.attention_mask
    for site in nnsight.sites():
        torch.testing.assert_close(
            through_nnsight[site][real], through_bridge[site][real], atol=ATOL, rtol=0, msg=site
        )

"""`geomlens check` compares relative to the activations' scale: a right model whose residual
stream is large passes (an absolute threshold fails it on float32 round-off), a planted wrong
site on that model still fails, and the real SmolLM2 passes on both backends."""

from __future__ import annotations

import pytest
import torch
from helpers.tiny_models import tiny_llama
from transformers import LlamaForCausalLM

import geomlens as gl
from geomlens.checks.conformance import DEFAULT_PROMPTS, all_passed, check_adapter
from geomlens.models.nnsight import NNsightAdapter

#: The absolute threshold `geomlens check` used before (hidden states and sub-layer sums).
OLD_ABSOLUTE_THRESHOLD = 1e-4
SCALE = 1e4


def failing(checks) -> dict[str, str]:
    return {c.name: c.detail for c in checks if not c.passed}


def large_norm_llama() -> tuple[LlamaForCausalLM, object]:
    """A Llama wide enough (256) for batched and one-by-one matmuls to round differently, with
    its embeddings and every attention / MLP output projection scaled by 1e4: a residual stream
    in the thousands, as real LMs' massive activations are (SmolLM2's reach the hundreds)."""
    model, tokenizer = tiny_llama(hidden_size=256, intermediate_size=768)
    with torch.no_grad():
        model.get_input_embeddings().weight.mul_(SCALE)
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.mul_(SCALE)
            layer.mlp.down_proj.weight.mul_(SCALE)
    return model, tokenizer


def batched_vs_alone_gap(model, tokenizer) -> tuple[float, float]:
    """Computed here with transformers alone: the largest absolute difference between a hidden
    state of the right-padded batch and of the example run alone, and the largest |hidden|."""
    tokenizer.padding_side = "right"
    batch = tokenizer(list(DEFAULT_PROMPTS), return_tensors="pt", padding=True)
    gap, scale = 0.0, 0.0
    with torch.no_grad():
        together = model(**batch, output_hidden_states=True).hidden_states
        for row, prompt in enumerate(DEFAULT_PROMPTS):
            alone = model(**tokenizer(prompt, return_tensors="pt"), output_hidden_states=True)
            real = batch["attention_mask"][row].bool()
            for index in range(1, len(alone.hidden_states) - 1):  # the checked residual sites
                ours, theirs = together[index][row][real], alone.hidden_states[index][0]
                gap = max(gap, (ours - theirs).abs().max().item())
                scale = max(scale, theirs.abs().max().item())
    return gap, scale


@pytest.mark.parametrize("backend", ["nnsight", "transformer-lens"])
def test_a_large_norm_residual_stream_passes_where_an_absolute_threshold_fails(backend):
    model, tokenizer = large_norm_llama()
    gap, scale = batched_vs_alone_gap(model, tokenizer)
    assert gap > OLD_ABSOLUTE_THRESHOLD, "the round-off this test is about must be there"
    assert gap / scale < 1e-5  # and it is round-off: tiny against the values
    adapter = gl.attach(model, tokenizer=tokenizer, backend=backend)
    checks = check_adapter(adapter)
    assert all_passed(checks), failing(checks)
    hidden = {c.name: c for c in checks}["own hidden states"]
    assert "model's own" in hidden.detail and "max|hidden|" in hidden.detail
    assert "in float64" in hidden.detail


class ReadsResidMidAsResidPre(NNsightAdapter):
    """A wrong table entry: block 1's resid_pre reads the block's resid_mid (off by attn_out)."""

    def capture(self, inputs, sites):
        wanted = list(dict.fromkeys([*sites, "blocks.1.hook_resid_mid"]))
        acts = super().capture(inputs, wanted)
        if "blocks.1.hook_resid_pre" in acts:
            acts["blocks.1.hook_resid_pre"] = acts["blocks.1.hook_resid_mid"]
        return {site: acts[site] for site in sites}


def test_a_wrong_site_on_the_large_norm_model_still_fails():
    model, tokenizer = large_norm_llama()
    bad = failing(check_adapter(ReadsResidMidAsResidPre(model, tokenizer=tokenizer)))
    assert "differs from the model's own hidden_states[1]" in bad["blocks.1.hook_resid_pre"]
    assert "of its scale (vs float64" in bad["blocks.1.hook_resid_pre"]
    assert "ratio" in bad["blocks.1.hook_resid_pre"]
    assert "blocks.1.hook_resid_pre" in bad["own hidden states"]
    assert "not the sum of its parts" in bad["blocks.1.hook_resid_mid"]
    assert set(bad) == {
        "blocks.1.hook_resid_pre",
        "blocks.1.hook_resid_mid",
        "own hidden states",
        "sub-layer sums",
        "sites",
    }


def test_the_deprecated_atol_still_works_as_a_relative_tolerance():
    model, tokenizer = large_norm_llama()
    adapter = NNsightAdapter(model, tokenizer=tokenizer)
    with pytest.warns(DeprecationWarning, match="relative"):
        checks = check_adapter(adapter, atol=1e-12)  # below float32 round-off: must fail
    assert "own hidden states" in failing(checks)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["nnsight", "transformer-lens"])
def test_geomlens_check_passes_on_smollm2(backend, smollm2_folder):
    adapter = gl.load("smollm2-135m-instruct", backend=backend)
    checks = check_adapter(adapter)
    assert all_passed(checks), failing(checks)
    by_name = {c.name: c for c in checks}
    assert "not compared" not in by_name["own hidden states"].detail
    assert len([c for c in checks if c.site]) == len(adapter.sites()) == 212

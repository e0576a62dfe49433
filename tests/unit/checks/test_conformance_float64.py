"""`geomlens check` judges a site against the model's own forward pass in float64: a
deep model whose float32 round-off reaches ~1e-5 of the scale (as SmolLM2-135M's blocks 10-11
do) fails the old fixed 1e-5 and passes on both backends, a planted wrong layer or a position off
by one still fails with the ratio printed, and where no float64 copy fits the check says so and
keeps the fixed tolerance. The user's model keeps its dtype and weights."""

from __future__ import annotations

import pytest
import torch
from helpers.tiny_models import tiny_decoder
from transformers import PreTrainedModel

import geomlens as gl
from geomlens.checks import reference
from geomlens.checks.conformance import all_passed, check_adapter
from geomlens.models.nnsight import NNsightAdapter


def failing(checks) -> dict[str, str]:
    return {c.name: c.detail for c in checks if not c.passed}


def deep_llama() -> tuple[PreTrainedModel, object]:
    """30 blocks (SmolLM2-135M's depth), width 32, weights drawn 20× wider than Llama's default
    (initializer_range 0.4): the residual stream grows to ~1e2 and float32 round-off to ~1e-5 of
    its scale at the deep blocks, the regime where the fixed 1e-5 failed SmolLM2."""
    return tiny_decoder("llama", num_hidden_layers=30, intermediate_size=96, initializer_range=0.4)


@pytest.fixture(scope="module")
def deep():
    return deep_llama()


def test_the_deep_model_fails_the_fixed_tolerance(deep):
    model, tokenizer = deep
    checks = check_adapter(NNsightAdapter(model, tokenizer=tokenizer), rtol=1e-5)
    assert not all_passed(checks), "the float32 round-off this test is about must be there"


@pytest.mark.parametrize("backend", ["nnsight", "transformer-lens"])
def test_both_backends_pass_against_the_float64_reference(deep, backend):
    model, tokenizer = deep
    before = {k: v.clone() for k, v in model.state_dict().items()}
    adapter = gl.attach(model, tokenizer=tokenizer, backend=backend)
    checks = check_adapter(adapter)
    assert all_passed(checks), failing(checks)
    by_name = {c.name: c.detail for c in checks}
    assert "model's own" in by_name["own hidden states"]
    assert "ratio" in by_name["own hidden states"]
    assert "in float64" in by_name["right-padding"] and "ratio" in by_name["left-padding"]
    # The user's model was not cast nor changed.
    assert next(model.parameters()).dtype == torch.float32
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


class ReadsTheLayerBefore(NNsightAdapter):
    """A wrong table entry: block 20's resid_pre reads block 19's."""

    def capture(self, inputs, sites):
        wanted = list(dict.fromkeys([*sites, "blocks.19.hook_resid_pre"]))
        acts = super().capture(inputs, wanted)
        if "blocks.20.hook_resid_pre" in acts:
            acts["blocks.20.hook_resid_pre"] = acts["blocks.19.hook_resid_pre"]
        return {site: acts[site] for site in sites}


class PositionsOffByOne(NNsightAdapter):
    """block 20's resid_post read one position late (the last real token repeated)."""

    def capture(self, inputs, sites):
        acts = super().capture(inputs, sites)
        site = "blocks.20.hook_resid_post"
        if site in acts:
            shifted = acts[site].clone()
            shifted[:, 1:] = acts[site][:, :-1]
            acts[site] = shifted
        return acts


def test_a_wrong_layer_still_fails_with_the_ratio(deep):
    model, tokenizer = deep
    bad = failing(check_adapter(ReadsTheLayerBefore(model, tokenizer=tokenizer)))
    assert "differs from the model's own hidden_states[20]" in bad["blocks.20.hook_resid_pre"]
    assert "ratio" in bad["blocks.20.hook_resid_pre"]
    assert "blocks.20.hook_resid_pre" in bad["own hidden states"]
    assert "ratio" in bad["own hidden states"]


def test_positions_off_by_one_still_fail_with_the_ratio(deep):
    model, tokenizer = deep
    bad = failing(check_adapter(PositionsOffByOne(model, tokenizer=tokenizer)))
    detail = bad["blocks.20.hook_resid_post"]
    assert "differs from the model's own hidden_states[21]" in detail and "ratio" in detail


def test_without_room_for_float64_the_fixed_tolerance_is_used_and_said(monkeypatch):
    from helpers.tiny_models import tiny_gpt2

    model, tokenizer = tiny_gpt2()
    monkeypatch.setattr(reference, "_available_bytes", lambda device: 0)
    checks = check_adapter(NNsightAdapter(model, tokenizer=tokenizer))
    assert all_passed(checks), failing(checks)
    detail = {c.name: c.detail for c in checks}["own hidden states"]
    assert "float64 reference not run (a float64 copy needs" in detail
    assert "tolerance 1e-05" in detail


def test_a_model_that_cannot_be_cast_falls_back(monkeypatch):
    from helpers.tiny_models import tiny_gpt2

    model, tokenizer = tiny_gpt2()

    def refuse(module):
        raise RuntimeError("no float64 kernels here")

    adapter = NNsightAdapter(model, tokenizer=tokenizer)
    monkeypatch.setattr(reference.copy, "deepcopy", refuse)
    checks = check_adapter(adapter)
    detail = {c.name: c.detail for c in checks}["right-padding"]
    assert "cannot be cast to float64 (RuntimeError: no float64 kernels here)" in detail
    assert "tolerance 1e-05" in detail

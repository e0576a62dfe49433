"""adapter.linearize: identity equals the model with its activation replaced in code, tangent
equals an independently computed first-order expansion, on every backend (nnsight, the
TransformerBridge, HookedTransformer), gated MLPs included; nothing of ours is left behind."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from helpers.tiny_models import (
    tiny_bert,
    tiny_decoder,
    tiny_gpt2,
    tiny_hooked_transformer,
    tiny_llama,
    tiny_tokenizer,
)

import geomlens as gl
from geomlens.interventions.linearize import LinearizationError, active_linearizations
from geomlens.models.adapter import count_torch_hooks

TEXTS = ["the king sat on the mat", "a quick brown fox jumps", "the old city by the river"]
#: Path of layer 1's activation module in each Hugging Face model, and its derivative in closed form.
HF_MODELS = {
    "gpt2": (tiny_gpt2, "transformer.h.{}.mlp.act"),
    "bert": (tiny_bert, "encoder.layer.{}.intermediate.intermediate_act_fn"),
    "llama": (tiny_llama, "model.layers.{}.mlp.act_fn"),
    "gemma": (lambda: tiny_decoder("gemma"), "model.layers.{}.mlp.act_fn"),  # GeGLU
}
BACKENDS = ("nnsight", "transformer-lens")


def gelu_tanh_derivative(x: torch.Tensor) -> torch.Tensor:
    c = math.sqrt(2 / math.pi)
    inner = c * (x + 0.044715 * x**3)
    tanh = torch.tanh(inner)
    return 0.5 * (1 + tanh) + 0.5 * x * (1 - tanh**2) * c * (1 + 3 * 0.044715 * x**2)


def gelu_erf_derivative(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * (1 + torch.erf(x / math.sqrt(2))) + x * torch.exp(-(x**2) / 2) / math.sqrt(
        2 * math.pi
    )


def silu_derivative(x: torch.Tensor) -> torch.Tensor:
    sigmoid = torch.sigmoid(x)
    return sigmoid * (1 + x * (1 - sigmoid))


DERIVATIVES = {
    "gpt2": gelu_tanh_derivative,
    "bert": gelu_erf_derivative,
    "llama": silu_derivative,
    "gemma": gelu_tanh_derivative,
}


class Tangent(torch.nn.Module):
    """φ(x₀) + φ'(x₀)(x − x₀) with φ' in closed form: the reference written out by hand."""

    def __init__(self, phi: torch.nn.Module, derivative, x0: torch.Tensor) -> None:
        super().__init__()
        with torch.no_grad():
            self.value, self.slope, self.x0 = phi(x0), derivative(x0), x0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.value + self.slope * (x - self.x0)


def with_activation(model: torch.nn.Module, path: str, replacement: torch.nn.Module):
    twin = copy.deepcopy(model)
    parent, name = path.rsplit(".", 1)
    setattr(twin.get_submodule(parent), name, replacement)
    return twin


def final_output(adapter, texts=TEXTS) -> torch.Tensor:
    dataset = gl.Dataset(texts=texts)
    inputs = adapter.encode(dataset, np.arange(len(texts)))
    site = f"blocks.{adapter.n_layers - 1}.hook_resid_post"
    return adapter.capture(inputs, [site])[site]


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def assert_untouched(model: torch.nn.Module, before: dict[str, torch.Tensor], hooks: int) -> None:
    after = model.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], before[k]) for k in before)
    assert count_torch_hooks(model) == hooks


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("family", list(HF_MODELS))
def test_identity_equals_activation_replaced_in_code(family, backend):
    build, path = HF_MODELS[family]
    model, tokenizer = build()
    reference = with_activation(model, path.format(1), torch.nn.Identity())
    adapter = gl.attach(model, tokenizer=tokenizer, backend=backend)
    expected = final_output(gl.attach(reference, tokenizer=tokenizer, backend=backend))
    base = final_output(adapter)
    with adapter.linearize([1], mode="identity"):
        linearised = final_output(adapter)
    torch.testing.assert_close(linearised, expected, atol=1e-6, rtol=0)
    assert (base - expected).abs().max() > 1e-3  # the edit changes the output at all
    torch.testing.assert_close(final_output(adapter), base, atol=0, rtol=0)  # and is undone


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("family", list(HF_MODELS))
def test_tangent_equals_first_order_expansion(family, backend):
    build, path = HF_MODELS[family]
    model, tokenizer = build()
    phi = model.get_submodule(path.format(0))
    width = model.config.intermediate_size if family != "gpt2" else 4 * model.config.n_embd
    x0 = torch.linspace(-2.0, 2.0, width)
    derivative = DERIVATIVES[family]
    reference = with_activation(model, path.format(0), Tangent(phi, derivative, x0))
    adapter = gl.attach(model, tokenizer=tokenizer, backend=backend)
    with adapter.linearize([0], mode="tangent", calibration={0: x0}):
        linearised = final_output(adapter)
    expected = final_output(gl.attach(reference, tokenizer=tokenizer, backend=backend))
    torch.testing.assert_close(linearised, expected, atol=1e-5, rtol=1e-5)


def test_tangent_calibration_is_the_mean_pre_activation_over_real_tokens():
    model, tokenizer = tiny_gpt2()
    recorded = []
    act = model.transformer.h[1].mlp.act
    handle = act.register_forward_hook(lambda m, args, out: recorded.append(args[0].detach()))
    try:
        with torch.no_grad():
            for text in TEXTS:  # one at a time: no padding to exclude
                model(**tokenizer(text, return_tensors="pt"))
    finally:
        handle.remove()
    expected = torch.cat([r[0] for r in recorded]).double().mean(dim=0).float()
    adapter = gl.attach(model, tokenizer=tokenizer)
    with adapter.linearize([1], mode="tangent", calibration=TEXTS) as (target,):
        torch.testing.assert_close(target.x0, expected, atol=1e-6, rtol=1e-6)


def hooked(gated: bool) -> torch.nn.Module:
    act_fn = "silu" if gated else "gelu_new"
    return tiny_hooked_transformer(act_fn=act_fn, gated_mlp=gated)


@pytest.mark.hooked_transformer
@pytest.mark.parametrize("gated", [False, True])
def test_hooked_transformer_identity_and_tangent(gated):
    model = hooked(gated)
    tokenizer = tiny_tokenizer()
    identity_reference = copy.deepcopy(model)
    identity_reference.blocks[1].mlp.act_fn = lambda x: x
    x0 = torch.linspace(-1.5, 1.5, 64)
    derivative = silu_derivative if gated else gelu_tanh_derivative
    phi = model.blocks[0].mlp.act_fn
    tangent_reference = copy.deepcopy(model)
    tangent_reference.blocks[0].mlp.act_fn = lambda x: phi(x0) + derivative(x0) * (x - x0)
    adapter = gl.attach(model, tokenizer=tokenizer)
    before, hooks = snapshot(model), count_torch_hooks(model)
    with adapter.linearize([1]):
        identity = final_output(adapter)
    with adapter.linearize([0], mode="tangent", calibration={0: x0}):
        tangent = final_output(adapter)
    expected_identity = final_output(gl.attach(identity_reference, tokenizer=tokenizer))
    expected_tangent = final_output(gl.attach(tangent_reference, tokenizer=tokenizer))
    torch.testing.assert_close(identity, expected_identity, atol=1e-6, rtol=0)
    torch.testing.assert_close(tangent, expected_tangent, atol=1e-5, rtol=1e-5)
    assert_untouched(model, before, hooks)
    assert adapter.hook_count() == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_nothing_left_after_a_run_or_an_exception(backend):
    model, tokenizer = tiny_llama()
    before, hooks = snapshot(model), count_torch_hooks(model)
    adapter = gl.attach(model, tokenizer=tokenizer, backend=backend)
    traced = adapter.model
    final_output(adapter)  # the bridge wires its own hooks per block on the first pass
    traced_before, traced_hooks = snapshot(traced), count_torch_hooks(traced)
    with adapter.linearize([0, 1], mode="tangent", calibration=TEXTS):
        gl.run("activation-stats", adapter, TEXTS)
        assert active_linearizations(adapter)[0]["layers"] == [0, 1]
    with pytest.raises(RuntimeError, match="inside"), adapter.linearize([1]):
        final_output(adapter)
        raise RuntimeError("inside the block")
    assert active_linearizations(adapter) == []
    assert_untouched(model, before, hooks)
    assert_untouched(traced, traced_before, traced_hooks)
    assert adapter.hook_count() == 0


def test_results_record_the_linearisation():
    model, tokenizer = tiny_gpt2()
    adapter = gl.attach(model, tokenizer=tokenizer)
    with adapter.linearize([1]):
        result = gl.run("activation-stats", adapter, TEXTS)
    (entry,) = result.provenance["linearizations"]
    assert entry["layers"] == [1] and entry["mode"] == "identity" and entry["where"] == ["mlp.act"]
    assert gl.run("activation-stats", adapter, TEXTS).provenance["linearizations"] == []


def test_a_layer_without_an_elementwise_activation_is_refused():
    model, tokenizer = tiny_gpt2()
    model.transformer.h[1].mlp.act = torch.nn.Identity()
    adapter = gl.attach(model, tokenizer=tokenizer)
    refused = pytest.raises(LinearizationError, match="no elementwise activation.*Identity")
    with refused, adapter.linearize([1]):
        pass
    with adapter.linearize([0]):  # the other layer still works
        final_output(adapter)


def test_bad_requests_are_refused_before_any_pass():
    model, tokenizer = tiny_gpt2()
    adapter = gl.attach(model, tokenizer=tokenizer)
    with pytest.raises(ValueError, match="do not exist"), adapter.linearize([5]):
        pass
    unknown_mode = pytest.raises(ValueError, match="Unknown linearisation mode")
    with unknown_mode, adapter.linearize([0], mode="quadratic"):
        pass
    with pytest.raises(ValueError, match="calibration"), adapter.linearize([0], mode="tangent"):
        pass
    recorded = gl.attach({"x": np.zeros((2, 3), dtype=np.float32)})
    with pytest.raises(LinearizationError, match="recorded"), recorded.linearize([0]):
        pass

"""capture_from_layer: a second pass started at block L from the first pass's cached residual
equals the full rerun (linearised MLP, identity and tangent; an SAE-like splice at block L's
input and output), on nnsight, the TransformerBridge and HookedTransformer, causal (absolute
and rotary positions) and bidirectional models, right- and left-padded batches; and it does
not compute the blocks before L."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.tiny_models import (
    tiny_bert,
    tiny_decoder,
    tiny_gpt2,
    tiny_hooked_transformer,
    tiny_llama,
)

import geomlens as gl
from geomlens.interventions.resume import capture_from_layer, resume_site
from geomlens.models.adapter import count_torch_hooks

TEXTS = ["the king sat on the mat by the door", "a fox", "the old city by the river bank", "hi"]
FAMILIES = {
    "gpt2": tiny_gpt2,  # causal, absolute positions
    "llama": tiny_llama,  # causal, rotary, gated MLP
    "gemma": lambda: tiny_decoder("gemma3_text"),  # causal, rotary, sliding-window masks
    "bert": tiny_bert,  # bidirectional, post-LN
}
BACKENDS = ("nnsight", "transformer-lens")


def _adapter(family: str, backend: str):
    if family == "hooked":
        return gl.attach(tiny_hooked_transformer(), tokenizer=_tokenizer(), backend=backend)
    model, tokenizer = FAMILIES[family]()
    return gl.attach(model, tokenizer=tokenizer, backend=backend)


def _tokenizer():
    from helpers.tiny_models import tiny_tokenizer

    return tiny_tokenizer()


def _splice(activation: torch.Tensor) -> torch.Tensor:
    """An SAE-like reconstruction: ReLU encoder, linear decoder, fixed random weights."""
    generator = torch.Generator().manual_seed(1)
    d = activation.shape[-1]
    encoder = torch.randn(d, 3 * d, generator=generator).to(activation) / d**0.5
    decoder = torch.randn(3 * d, d, generator=generator).to(activation) / d**0.5
    return torch.relu(activation @ encoder) @ decoder


def _edits(adapter, kind: str):
    if kind == "identity":
        return adapter.linearize([1], mode="identity")
    if kind == "tangent":
        return adapter.linearize([1], mode="tangent", calibration=TEXTS)
    return adapter.intervene(f"blocks.1.{kind}", _splice)


def _scaled_gap(got: torch.Tensor, expected: torch.Tensor) -> float:
    return float((got - expected).abs().max() / expected.abs().max())


CASES = [(family, backend) for family in FAMILIES for backend in BACKENDS] + [
    ("hooked", "transformer-lens")
]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["identity", "tangent", "hook_resid_pre", "hook_resid_post"])
@pytest.mark.parametrize(("family", "backend"), CASES)
def test_second_pass_from_the_edited_layer_equals_the_full_rerun(family, backend, kind):
    # Causal models left-padded (positions must still count real tokens), BERT right-padded.
    padding = "right" if family == "bert" else "left"
    adapter = _adapter(family, backend)
    inputs = adapter.encode(gl.Dataset(texts=TEXTS), np.arange(len(TEXTS)), padding_side=padding)
    output = "logits" if "logits" in adapter.sites() else "blocks.1.hook_resid_post"
    first = adapter.capture(inputs, [resume_site(1), output])
    with _edits(adapter, kind):
        full = adapter.capture(inputs, [output])[output]
        resumed = capture_from_layer(adapter, inputs, [output], 1, first[resume_site(1)])[output]
    mask = inputs.attention_mask.bool()
    assert _scaled_gap(full[mask], first[output][mask]) > 1e-4  # the edit changes the output
    assert _scaled_gap(resumed[mask], full[mask]) < 1e-6
    # Padded positions too: the whole tensor is the full rerun's.
    assert _scaled_gap(resumed, full) < 1e-6


@pytest.mark.parametrize("backend", BACKENDS)
def test_blocks_before_the_edited_layer_are_not_computed(backend):
    model, tokenizer = tiny_llama()
    adapter = gl.attach(model, tokenizer=tokenizer, backend=backend)
    inputs = adapter.encode(gl.Dataset(texts=TEXTS), np.arange(len(TEXTS)))
    first = adapter.capture(inputs, [resume_site(1)])
    blocks = adapter.transformer_blocks()  # the modules that run (the bridge copies the model)
    calls = {0: 0, 1: 0}
    handles = [
        blocks[layer].self_attn.register_forward_hook(
            lambda *args, layer=layer: calls.__setitem__(layer, calls[layer] + 1)
        )
        for layer in (0, 1)
    ]
    try:
        hooks = count_torch_hooks(adapter.model)
        forwards = [block.__dict__.get("forward") for block in blocks]
        for _ in range(2):  # the first resumed pass on an adapter runs block 0 once to learn its
            calls.update({0: 0, 1: 0})  # output form; later ones skip it
            capture_from_layer(adapter, inputs, ["logits"], 1, first[resume_site(1)])
        assert calls == {0: 0, 1: 1}
        # Nothing of ours is left on the model: its blocks' forwards are what they were.
        assert [block.__dict__.get("forward") for block in blocks] == forwards
        assert count_torch_hooks(adapter.model) == hooks
    finally:
        for handle in handles:
            handle.remove()


def test_an_edit_before_the_layer_falls_back_to_the_full_pass():
    model, tokenizer = tiny_gpt2()
    adapter = gl.attach(model, tokenizer=tokenizer, backend="nnsight")
    inputs = adapter.encode(gl.Dataset(texts=TEXTS), np.arange(len(TEXTS)))
    first = adapter.capture(inputs, [resume_site(1)])
    with adapter.intervene("blocks.0.hook_resid_post", _splice):
        full = adapter.capture(inputs, ["logits"])["logits"]
        # The cached residual predates this edit; a skip would ignore it, so the pass is full.
        resumed = capture_from_layer(adapter, inputs, ["logits"], 1, first[resume_site(1)])
    assert _scaled_gap(resumed["logits"], full) < 1e-6

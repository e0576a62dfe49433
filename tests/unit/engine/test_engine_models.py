"""The engine on real (tiny) models through every backend: one forward per batch, clean-up
after errors, and the conformance check catching a real padding bug."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.tiny_models import tiny_gpt2

import geomlens as gl
from geomlens.analyses.activation_stats import ActivationStats
from geomlens.checks.conformance import all_passed, check_adapter
from geomlens.models.adapter import count_torch_hooks
from geomlens.models.nnsight import NNsightAdapter
from geomlens.models.transformer_lens import TransformerLensAdapter

TEXTS = [
    "the quick brown fox jumps over the lazy dog",
    "it happened in the year 1630",
    "the king and the queen",
    "a small red bird sat on the old tree",
    "three cats",
    "the river was big",
    "he was first",
]


def hooked_transformer():
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, n_ctx=64, d_head=8, n_heads=4, d_vocab=120, act_fn="gelu", seed=0
    )
    return HookedTransformer(cfg).eval()


def make_adapter(backend: str):
    """(adapter, the model object the user handed in) for each way a model reaches geomlens.

    ``adapter.model`` is the module whose forward runs: the user's own for TransformerLens
    models, a weight-sharing twin (nnsight) or a copy (bridge) of a plain HF module.
    """
    hf_model, tokenizer = tiny_gpt2()
    if backend == "nnsight":
        adapter = gl.attach(hf_model, tokenizer=tokenizer)
        assert isinstance(adapter, NNsightAdapter)
        return adapter, hf_model
    if backend == "bridge":
        adapter = gl.attach(hf_model, backend="transformer-lens", tokenizer=tokenizer)
        assert isinstance(adapter, TransformerLensAdapter)
        return adapter, hf_model
    model = hooked_transformer()
    adapter = gl.attach(model, tokenizer=tokenizer)
    assert isinstance(adapter, TransformerLensAdapter)
    return adapter, model


BACKENDS = ["nnsight", "bridge", "hooked-transformer"]


class Second(ActivationStats):
    name = "second-stats"


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_analyses_cost_one_forward_per_batch(backend):
    adapter, _ = make_adapter(backend)
    forwards = []
    handle = adapter.model.register_forward_pre_hook(lambda *_: forwards.append(1))
    try:
        results = gl.run(
            [
                ActivationStats(site="blocks.0.hook_resid_post"),
                Second(site="blocks.1.mlp.hook_post"),
            ],
            adapter,
            TEXTS,
            batch_size=3,
        )
    finally:
        handle.remove()
    assert len(forwards) == 3  # ceil(7 / 3) batches, one pass each
    assert set(results) == {"activation-stats", "second-stats"}
    assert results["second-stats"].provenance["sites"] == [
        "blocks.0.hook_resid_post",
        "blocks.1.mlp.hook_post",
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_in_update_leaves_model_clean(backend):
    adapter, users_model = make_adapter(backend)
    modules = {"user's": users_model, "traced": adapter.model}
    # A clean run first: the TransformerBridge wires capture hooks of its own on its first
    # forward and keeps them; those are the bridge's, not ours.
    gl.run("activation-stats", adapter, TEXTS[:1], site="blocks.1.hook_resid_post")
    before = {
        (which, name): p.detach().clone()
        for which, module in modules.items()
        for name, p in module.state_dict().items()
    }
    hooks_before = {which: count_torch_hooks(module) for which, module in modules.items()}

    class Exploding(ActivationStats):
        name = "exploding"

        def update(self, batch):
            super().update(batch)
            if len(self.moments) and batch.index[0] > 0:
                raise RuntimeError("boom inside update")

    with pytest.raises(RuntimeError, match="boom inside update"):
        gl.run(Exploding(site="blocks.1.hook_resid_post"), adapter, TEXTS, batch_size=2)
    assert adapter.hook_count() == 0
    assert {which: count_torch_hooks(module) for which, module in modules.items()} == hooks_before
    after = {
        (which, name): p
        for which, module in modules.items()
        for name, p in module.state_dict().items()
    }
    assert before.keys() == after.keys()
    assert all(torch.equal(before[key], after[key]) for key in before)
    # And the model still runs normally afterwards.
    result = gl.run("activation-stats", adapter, TEXTS[:2], site="blocks.1.hook_resid_post")
    assert result["blocks.1.hook_resid_post.rows"] > 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_batched_run_equals_one_by_one_results(backend):
    adapter, _ = make_adapter(backend)
    site = "blocks.1.hook_resid_post"
    together = gl.run(
        "activation-stats", adapter, TEXTS, site=site, batch_size=7, padding_side="left"
    )
    alone = gl.run("activation-stats", adapter, TEXTS, site=site, batch_size=1)
    for key, value in alone.metrics.items():
        assert together.metrics[key] == pytest.approx(value, rel=1e-5, abs=1e-6)


def test_conformance_passes_and_catches_wrong_positions():
    adapter, _ = make_adapter("nnsight")
    assert all_passed(check_adapter(adapter))

    class IgnoresPadding(NNsightAdapter):
        """The classic bug: positions counted from the start of the padded row."""

        def encode(self, *args, **kwargs):
            inputs = super().encode(*args, **kwargs)
            width = inputs.attention_mask.shape[1]
            inputs.position_ids = torch.arange(width).expand_as(inputs.attention_mask).clone()
            return inputs

    hf_model, tokenizer = tiny_gpt2()
    broken = check_adapter(IgnoresPadding(hf_model, tokenizer=tokenizer))
    by_name = {c.name: c for c in broken}
    assert by_name["right-padding"].passed
    assert not by_name["left-padding"].passed
    assert not all_passed(broken)


def test_pooled_last_token_is_the_real_last_token():
    adapter, _ = make_adapter("nnsight")
    site = "blocks.1.hook_resid_post"
    from geomlens.data.dataset import Dataset

    dataset = Dataset(texts=TEXTS[:3])
    for side in ("left", "right"):
        inputs = adapter.encode(dataset, np.arange(3), padding_side=side)
        acts = adapter.capture(inputs, [site])
        batch = gl.Batch(acts, inputs, {})
        pooled = batch.pooled(site, "last")
        for row in range(3):
            single = adapter.capture(adapter.encode(dataset, np.array([row])), [site])[site][0, -1]
            torch.testing.assert_close(pooled[row], single, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_captured_activation_outlives_its_batch(backend):
    import gc
    import weakref

    adapter, _ = make_adapter(backend)
    refs = []

    class Spy(ActivationStats):
        name = "spy"

        def update(self, batch):
            super().update(batch)
            refs.extend(weakref.ref(t) for t in batch.activations.values())

    gl.run(
        Spy(site=["blocks.0.hook_resid_post", "blocks.1.mlp.hook_pre"]),
        adapter,
        TEXTS,
        batch_size=2,
    )
    gc.collect()
    assert len(refs) == 8  # 4 batches x 2 sites
    assert all(r() is None for r in refs)


def test_results_record_the_interventions_they_ran_under():
    adapter, _ = make_adapter("nnsight")
    site = "blocks.1.hook_resid_post"
    plain = gl.run("activation-stats", adapter, TEXTS, site=site)
    with adapter.intervene("blocks.0.mlp.hook_post", lambda act: act + 5.0):
        ablated = gl.run("activation-stats", adapter, TEXTS, site=site)
    again = gl.run("activation-stats", adapter, TEXTS, site=site)
    assert plain.provenance["interventions"] == [] == again.provenance["interventions"]
    assert ablated.provenance["interventions"] == ["blocks.0.mlp.hook_post"]
    key = f"{site}.mean_norm"
    assert ablated[key] != pytest.approx(plain[key], rel=1e-4)
    assert again[key] == plain[key]

"""module:PATH sites and tensor inputs on the nnsight backend, checked against forward hooks of
our own on the same (untouched) model: a torchvision-style ResNet written in plain torch, a
transformers ResNet built from a config, and a tabled HF decoder mixing canonical and module
sites."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.tiny_models import tiny_gpt2
from helpers.vision_models import SharedReluResNet, TinyResNet, blob_images, seeded
from transformers import ResNetConfig, ResNetModel

import geomlens as gl
from geomlens.data.dataset import Dataset
from geomlens.inputs.encoding import encode_token_ids
from geomlens.models.adapter import count_torch_hooks
from geomlens.theory.finite_sets import evaluate

# Registration order puts downsample after relu1/relu2; the model runs it first.
SITES = ["module:layer2.0.relu2", "module:layer2.0.downsample", "module:layer2.0.relu1"]


def hooked_outputs(model, paths, run, edit=None):
    """Our own reference: forward hooks on ``model`` itself, removed after one call of ``run``.
    ``edit`` = (path, fn) replaces that module's output, as an intervention would."""
    outputs, handles = {}, []

    def keep(path):
        def hook(module, args, output):
            if edit is not None and edit[0] == path:
                output = edit[1](output)
            outputs[path] = output.detach().clone()
            return output

        return hook

    try:
        for path in dict.fromkeys([*paths, *([edit[0]] if edit else [])]):
            handles.append(model.get_submodule(path).register_forward_hook(keep(path)))
        with torch.no_grad():
            run()
    finally:
        for handle in handles:
            handle.remove()
    return outputs


def snapshot(model):
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def assert_untouched(model, before, adapter):
    assert count_torch_hooks(model) == 0
    assert adapter.hook_count() == 0
    after = model.state_dict()
    assert all(torch.equal(before[name], after[name]) for name in before)


@pytest.fixture(scope="module")
def resnet():
    model = seeded(TinyResNet)
    return model, gl.attach(model, model_id="tiny-resnet")


@pytest.fixture(scope="module")
def blobs():
    return blob_images()


def test_a_plain_module_lists_its_module_paths(resnet):
    model, adapter = resnet
    expected = [f"module:{name}" for name, _ in model.named_modules() if name]
    assert adapter.sites() == expected
    assert adapter.module_sites() == expected
    assert adapter.n_layers == 0
    with pytest.raises(ValueError, match=r"no submodule 'layer2\.0\.relu3'.*'layer2\.0\.relu"):
        adapter.resolve_site("module:layer2.0.relu3")


def test_module_sites_equal_our_own_forward_hooks_in_any_requested_order(resnet, blobs):
    model, adapter = resnet
    images, _ = blobs
    before = snapshot(model)
    dataset = Dataset(inputs={"pixel_values": images})
    batch = adapter.encode(dataset, np.arange(5))
    captured = adapter.capture(batch, SITES)
    reference = hooked_outputs(
        model, [s.split(":")[1] for s in SITES], lambda: model(torch.as_tensor(images[:5]))
    )
    for site in SITES:
        expected = reference[site.split(":")[1]].reshape(5, 1, -1)
        assert captured[site].shape == expected.shape  # one flattened row per image
        torch.testing.assert_close(captured[site], expected, rtol=0, atol=1e-6)
    assert_untouched(model, before, adapter)


def test_an_edit_on_a_module_site_acts_like_a_hook_that_edits(resnet, blobs):
    model, adapter = resnet
    images, _ = blobs
    before = snapshot(model)

    def silence_half(activation):
        edited = activation.clone()
        edited[:, : activation.shape[1] // 2] = 0
        return edited

    batch = adapter.encode(Dataset(inputs={"pixel_values": images}), np.arange(4))
    plain = adapter.capture(batch, ["module:avgpool"])["module:avgpool"]
    with adapter.intervene("module:layer1.0.relu1", silence_half):
        edited = adapter.capture(batch, ["module:layer1.0.relu1", "module:avgpool"])
    reference = hooked_outputs(
        model,
        ["layer1.0.relu1", "avgpool"],
        lambda: model(torch.as_tensor(images[:4])),
        edit=("layer1.0.relu1", silence_half),
    )
    torch.testing.assert_close(
        edited["module:avgpool"], reference["avgpool"].reshape(4, 1, -1), rtol=0, atol=1e-6
    )
    assert edited["module:layer1.0.relu1"].reshape(4, 8, -1)[:, :4].abs().max() == 0
    assert (edited["module:avgpool"] - plain).abs().max() > 1e-3  # the edit reached downstream
    assert_untouched(model, before, adapter)


def test_a_module_run_several_times_is_refused_with_a_pointer(blobs):
    model = seeded(SharedReluResNet)
    adapter = gl.attach(model)
    batch = adapter.encode(Dataset(inputs={"pixel_values": blobs[0]}), np.arange(2))
    with pytest.raises(ValueError, match=r"runs 2 times.*'module:layer1\.0'"):
        adapter.capture(batch, ["module:layer1.0.relu"])
    assert count_torch_hooks(model) == 0
    out = adapter.capture(batch, ["module:layer1.0", "module:layer1.0.conv2"])
    assert out["module:layer1.0"].shape == (2, 1, 8 * 16 * 16)


def test_similarity_and_resolution_on_module_sites_match_a_direct_computation(resnet, blobs):
    model, adapter = resnet
    images, positions = blobs
    before = snapshot(model)
    data = {"pixel_values": images, "coordinate": positions}
    site = "module:layer2.0.relu2"
    results = gl.run(
        ["similarity", "resolution"],
        adapter,
        data,
        site=site,
        similarity="cosine",
        full_matrix=True,
        bootstrap=0,
        batch_size=7,
    )
    features = hooked_outputs(model, ["layer2.0.relu2"], lambda: model(torch.as_tensor(images)))
    rows = features["layer2.0.relu2"].reshape(len(images), -1).double().numpy()
    stimuli = np.unique(positions)
    vectors = np.stack([rows[positions == p].mean(0) for p in stimuli])
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    expected = unit @ unit.T
    table = results["similarity"].tables["similarity_matrix"]
    measured = np.array([r["similarity"] for r in table]).reshape(len(stimuli), len(stimuli))
    np.testing.assert_allclose(measured, expected, atol=1e-6)

    distances = np.abs(stimuli[:, None] - stimuli[None, :]).astype(float)
    p_s, p_i = evaluate(distances, np.clip(expected, 0, None), 2)
    metrics = results["resolution"].metrics
    assert metrics[f"{site}.p_similarity"] == pytest.approx(p_s, abs=1e-6)
    assert metrics[f"{site}.p_identification"] == pytest.approx(p_i, abs=1e-6)
    assert_untouched(model, before, adapter)


def test_merging_halves_of_an_image_run_equals_one_pass(resnet, blobs):
    _, adapter = resnet
    images, positions = blobs
    dataset = gl.Dataset(inputs={"pixel_values": images}, columns={"coordinate": positions})
    options = {"site": "module:avgpool", "similarity": "cosine", "full_matrix": True}
    whole = gl.run("similarity", adapter, dataset, **options)
    halves = [gl.analysis_class("similarity")(**options) for _ in range(2)]
    rows = np.arange(len(images))
    for analysis, part in zip(halves, (rows[::2], rows[1::2])):
        gl.stream([analysis], adapter, dataset, rows=part, batch_size=4)
    halves[0].merge(halves[1])
    merged = halves[0].finalize()
    a = [r["similarity"] for r in whole.tables["similarity_matrix"]]
    b = [r["similarity"] for r in merged.tables["similarity_matrix"]]
    np.testing.assert_allclose(a, b, atol=1e-9)


def test_a_transformers_resnet_from_a_config_reads_like_its_own_hooks(blobs):
    config = ResNetConfig(
        num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic"
    )
    torch.manual_seed(0)
    model = ResNetModel(config).eval()
    before = snapshot(model)
    adapter = gl.attach(model)
    assert "module:encoder.stages.1.layers.0.shortcut" in adapter.sites()
    images = blobs[0][:6]
    sites = ["module:pooler", "module:encoder.stages.1.layers.0.shortcut", "module:encoder"]
    batch = adapter.encode(Dataset(inputs={"pixel_values": images}), np.arange(6))
    captured = adapter.capture(batch, sites)
    paths = [s.split(":")[1] for s in sites[:2]]
    reference = hooked_outputs(model, paths, lambda: model(pixel_values=torch.as_tensor(images)))
    for site, path in zip(sites, paths):
        torch.testing.assert_close(captured[site], reference[path].reshape(6, 1, -1))
    # The encoder returns a ModelOutput: its first field (the last hidden state) is read.
    with torch.no_grad():
        hidden = model(pixel_values=torch.as_tensor(images)).last_hidden_state
    torch.testing.assert_close(captured["module:encoder"], hidden.reshape(6, 1, -1))
    assert_untouched(model, before, adapter)


def test_module_sites_beside_canonical_sites_of_a_tabled_model():
    model, tokenizer = tiny_gpt2()
    before = snapshot(model)
    adapter = gl.attach(model, tokenizer=tokenizer)
    assert not any(s.startswith("module:") for s in adapter.sites())  # canonical stay the default
    assert "module:transformer.h.0.mlp.act" in adapter.module_sites()
    batch = encode_token_ids([[5, 6, 7, 8], [9, 10]], np.arange(2))
    sites = ["blocks.1.hook_resid_post", "module:transformer.h.0.mlp", "blocks.0.hook_mlp_out"]
    captured = adapter.capture(batch, sites)
    torch.testing.assert_close(
        captured["module:transformer.h.0.mlp"], captured["blocks.0.hook_mlp_out"], rtol=0, atol=0
    )
    plain = adapter.capture(batch, ["blocks.1.hook_resid_post"])["blocks.1.hook_resid_post"]
    torch.testing.assert_close(captured["blocks.1.hook_resid_post"], plain)
    with adapter.intervene("module:transformer.h.0.mlp", torch.zeros_like):
        ablated = adapter.capture(batch, ["blocks.0.hook_resid_post", "blocks.0.hook_resid_mid"])
    torch.testing.assert_close(
        ablated["blocks.0.hook_resid_post"], ablated["blocks.0.hook_resid_mid"]
    )
    assert_untouched(model, before, adapter)


def test_linearising_a_module_site_acts_like_a_hook_that_replaces_it(resnet, blobs):
    model, adapter = resnet
    images, positions = blobs
    before = snapshot(model)
    batch = adapter.encode(Dataset(inputs={"pixel_values": images}), np.arange(6))
    site, path = "module:layer1.0.relu1", "layer1.0.relu1"

    def reference(replacement):
        def hook(module, args, output):
            return replacement(args[0])

        handle = model.get_submodule(path).register_forward_hook(hook)
        try:
            with torch.no_grad():
                return model.avgpool(
                    model.layer2(model.layer1(model.stem(torch.as_tensor(images[:6]))))
                )
        finally:
            handle.remove()

    with adapter.linearize(site, mode="identity"):
        identity = adapter.capture(batch, ["module:avgpool"])["module:avgpool"]
        own = adapter.capture(batch, [site, "module:layer1.0.bn1"])
        result = gl.run(
            "activation-stats", adapter, {"pixel_values": images}, site="module:avgpool"
        )
    torch.testing.assert_close(own[site], own["module:layer1.0.bn1"])  # the site reads x, not φ(x)
    torch.testing.assert_close(identity, reference(lambda x: x).reshape(6, 1, -1))
    assert result.provenance["linearizations"] == [
        {"modules": [site], "mode": "identity", "where": [path]}
    ]

    inputs_seen = hooked_inputs(model, path, lambda: model(torch.as_tensor(images)))
    x0 = inputs_seen.mean(dim=0)
    with adapter.linearize([site], mode="tangent", calibration={"pixel_values": images}):
        tangent = adapter.capture(batch, ["module:avgpool"])["module:avgpool"]
    expected = reference(lambda x: torch.relu(x0) + (x0 > 0).float() * (x - x0))
    torch.testing.assert_close(tangent, expected.reshape(6, 1, -1), rtol=1e-5, atol=1e-5)
    assert (tangent - identity).abs().max() > 1e-4
    with pytest.raises(ValueError, match="not elementwise"), adapter.linearize("module:avgpool"):
        adapter.capture(batch, ["module:fc"])
    assert_untouched(model, before, adapter)


def hooked_inputs(model, path, run):
    seen = []
    handle = model.get_submodule(path).register_forward_hook(
        lambda module, args, output: seen.append(args[0].detach().clone())
    )
    try:
        with torch.no_grad():
            run()
    finally:
        handle.remove()
    return torch.cat(seen)


def test_conformance_check_says_a_module_only_model_has_no_canonical_sites(resnet):
    from geomlens.checks.conformance import check_adapter

    with pytest.raises(ValueError, match="no canonical sites, only module:PATH"):
        check_adapter(resnet[1])


def test_other_backends_say_module_sites_are_read_by_nnsight():
    recorded = gl.attach({"blocks.0.hook_resid_post": np.zeros((3, 4), dtype=np.float32)})
    assert recorded.module_sites() == []
    with pytest.raises(ValueError, match="read by the nnsight backend.*not by the 'recorded'"):
        recorded.resolve_site("module:layer1")

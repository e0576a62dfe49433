"""Tensor and image inputs: pixel values and any named input as arrays, image files through a
processor, batching, dtype and device handling, provenance, and clear errors before any pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.vision_models import TINY_VISION_TOWER, TinyResNet, blob_images, seeded
from PIL import Image
from transformers import ViTConfig, ViTImageProcessorPil, ViTModel

import geomlens as gl
from geomlens.data.dataset import Dataset, as_dataset
from geomlens.inputs.encoding import ModelInputs
from geomlens.models.adapter import count_torch_hooks


@pytest.fixture(scope="module")
def vit():
    config = ViTConfig(**TINY_VISION_TOWER)
    torch.manual_seed(0)
    processor = ViTImageProcessorPil(size={"height": 32, "width": 32})
    return ViTModel(config).eval(), processor


@pytest.fixture
def image_files(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for k in range(5):
        pixels = rng.integers(0, 256, (40 + 4 * k, 48, 3), dtype=np.uint8)  # sizes differ
        path = tmp_path / f"image{k}.png"
        Image.fromarray(pixels).save(path)
        paths.append(str(path))
    return paths


def test_image_files_through_a_processor_equal_the_models_own_forward(vit, image_files):
    model, processor = vit
    adapter = gl.attach(model, processor=processor)
    site = "blocks.1.hook_resid_post"  # a ViT's blocks are discovered: canonical names
    dataset = as_dataset({"images": image_files, "label": np.arange(5)})
    assert dataset.columns.keys() == {"label"} and len(dataset) == 5
    captured = torch.cat(
        [
            adapter.capture(adapter.encode(dataset, rows), [site])[site]
            for rows in ([0, 1, 2], [3, 4])
        ]
    )
    pixel_values = processor(
        images=[Image.open(p).convert("RGB") for p in image_files], return_tensors="pt"
    )["pixel_values"]
    with torch.no_grad():
        hidden = model(pixel_values=pixel_values, output_hidden_states=True).hidden_states[2]
    # One row per image: the block's output over all patch tokens, flattened.
    torch.testing.assert_close(captured, hidden.reshape(5, 1, -1), rtol=1e-5, atol=1e-5)
    assert adapter.hook_count() == 0


def test_pixel_value_arrays_run_an_analysis_batched_like_one_pass(vit):
    model, _ = vit
    rng = np.random.default_rng(1)
    pixels = rng.normal(size=(7, 3, 32, 32))  # float64: cast to the model's float32
    data = {"pixel_values": pixels, "coordinate": np.arange(7)}
    options = {"site": "blocks.0.hook_resid_post", "similarity": "cosine", "full_matrix": True}
    hooks_before = count_torch_hooks(model)  # transformers' own, installed by earlier passes
    one = gl.run("similarity", model, data, batch_size=7, **options)
    batched = gl.run("similarity", model, data, batch_size=2, **options)
    a = [r["similarity"] for r in one.tables["similarity_matrix"]]
    b = [r["similarity"] for r in batched.tables["similarity_matrix"]]
    np.testing.assert_allclose(a, b, atol=1e-6)
    assert "pixel_values" in one.provenance["data_source"]
    assert count_torch_hooks(model) == hooks_before


def test_a_plain_forward_x_takes_the_single_named_input():
    model = seeded(TinyResNet)
    images, _ = blob_images(positions=2, per_position=2)
    adapter = gl.attach(model)
    batch = adapter.encode(Dataset(inputs={"pixel_values": images}), np.arange(4))
    logits = adapter.capture(batch, ["module:fc"])["module:fc"]
    with torch.no_grad():
        torch.testing.assert_close(logits[:, 0], model(torch.as_tensor(images)))


def test_extra_inputs_move_with_the_batch():
    inputs = ModelInputs(
        index=np.arange(2),
        attention_mask=torch.ones(2, 1, dtype=torch.bool),
        extra={"pixel_values": torch.zeros(2, 3), "sizes": [(1, 1), (2, 2)]},
    )
    moved = inputs.to("meta")
    assert moved.extra["pixel_values"].device.type == "meta"
    assert moved.extra["sizes"] == [(1, 1), (2, 2)]


def test_bad_image_inputs_fail_clearly_before_any_pass(vit, image_files):
    model, _ = vit
    adapter = gl.attach(model)  # no processor
    with pytest.raises(ValueError, match="need a processor.*processor=AutoProcessor"):
        adapter.encode(as_dataset({"images": image_files}), np.arange(2))
    with pytest.raises(ValueError, match="must be numbers.*under 'images', with a processor"):
        as_dataset({"pixel_values": image_files})
    with pytest.raises(ValueError, match=r"\{'pixel_values': 3\} examples and 2 texts"):
        Dataset(texts=["a", "b"], inputs={"pixel_values": np.zeros((3, 3, 32, 32))})
    resnet = seeded(TinyResNet)
    with pytest.raises(ValueError, match=r"takes no input named 'pixel_values'.*\(x\)"):
        gl.run(
            "activation-stats",
            resnet,
            {"inputs": {"pixel_values": np.zeros((2, 3, 16, 16)), "depth": np.zeros((2, 1))}},
            site="module:fc",
        )
    assert count_torch_hooks(resnet) == 0

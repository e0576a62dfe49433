"""The VLM shapes task: scenes drawn as specified, the scoring pipeline against a planted
accuracy drop and against the model's own forward, and tutorials/gpu/vlm_shapes.py end to end on
a tiny Llava built from a config (CPU)."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import torch
from helpers.paths import REPO
from helpers.vision_models import tiny_llava

import geomlens as gl
from geomlens.data.shapes import (
    CORNERS,
    SHAPES,
    ShapesScene,
    draw_scene,
    shapes_scenes,
    shapes_task,
)
from geomlens.experiments.vlm_shapes import accuracy_profile, resolution_scale, score_shapes
from geomlens.models.adapter import count_torch_hooks

SCRIPT = REPO / "tutorials" / "gpu" / "vlm_shapes.py"
PROMPT = "<image> which shape is closest to the red cross ? answer :"


def test_scenes_have_one_clear_answer_and_are_drawn_where_they_say():
    scenes = shapes_scenes(40, seed=1, margin=0.05)
    for scene in scenes:
        ordered = sorted(scene.distances().values())
        assert ordered[1] - ordered[0] >= 0.05
        assert sorted(scene.corners) == sorted(SHAPES)
    scene = ShapesScene((0.3, 0.2), ("circle", "square", "triangle", "star"))
    assert scene.closest == "circle"
    assert scene.nearest_distance == pytest.approx(np.hypot(0.15, 0.05))
    pixels = np.asarray(draw_scene(scene, 100)).astype(int)
    red = (pixels[..., 0] > 180) & (pixels[..., 1] < 60) & (pixels[..., 2] < 60)
    rows, cols = np.nonzero(red)
    assert abs(cols.mean() - 30) < 2 and abs(rows.mean() - 20) < 2  # the cross, at (x, y)
    for x, y in CORNERS:  # every corner holds a dark shape at its centre
        assert pixels[int(y * 100), int(x * 100)].max() < 50


def test_resolution_scale_finds_a_planted_drop():
    rng = np.random.default_rng(0)
    distance = rng.uniform(0.1, 0.5, 4000)
    planted = np.where(distance < 0.3, 0.9, 0.25)  # perfect up to 0.3, chance beyond
    profile = accuracy_profile(distance, planted, planted, bins=40)
    assert resolution_scale(profile) == pytest.approx(0.3, abs=0.01)
    flat = accuracy_profile(distance, np.full(4000, 0.8), np.ones(4000), bins=10)
    assert np.isnan(resolution_scale(flat))


def test_choice_probabilities_equal_the_models_own_forward_and_leave_it_untouched():
    model, processor = tiny_llava()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    adapter = gl.attach(model, processor=processor)
    assert adapter.sites()[-1] == "logits"
    scenes = shapes_scenes(10, seed=2)
    outcome = score_shapes(adapter, scenes, prompt=PROMPT, size=32, batch_size=4, bins=2)
    assert count_torch_hooks(model) == 0 and adapter.hook_count() == 0
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())

    # The reference, straight from the model (whose forward installs transformers' own hooks).
    data = shapes_task(scenes, prompt=PROMPT, size=32)
    inputs = processor(images=data["images"], text=data["text"], return_tensors="pt", padding=True)
    with torch.no_grad():
        logits = model(**inputs).logits[:, -1]
    ids = [processor.tokenizer(" " + s, add_special_tokens=False)["input_ids"][0] for s in SHAPES]
    probabilities = torch.softmax(logits[:, ids].double(), dim=1).numpy()
    closest = [SHAPES.index(scene.closest) for scene in scenes]
    expected = probabilities[np.arange(len(scenes)), closest]
    np.testing.assert_allclose(outcome.expected_correct, expected, atol=1e-6)
    assert outcome.metrics["expected_accuracy"] == pytest.approx(expected.mean(), abs=1e-6)


def test_the_gpu_script_runs_on_cpu_with_a_tiny_vlm(tmp_path):
    model, processor = tiny_llava()
    folder = tmp_path / "tiny-llava"
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    spec = importlib.util.spec_from_file_location("vlm_shapes", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "out"
    argv = ["--model", str(folder), "--device", "cpu", "--dtype", "float32"]
    argv += [
        "--trials",
        "16",
        "--size",
        "32",
        "--bins",
        "4",
        "--batch-size",
        "8",
        "--out",
        str(out),
    ]
    summary = script.main(argv)["summary"]
    written = json.loads((out / "vlm_shapes_profile.json").read_text())
    assert written["trials"] == 16 and len(written["profile"]) == 4
    assert 0 < written["expected_accuracy"] < 1
    assert summary["expected_accuracy"] == written["expected_accuracy"]
    assert json.loads((out / "vlm_shapes.json").read_text())["analysis"] == "similarity"
    assert (out / "vlm_shapes.png").stat().st_size > 5_000


def test_a_vlm_offers_its_language_models_canonical_sites_beside_module_paths():
    model, processor = tiny_llava()
    adapter = gl.attach(model, processor=processor)
    assert adapter.table.family == "llama" and adapter.n_layers == 2
    assert adapter.sites()[:2] == ["hook_embed", "blocks.0.hook_resid_pre"]
    assert "module:model.vision_tower.encoder.layers.1" in adapter.module_sites()
    data = shapes_task(shapes_scenes(3, seed=3), prompt=PROMPT, size=32)
    batch = adapter.encode(
        gl.Dataset(texts=data["text"], inputs={"images": data["images"]}), [0, 1, 2]
    )
    sites = ["blocks.0.hook_resid_post", "module:model.vision_tower.encoder.layers.1", "logits"]
    captured = adapter.capture(batch, sites)
    assert adapter.hook_count() == 0
    inputs = processor(images=data["images"], text=data["text"], return_tensors="pt", padding=True)
    with torch.no_grad():
        output = model(**inputs, output_hidden_states=True)
    torch.testing.assert_close(captured["blocks.0.hook_resid_post"], output.hidden_states[1])
    torch.testing.assert_close(captured["logits"], output.logits)
    assert captured["module:model.vision_tower.encoder.layers.1"].shape == (3, 17, 32)

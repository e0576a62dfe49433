"""The digits CNN trade-off experiment: planted class geometries give the theory's numbers, the
embeddings read through geomlens equal the model's own, and training with the similarity loss
moves a net from the identification corner toward generalisation (the seed's CNN result)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.paths import REPO

from geomlens.experiments.digits import (
    DigitsCNN,
    digit_distance,
    load_digits_split,
    measure_digits_model,
    train_digits_cnn,
)
from geomlens.experiments.tradeoff import class_similarity, embed_with, tradeoff_point
from geomlens.models.adapter import count_torch_hooks
from geomlens.theory import resolution


def test_orthogonal_classes_sit_where_theorem_1_puts_b_equal_one_over_k():
    classes = 10
    labels = np.repeat(np.arange(classes), 3)
    embeddings = np.eye(classes)[labels] * np.random.default_rng(0).uniform(1, 2, (30, 1))
    point = tradeoff_point(embeddings, labels, digit_distance)
    b = 1 / classes  # each class's ball holds only itself
    assert point.p_s == pytest.approx(resolution.p_similarity(b), abs=1e-12)
    assert point.p_i == pytest.approx(resolution.p_identification(b), abs=1e-12)
    assert point.front_distance == pytest.approx(0, abs=1e-6)
    assert point.regime == "identification"


def test_class_similarity_leaves_out_self_pairs():
    labels = np.array([0, 0, 1, 1])
    embeddings = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    g = class_similarity(embeddings, labels, [0, 1])
    # class 0's two images are orthogonal: distinct pairs only, so its diagonal is 0, not 1/2
    np.testing.assert_allclose(g, [[0.0, np.sqrt(0.5)], [np.sqrt(0.5), 1.0]], atol=1e-12)
    with pytest.raises(ValueError, match="fewer than two"):
        class_similarity(embeddings[:3], labels[:3], [0, 1])


def test_embeddings_read_at_module_embed_equal_the_models_own():
    split = load_digits_split()
    torch.manual_seed(0)
    model = DigitsCNN(width=4).eval()
    read = embed_with(model, split.test_images[:50], "module:embed", batch_size=16)
    with torch.no_grad():
        direct = model.embedding(torch.as_tensor(split.test_images[:50])).numpy()
    np.testing.assert_allclose(read, direct, atol=1e-6)
    assert count_torch_hooks(model) == 0


def test_similarity_loss_trades_identification_for_generalisation():
    """λ = 0 (identification only) against λ = 1 (similarity only), a shortened run (the full
    sweep is in the tutorial): p_I falls and p_S rises."""
    split = load_digits_split()
    before = {}
    points = {}
    for weight in (0.0, 1.0):
        model = train_digits_cnn(weight, split, epochs=12, width=8)
        before = {k: v.clone() for k, v in model.state_dict().items()}
        points[weight] = measure_digits_model(model, split)
        assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
        assert count_torch_hooks(model) == 0
    identification, similarity = points[0.0], points[1.0]
    assert identification.p_i > similarity.p_i + 0.02
    assert similarity.p_s > identification.p_s + 0.05


def test_the_tutorial_runs_top_to_bottom_with_small_parameters(tmp_path, monkeypatch):
    """tutorials/digits_tradeoff.py as a script, its parameters cell swapped for a quick run."""
    source = (REPO / "tutorials" / "digits_tradeoff.py").read_text()
    head, rest = source.split('# %% tags=["parameters"]\n', 1)
    _, tail = rest.split("\n# %%", 1)
    figure = tmp_path / "front.png"
    parameters = f"SIMILARITY_WEIGHTS = [0.0, 1.0]\nEPOCHS = 2\nWIDTH = 4\nSEED = 0\nFIGURE = {str(figure)!r}\n"
    monkeypatch.chdir(tmp_path)
    exec(compile(head + parameters + "\n# %%" + tail, "digits_tradeoff.py", "exec"), {})
    assert figure.stat().st_size > 5_000

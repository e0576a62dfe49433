"""The toy network beyond the paper's defaults: any stimulus metric, more candidates per
trial, weight decay (as the paper's released code allows)."""

import numpy as np
import pytest
import torch

from geomlens.data.distances import distance_matrix
from geomlens.theory import toy


def test_distinct_draws_are_distinct_and_uniform():
    generator = torch.Generator().manual_seed(0)
    draws = toy._distinct_draws(60_000, 6, 5, generator)
    ordered = torch.sort(draws, dim=1).values
    assert bool((ordered[:, 1:] != ordered[:, :-1]).all())
    # Every position is uniform over the 6 stimuli (60_000 / 6 = 10_000 expected each).
    for column in draws.T:
        counts = torch.bincount(column, minlength=6).numpy()
        assert np.all(np.abs(counts - 10_000) < 5 * np.sqrt(10_000))


def test_a_given_circle_metric_equals_the_circle_geometry():
    config = toy.ToyConfig(stimuli=12, hidden=4, epochs=3)
    by_name = toy.train_toy(config)
    by_matrix = toy.train_toy(config, distances=toy.stimulus_distances(12, "circle") * 360)
    np.testing.assert_array_equal(by_name.weights, by_matrix.weights)


def test_a_grid_metric_trains_a_similarity_that_falls_with_grid_distance():
    squares = [(i, j) for i in range(5) for j in range(5)]
    grid = distance_matrix(squares, "euclidean")
    config = toy.ToyConfig(stimuli=25, hidden=8, epochs=40, candidates=3)
    run = toy.train_toy(config, distances=grid)
    learned = toy.learned_similarity(run.weights)
    off = ~np.eye(25, dtype=bool)
    correlation = np.corrcoef(grid[off], learned[off])[0, 1]
    assert correlation < -0.5
    assert run.p_s[-1] > run.p_s[0] + 0.05
    # ... and the metric matters: the same seed on a circle learns something else.
    circle = toy.train_toy(toy.ToyConfig(stimuli=25, hidden=8, epochs=40, candidates=3))
    assert not np.allclose(circle.weights, run.weights)


def test_more_candidates_change_the_trials():
    two = toy.train_toy(toy.ToyConfig(stimuli=20, epochs=5))
    five = toy.train_toy(toy.ToyConfig(stimuli=20, epochs=5, candidates=5))
    assert not np.allclose(two.weights, five.weights)
    assert np.isfinite(five.loss).all()


def test_weight_decay_shrinks_the_weights():
    plain = toy.train_toy(toy.ToyConfig(stimuli=20, epochs=30))
    decayed = toy.train_toy(toy.ToyConfig(stimuli=20, epochs=30, weight_decay=0.05))
    assert np.linalg.norm(decayed.weights) < 0.9 * np.linalg.norm(plain.weights)


@pytest.mark.parametrize(
    ("overrides", "distances", "expected"),
    [
        (dict(candidates=1), None, "candidates must be >= 2"),
        (dict(stimuli=5, candidates=5), None, "at most stimuli - 1 = 4"),
        (dict(weight_decay=-1.0), None, "weight_decay must be >= 0"),
        (dict(stimuli=4), np.zeros((3, 3)), "\\(4, 4\\) matrix"),
        (dict(stimuli=3), np.array([[0, 1, 2], [1, 0, 1], [1, 1, 0]]), "symmetric"),
        (dict(stimuli=3), np.ones((3, 3)), "zero diagonal"),
    ],
)
def test_invalid_settings_say_what_was_expected(overrides, distances, expected):
    with pytest.raises(ValueError, match=expected):
        toy.train_toy(toy.ToyConfig(epochs=1, **overrides), distances=distances)

"""The toy ReLU network (docs/theory.md#resolution-toy-network): what training does to its learned similarity.

Numbers measured when these tests were written (seed 0, paper's configuration): the
similarity-trained run starts 0.23 from Proposition 1's front, reaches it by epoch 17 and
then stays within 0.018 of it (0.016 from epoch 20); p_S peaks at 0.799 at epoch 37 and
falls back (0.780 at epoch 150) while p_I rises (0.80 -> 0.85) as the profile keeps
narrowing (seeds 1-3 behave alike)."""

import numpy as np
import pytest

from geomlens.theory import finite_sets, resolution, toy

# The trajectory starts off the front (an all-positive W gives a broad similarity) and climbs
# onto it; 20 epochs (300 steps) are "the first epochs" of the acceptance criterion.
SETTLED = 20
EPOCHS = 150


@pytest.fixture(scope="module")
def similarity_run():
    return toy.train_toy(toy.ToyConfig(epochs=EPOCHS))


def test_similarity_training_moves_along_proposition_1s_front(similarity_run):
    run = similarity_run
    assert run.p_s.shape == run.p_i.shape == (EPOCHS + 1,)
    distance = resolution.nearest_on_front(
        run.p_s, run.p_i, resolution.linear_decay_front(2001)
    ).distance
    assert distance[0] > 0.15
    assert distance[SETTLED:].max() <= 0.03
    # Rise toward the front, then fall back along it: p_S peaks and declines while p_I
    # keeps improving (the resolution keeps getting finer).
    peak = int(np.argmax(run.p_s))
    assert SETTLED <= peak < EPOCHS - 50
    assert run.p_s[peak] > 0.75
    assert run.p_s[-1] < run.p_s[peak] - 0.01
    assert run.p_i[-1] > run.p_i[peak] + 0.02
    assert run.loss[-10:].mean() < run.loss[:10].mean()


def test_learned_similarity_narrows(similarity_run):
    run = similarity_run
    assert run.profiles[:, 0] == pytest.approx(np.ones(EPOCHS + 1))  # g(0) = 1
    assert run.profile_mass[-1] < 0.4 * run.profile_mass[0]
    assert np.all(np.diff(run.profile_mass[SETTLED:]) < 1e-3)  # keeps narrowing
    # A resolution boundary emerges: far stimuli, similar at initialisation, end at zero.
    far = run.profile_distances > 0.3
    assert run.profiles[0, far].min() > 0.5
    assert run.profiles[-1, far].max() < 0.01
    # ...and the final profile decays with distance.
    assert np.all(np.diff(run.profiles[-1]) < 0.01)


def test_reconstruction_alone_drives_identification_up_at_paper_size():
    # Paper size (m = 10 for 50 stimuli): identification rises from 0.57 to about 0.90 while
    # p_S stays at chance (the identification end of the front). It cannot reach 0.95 here:
    # without a bias the ReLU cannot remove the positive interference that 50 vectors in
    # R^10 must have, and the MSE tolerates it; full-batch minimisation of the loss itself
    # ends near p_I = 0.88.
    run = toy.train_toy(toy.ToyConfig(lambda_sim=0.0, lambda_rec=1.0, epochs=100))
    assert run.p_i[0] < 0.6
    assert run.p_i[-1] > 0.88
    assert run.p_s.max() < 0.55
    assert (
        resolution.regime(
            resolution.nearest_on_front(run.p_s[-1], run.p_i[-1], resolution.pareto_front(1001)).b
        )
        == "identification"
    )


def test_reconstruction_alone_drives_identification_above_095_with_more_room():
    # With 30 hidden units (the width of the paper's released notebook) superposition is
    # milder and reconstruction alone pushes p_I past 0.95 (measured 0.956 at epoch 300).
    run = toy.train_toy(toy.ToyConfig(hidden=30, lambda_sim=0.0, lambda_rec=1.0, epochs=300))
    assert run.p_i[-1] > 0.95
    assert run.p_s[-1] < 0.55


def test_runs_are_seeded():
    config = toy.ToyConfig(epochs=3, lambda_rec=0.5)
    first, again = toy.train_toy(config), toy.train_toy(config)
    np.testing.assert_array_equal(first.weights, again.weights)
    np.testing.assert_array_equal(first.p_s, again.p_s)
    other = toy.train_toy(toy.ToyConfig(epochs=3, lambda_rec=0.5, seed=1))
    assert not np.array_equal(first.weights, other.weights)


def test_recorded_accuracy_is_the_learned_similaritys():
    run = toy.train_toy(toy.ToyConfig(epochs=2, geometry="segment"))
    similarity = toy.learned_similarity(run.weights)
    assert similarity == pytest.approx(np.maximum(run.weights.T @ run.weights, 0) + 1e-10)
    assert (run.p_s[-1], run.p_i[-1]) == pytest.approx(
        tuple(finite_sets.evaluate(run.distances, similarity))
    )


def test_stimulus_distances_and_profile():
    circle = toy.stimulus_distances(8, "circle")
    assert circle[0] == pytest.approx([0, 1 / 8, 2 / 8, 3 / 8, 4 / 8, 3 / 8, 2 / 8, 1 / 8])
    segment = toy.stimulus_distances(5, "segment")
    assert segment[0] == pytest.approx([0, 0.25, 0.5, 0.75, 1.0])
    # g(x_i, x_j) = 2 - |i - j| on 3 points of a segment, rows normalised by g(x_i, x_i) = 2.
    similarity = np.array([[2.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 2.0]])
    levels, profile = toy.similarity_profile(similarity, toy.stimulus_distances(3, "segment"))
    assert levels == pytest.approx([0.0, 0.5, 1.0])
    assert profile == pytest.approx([1.0, 0.5, 0.0])


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (dict(geometry="torus"), "geometry must be 'circle' or 'segment'"),
        (dict(hidden=0), "hidden must be >= 1"),
        (dict(stimuli=2), "stimuli must be >= 3"),
        (dict(lambda_sim=0.0), "not both 0"),
        (dict(lambda_rec=-1.0), "must be >= 0"),
        (dict(learning_rate=0.0), "must be > 0"),
    ],
)
def test_invalid_configs_say_what_was_expected(overrides, expected):
    with pytest.raises(ValueError, match=expected):
        toy.ToyConfig(**overrides)

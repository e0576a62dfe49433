"""The toy network's checkpoints swept with the resolution analysis: (p_S, p_I) against the
front of its linear-decay proposition, as theory.toy records them during training."""

from __future__ import annotations

import numpy as np
import pytest

import geomlens as gl
from geomlens.dynamics.toy_overlay import front_distances, front_identification
from geomlens.experiments import toy_network
from geomlens.theory import resolution, toy

EPOCHS = 30


@pytest.fixture(scope="module")
def toy_sweep(tmp_path_factory):
    folder = tmp_path_factory.mktemp("toy") / "run"
    toy_network.train(toy.ToyConfig(epochs=EPOCHS), folder)
    out = folder.parent / "sweep"
    return gl.sweep("resolution", folder, out=out, progress=False, bootstrap=0), out


def points(outcome):
    return outcome.theory["toy_front"]["points"]


def test_the_sweep_walks_to_the_front(toy_sweep):
    outcome, _ = toy_sweep
    found = points(outcome)
    assert [p["step"] for p in found] == list(range(EPOCHS + 1))
    distances = np.array([p["front_distance"] for p in found])
    # The theory's own distance function on the measured points.
    assert distances == pytest.approx(
        front_distances([p["p_similarity"] for p in found], [p["p_identification"] for p in found])
    )
    assert distances[0] > 0.15
    assert distances[20:].max() <= 0.02


def test_measured_points_are_the_networks_own(toy_sweep):
    # The same run in theory.toy computes (p_S, p_I) of ReLU(WᵀW) exactly at every epoch.
    outcome, _ = toy_sweep
    run = toy.train_toy(toy.ToyConfig(epochs=EPOCHS))
    found = points(outcome)
    assert [p["p_similarity"] for p in found] == pytest.approx(run.p_s, abs=0.005)
    assert [p["p_identification"] for p in found] == pytest.approx(run.p_i, abs=0.005)


def test_front_columns_and_figure(toy_sweep):
    outcome, out = toy_sweep
    rows = [
        r
        for r in outcome.rows
        if r["metric"] == "p_identification" and r["theory_exact"] is not None
    ]
    assert rows
    by_checkpoint = {
        r["checkpoint"]: r["value"] for r in outcome.rows if r["metric"] == "p_similarity"
    }
    for row in rows:
        assert row["theory_exact"] == pytest.approx(
            front_identification([by_checkpoint[row["checkpoint"]]])[0]
        )
    assert outcome.theory["level"] == "exact"
    assert (out / "resolution.png").stat().st_size > 0
    # The universal front's p_S maximum (0.75) is below what the toy reaches.
    assert max(p["p_similarity"] for p in points(outcome)) > resolution.pareto_front(2001).p_s.max()

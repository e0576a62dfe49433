"""Several seeds of one schedule: a trajectory with an interval across seeds at each step."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

import geomlens as gl
from geomlens.cli import app

EPOCHS = 8


@pytest.fixture(scope="module")
def three_seeds(tmp_path_factory):
    folder = tmp_path_factory.mktemp("seeds") / "run"
    done = CliRunner().invoke(
        app,
        [
            "experiment",
            "toy-network",
            "--epochs",
            str(EPOCHS),
            "--seeds",
            "0,1,2",
            "--out",
            str(folder),
        ],
    )
    assert done.exit_code == 0, done.output
    return folder


def test_seed_folders_are_one_series(three_seeds):
    found = gl.series(three_seeds)
    assert found.seeds == [0, 1, 2] and len(found) == 3 * (EPOCHS + 1)
    assert found[0].label == "seed-0/epoch-0"
    assert found.select("every:4").seeds == [0, 1, 2]


def test_interval_across_seeds(three_seeds, tmp_path):
    outcome = gl.sweep(
        "resolution", three_seeds, out=tmp_path / "sweep", progress=False, bootstrap=0
    )
    rows = [r for r in outcome.rows if r["metric"] == "p_similarity"]
    assert {r["seed"] for r in rows} == {0, 1, 2}
    summary = {r["step"]: r for r in outcome.across_seeds if r["metric"] == "p_similarity"}
    assert sorted(summary) == list(range(EPOCHS + 1))
    for step, row in summary.items():
        values = np.array([r["value"] for r in rows if r["step"] == step])
        half = stats.t.ppf(0.975, 2) * values.std(ddof=1) / np.sqrt(3)
        assert row["seeds"] == 3 and row["mean"] == pytest.approx(values.mean())
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(
            (values.mean() - half, values.mean() + half)
        )
    assert (
        (tmp_path / "sweep" / "trajectory_seeds.csv").read_text().startswith("step,time,analysis")
    )
    # Each seed is placed against the front at its own checkpoints.
    assert len(outcome.theory["toy_front"]["points"]) == 3 * (EPOCHS + 1)


def test_a_list_of_series_is_one_series_of_seeds(three_seeds):
    runs = [gl.series(three_seeds / f"seed-{k}") for k in range(3)]
    combined = gl.series(runs, seeds=[10, 11, 12])
    assert combined.seeds == [10, 11, 12]
    assert combined[0].label == "seed-10/epoch-0"
    assert combined.experiment(combined[-1])["config"]["seed"] == 2

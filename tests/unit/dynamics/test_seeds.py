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


def test_seeds_of_the_linear_network_follow_one_exact_curve(tmp_path):
    # The aligned start makes α(t) independent of the seed (it draws only the start's
    # rotation): every seed follows the exact curve, and the interval across seeds is tight.
    done = CliRunner().invoke(
        app,
        ["experiment", "abstraction-dynamics", "--steps", "200", "--checkpoints", "every:50",
         "--seeds", "0,1,2", "--out", str(tmp_path / "run")],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    outcome = gl.sweep(
        "abstraction", tmp_path / "run", progress=False, figures=False, n_bootstrap=0, n_shuffles=0
    )
    assert sorted(outcome.theory["exact"]) == ["0", "1", "2"]
    for summary in outcome.theory["exact"].values():
        assert summary["max_abs_residual"] < 0.004
    for row in outcome.across_seeds:
        assert row["seeds"] == 3 and row["ci_high"] - row["ci_low"] < 1e-9


def test_runs_that_declare_different_data_are_refused(tmp_path):
    from geomlens.experiments import abstraction_dynamics as experiment

    for seed, width in ((0, 6), (1, 7)):
        config = experiment.AbstractionDynamicsConfig(
            steps=20, checkpoints="every:10", input_dim=width, seed=seed
        )
        experiment.train(config, tmp_path / f"seed-{seed}")
    with pytest.raises(ValueError, match="declare different data"):
        gl.sweep("abstraction", tmp_path, progress=False, n_bootstrap=0, n_shuffles=0)
    assert not (tmp_path / "sweep.json").exists()

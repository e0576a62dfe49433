"""The abstraction-dynamics experiment swept against its exact theory (docs/dynamics.md).

Every threshold below is the theory's: the measured α of a network trained by gradient descent
against ``theory.abstraction`` (α(t), α_max, α_∞, the per-layer artanh law) evaluated at
t = Σ lr, never against numbers this code produced before. Gradient descent with step η
discretises the flow with an O(η) error, so halving η halves the gap.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import geomlens as gl
from geomlens.experiments import abstraction_dynamics as experiment
from geomlens.theory import abstraction as theory

FAST = {"n_bootstrap": 0, "n_shuffles": 0}


def trained(tmp_path_factory, name, **overrides):
    config = experiment.AbstractionDynamicsConfig(**overrides)
    folder = tmp_path_factory.mktemp(name)
    experiment.train(config, folder)
    return config, folder


def last_layer_rows(outcome, depth=1):
    site = f"module:layers.{depth - 1}"
    rows = [r for r in outcome.rows if r["site"] == site and r["metric"] == "alpha"]
    return sorted(rows, key=lambda r: r["step"])


@pytest.fixture(scope="module")
def every_ten(tmp_path_factory):
    config, folder = trained(tmp_path_factory, "every10")
    outcome = gl.sweep(
        "abstraction", folder, out=folder.parent / "every10-sweep", progress=False, **FAST
    )
    return config, folder, outcome


def test_two_layer_series_follows_the_exact_alpha(every_ten, tmp_path_factory):
    config, _, outcome = every_ten
    rows = last_layer_rows(outcome)
    assert len(rows) == 301 and rows[-1]["time"] == pytest.approx(30.0)
    # The overlay is the theory's own α(t) at t = Σ lr.
    sigma_x = theory.two_factor_kernel(config.input_modes)
    sigma_y = theory.two_factor_kernel(config.target_modes)
    exact = theory.alpha_trajectory(
        sigma_x, sigma_y, config.gamma, config.init_scale, [r["time"] for r in rows]
    )
    assert [r["theory_exact"] for r in rows] == pytest.approx(exact, abs=1e-9)
    gap = max(abs(r["residual_exact"]) for r in rows)
    assert gap < 0.004
    # Half the step, the same times: the largest gap halves.
    _, half_folder = trained(
        tmp_path_factory, "half", learning_rate=0.005, steps=6000, checkpoints="every:20"
    )
    half = gl.sweep("abstraction", half_folder, progress=False, figures=False, **FAST)
    half_gap = max(abs(r["residual_exact"]) for r in last_layer_rows(half))
    assert half_gap / gap == pytest.approx(0.5, abs=0.05)
    assert outcome.theory["exact"]["clock_ratio"] == pytest.approx(1.0, abs=0.02)


def test_sweep_alpha_is_the_hand_computed_cosine(every_ten):
    _, folder, outcome = every_ten
    record = gl.series(folder).experiment()
    inputs = torch.tensor(record["data"]["inputs"]["x"], dtype=torch.float64)
    for row in last_layer_rows(outcome)[::37]:
        network = experiment.load_network(folder / row["checkpoint"], record)
        with torch.no_grad():
            hidden = network(inputs).numpy()  # rows in CLASS_ORDER: (+,+), (+,−), (−,+), (−,−)
        u_plus, u_minus = hidden[0] - hidden[2], hidden[1] - hidden[3]
        by_hand = u_plus @ u_minus / np.linalg.norm(u_plus) / np.linalg.norm(u_minus)
        assert row["value"] == pytest.approx(by_hand, abs=1e-12)


def test_log_spaced_checkpoints_resolve_the_peak(tmp_path_factory):
    config, folder = trained(tmp_path_factory, "log40", checkpoints="log:40")
    outcome = gl.sweep("abstraction", folder, progress=False, figures=False, **FAST)
    rows = last_layer_rows(outcome)
    assert 35 <= len(rows) <= 41
    summary = outcome.theory["exact"]
    alpha_max = theory.alpha_max(
        theory.two_factor_kernel(config.input_modes),
        theory.two_factor_kernel(config.target_modes),
        config.gamma,
        config.init_scale,
    )
    assert summary["alpha_max"] == pytest.approx(alpha_max, abs=1e-12)
    assert summary["peak_resolved"] is True
    assert abs(max(r["value"] for r in rows) - alpha_max) < 0.003


def test_evenly_spaced_checkpoints_that_miss_the_peak_are_unresolved(tmp_path_factory):
    _, folder = trained(tmp_path_factory, "coarse", checkpoints="every:1000")
    outcome = gl.sweep("abstraction", folder, progress=False, figures=False, **FAST)
    summary = outcome.theory["exact"]
    assert summary["peak_resolved"] is False
    assert summary["largest_measured_minus_alpha_max"] is None
    assert "not resolve the peak" in summary["peak_note"]


def test_long_run_approaches_alpha_infinity_from_above(tmp_path_factory):
    config, folder = trained(
        tmp_path_factory, "long", learning_rate=0.1, steps=10_000, checkpoints="every:1000"
    )
    outcome = gl.sweep("abstraction", folder, progress=False, figures=False, **FAST)
    rows = last_layer_rows(outcome)
    assert rows[-1]["time"] == pytest.approx(1000.0)
    assert abs(rows[-1]["residual_exact"]) < 1e-3
    terminal = theory.alpha_terminal(
        theory.decompose_2fs(theory.two_factor_kernel(config.input_modes)).nu,
        theory.decompose_2fs(theory.two_factor_kernel(config.target_modes)).nu,
    )
    assert outcome.theory["exact"]["alpha_infinity"] == pytest.approx(terminal, abs=1e-12)
    late = np.array([r["value"] for r in rows[3:]]) - terminal
    assert np.all(late > 0) and np.all(np.diff(late) < 0) and late[-1] < 0.025


def test_depth_four_follows_the_per_layer_law_and_the_depth_clock(tmp_path_factory):
    _, folder = trained(
        tmp_path_factory, "depth4", depth=4, input_modes=(1, 1, 1, 0.6),
        target_modes=(1, 1, 1, 0.2), gamma=10.0, init_scale=0.5, learning_rate=0.02,
        steps=5000, checkpoints="every:250", target_dim=4,
    )  # fmt: skip
    outcome = gl.sweep("abstraction", folder, progress=False, figures=False, **FAST)
    alpha_rows = [r for r in outcome.rows if r["metric"] == "alpha"]
    assert {r["site"] for r in alpha_rows} == {f"module:layers.{i}" for i in range(4)}
    assert max(abs(r["residual_layer_law"]) for r in alpha_rows) < 1e-9
    assert max(abs(r["residual_exact"]) for r in last_layer_rows(outcome, depth=4)) < 0.003


def test_run_json_declares_the_setup(every_ten):
    config, folder, _ = every_ten
    record = gl.series(folder).experiment()
    assert record["theory"]["kappa"] == config.init_scale
    assert record["theory"]["sigma_x"] == pytest.approx(
        theory.two_factor_kernel(config.input_modes), abs=1e-12
    )
    lr_sums = [c["lr_sum"] for c in record["checkpoints"]]
    assert lr_sums == pytest.approx(
        [c["step"] * config.learning_rate for c in record["checkpoints"]]
    )


def test_stages_beside_the_theorys_peak_time_and_plateau(every_ten):
    """At a checkpoint every t = 0.1, the measured α's peak and plateau (α ≥ 0.95) fall
    within a checkpoint or two of the exact theory's (gradient descent's O(lr) gap aside)."""
    from geomlens.cli.dynamics import summary_lines

    _, _, outcome = every_ten
    (entry,) = [e for e in outcome.stages if e["site"] == "module:layers.0"]
    measured, exact = entry["seeds"]["None"], entry["theory"]
    assert measured["peak_time"] == pytest.approx(exact["peak_time"], abs=0.1)
    assert measured["plateau_length"] == pytest.approx(exact["plateau_length"], abs=0.3)
    assert measured["plateau_level"] == exact["plateau_level"] == 0.95
    assert any(line.startswith("stages of alpha at module:layers.0: peak")
               for line in summary_lines(outcome.theory, outcome.rows))  # fmt: skip

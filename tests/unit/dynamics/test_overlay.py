"""The theory levels on planted values: the per-layer artanh law, the attenuation bound, the
exact theory's summary, the trajectory rows."""

from __future__ import annotations

import numpy as np
import pytest

from geomlens.dynamics.overlay import ExactAbstraction, attenuation_bounds, layer_law, site_layer
from geomlens.dynamics.trajectory import across_seeds, build_rows, to_csv
from geomlens.results import Result
from geomlens.theory import abstraction


def test_site_layers():
    assert site_layer("blocks.3.hook_resid_post") == 3
    assert site_layer("module:layers.2") == 2
    assert site_layer("blocks.10.mlp.hook_post") == 10
    assert site_layer("hook_embed") is None


def test_layer_law_goes_through_the_first_and_last_layer():
    # Planted: α^(ℓ) = tanh(artanh 0.2 + ℓ/4 (artanh 0.8 − artanh 0.2)) at layers 0..4.
    ends = np.arctanh([0.2, 0.8])
    planted = {
        f"blocks.{layer}.hook_resid_post": float(np.tanh(ends[0] + layer / 4 * (ends[1] - ends[0])))
        for layer in range(5)
    }
    planted["blocks.2.hook_resid_post"] += 0.05  # one layer off the law
    law = layer_law(planted)
    assert set(law) == {f"blocks.{layer}.hook_resid_post" for layer in (1, 2, 3)}
    assert law["blocks.1.hook_resid_post"] == pytest.approx(
        planted["blocks.1.hook_resid_post"], abs=1e-12
    )
    assert law["blocks.2.hook_resid_post"] == pytest.approx(
        planted["blocks.2.hook_resid_post"] - 0.05, abs=1e-12
    )
    # Each kind of site has its own law; two layers of a kind give none.
    assert layer_law({"blocks.0.hook_resid_post": 0.1, "blocks.1.hook_resid_post": 0.2}) == {}


def test_attenuation_bound_is_alpha_before_the_nonlinearity():
    values = {
        "blocks.1.mlp.hook_pre": 0.4,
        "blocks.1.mlp.hook_post": 0.3,
        "blocks.2.mlp.hook_post": 0.2,
    }
    assert attenuation_bounds(values) == {"blocks.1.mlp.hook_post": 0.4}


def exact_theory(depth=2):
    return ExactAbstraction(
        abstraction.two_factor_kernel([1, 2, 1, 0.5]),
        abstraction.two_factor_kernel([1, 1, 1, 0.2]),
        2.0,
        1e-3,
        depth,
        tuple(f"module:layers.{i}" for i in range(depth)),
        "test",
    )


def test_exact_rows_and_summary():
    theory = exact_theory()
    times = [0.0, 1.0, 2.5, 10.0]
    exact_last = theory.alpha(times)
    per_layer = abstraction.depth_per_layer(theory.alpha_x, exact_last, 2)
    measured = []
    for step, time in enumerate(times):
        metrics = {f"module:layers.{i}.alpha": float(per_layer[step, i + 1]) for i in range(2)}
        result = Result("abstraction", metrics=metrics, provenance={"sites": list(theory.sites)})
        measured.append(
            ({"label": f"step-{step}", "step": step, "time": time, "clock": time}, result)
        )
    rows = build_rows(measured, exact={None: theory})
    assert len(rows) == 8
    assert max(abs(r["residual_exact"]) for r in rows) < 1e-12
    assert max(abs(r["residual_layer_law"]) for r in rows) < 1e-12
    summary = theory.summary(times, exact_last)
    assert summary["alpha_max"] == pytest.approx(
        abstraction.alpha_max(theory.sigma_x, theory.sigma_y, 2.0, 1e-3, 2)
    )
    assert summary["alpha_infinity"] == pytest.approx(
        abstraction.depth_terminal(
            theory.alpha_x, abstraction.decompose_2fs(theory.sigma_y).alpha, 2
        )
    )
    assert summary["clock_ratio"] == pytest.approx(1.0, abs=1e-4)
    # A clock running at half speed is caught by the clock check.
    slow = theory.summary(times, theory.alpha(np.array(times) * 0.8))
    assert slow["clock_ratio"] == pytest.approx(0.8, abs=1e-3)


def test_csv_and_across_seeds():
    rows = [
        {"checkpoint": f"s{seed}", "seed": seed, "step": 0, "time": 0.0, "analysis": "a", "site": "x",
         "task": "", "metric": "m", "value": float(seed), "ci_low": None, "ci_high": None}
        for seed in range(3)
    ]  # fmt: skip
    (summary,) = across_seeds(rows)
    assert summary["mean"] == 1.0 and summary["sd"] == 1.0 and summary["seeds"] == 3
    text = to_csv(rows, ("checkpoint", "value", "ci_low"))
    assert text.splitlines() == ["checkpoint,value,ci_low", "s0,0.0,", "s1,1.0,", "s2,2.0,"]

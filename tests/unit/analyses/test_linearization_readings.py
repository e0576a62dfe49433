"""linearization-effect: a loss worse than a uniform guess is never read as a cost, and the
reading counts the sets that fell as well as those that rose."""

from __future__ import annotations

import math

from geomlens.analyses.linearization_effect.metrics import METRIC_SPECS
from geomlens.analyses.linearization_effect.reading import reading
from geomlens.results import Result


def summary(**fidelity: float) -> Result:
    metrics = {
        "summary.alpha_base": 0.20,
        "summary.alpha_linearized": 0.15,
        "summary.alpha_change": -0.05,
        "summary.alpha_change_ci_low": -0.08,
        "summary.alpha_change_ci_high": 0.01,
        "summary.tasks_alpha_up": 1.0,
        "summary.n_tasks_alpha": 15.0,
        "summary.rows_per_cell": 1.0,
        "summary.ccgp_base": 0.9,
        "summary.ccgp_linearized": 0.8,
        "summary.tasks_ccgp_up_or_equal": 3.0,
        "summary.n_tasks": 15.0,
        **{f"fidelity.{k}": v for k, v in fidelity.items()},
    }
    table = [{"layers": [4], "mode": "identity", "summary_site": "blocks.4.hook_resid_post"}]
    return Result("linearization-effect", metrics=metrics, tables={"linearization": table})


def test_a_loss_above_the_uniform_guess_is_flagged_not_read():
    uniform = math.log(49152)  # 10.8 nats
    result = summary(
        lm_loss_base=13.1, lm_loss_linearized=14.39, lm_loss_change=1.29, lm_loss_uniform=uniform
    )
    text = " ".join(reading(result))
    assert "uniform-guess loss 10.8" in text and "measurement failed" in text
    assert "changes by" not in text
    specs = {spec.name: spec for spec in METRIC_SPECS}
    words = specs["lm_loss_change"].blocked(result, "fidelity.lm_loss_change")
    assert words is not None and "uniform-guess" in words


def test_a_loss_below_the_uniform_guess_is_read_with_its_reference():
    result = summary(
        lm_loss_base=4.65, lm_loss_linearized=8.70, lm_loss_change=4.05, lm_loss_uniform=10.8
    )
    text = " ".join(reading(result))
    assert "changes by 4.05 nats (from 4.65 nats; a uniform guess scores 10.8)" in text
    specs = {spec.name: spec for spec in METRIC_SPECS}
    assert specs["lm_loss_change"].blocked(result, "fidelity.lm_loss_change") is None


def test_the_reading_says_how_many_sets_fell():
    text = " ".join(reading(summary(output_embedding_cosine=0.5)))
    assert "rises in 1 and falls in 14 of 15" in text

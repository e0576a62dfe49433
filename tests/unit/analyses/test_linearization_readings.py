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
    assert "next-token loss on the concept words themselves" in text
    assert "uniform-guess loss of the same predictions (10.8 nats" in text and "not read" in text
    assert "goes from 13.1" not in text
    specs = {spec.name: spec for spec in METRIC_SPECS}
    words = specs["lm_loss_change"].blocked(result, "fidelity.lm_loss_change")
    assert words is not None and "uniform-guess" in words


def test_a_loss_below_the_uniform_guess_is_read_with_its_reference():
    result = summary(
        lm_loss_base=4.65, lm_loss_linearized=8.70, lm_loss_change=4.05, lm_loss_uniform=10.8
    )
    text = " ".join(reading(result))
    assert (
        "goes from 4.65 nats to 8.7 nats (a uniform guess over the vocabulary scores 10.8 nats)"
        in text
    )
    specs = {spec.name: spec for spec in METRIC_SPECS}
    assert specs["lm_loss_change"].blocked(result, "fidelity.lm_loss_change") is None


def test_the_held_out_loss_is_read_when_the_concept_word_loss_is_refused():
    """The section's held-out English loss (4.65 → 8.70 nats, both under its
    own ln V) was hidden behind "the measurement failed" about the concept words' 13.1 nats."""
    result = summary(
        lm_loss_base=13.1, lm_loss_linearized=14.39, lm_loss_change=1.29, lm_loss_uniform=10.8
    )
    result.metrics.update(
        {
            "heldout.lm_loss_base": 4.65,
            "heldout.lm_loss_linearized": 8.70,
            "heldout.lm_loss_change": 4.05,
            "heldout.uniform_loss": 10.8,
            "heldout.vocab_size": 49152.0,
        }
    )
    text = " ".join(reading(result))
    held_out = (
        "on held-out English (paragraphs of the bundled corpus) goes from 4.65 nats to 8.7 nats"
    )
    assert held_out in text
    assert "not read: the model's next-token loss on the concept words themselves" in text
    specs = {spec.name: spec for spec in METRIC_SPECS}
    assert specs["lm_loss_change"].blocked(result, "heldout.lm_loss_change") is None
    assert specs["lm_loss_change"].blocked(result, "fidelity.lm_loss_change") is not None


def test_the_reading_says_how_many_sets_fell_beside_a_resolved_change_only():
    result = summary(output_embedding_cosine=0.5)
    unresolved = " ".join(reading(result))  # its interval, −0.08 to 0.01, includes 0
    assert "rises in" not in unresolved and "not resolved" in unresolved
    result.metrics["summary.alpha_change_ci_high"] = -0.01
    text = " ".join(reading(result))
    assert "rises in 1 and falls in 14 of 15" in text

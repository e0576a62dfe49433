"""The guards a number passes before it is read: each refuses exactly the planted bad values
(an interval over chance, a scale off its range or under its grid, a share or a cosine out of
bounds, a loss worse than guessing, too few pairs) and lets the good ones through."""

from __future__ import annotations

import math

import numpy as np
import pytest

from geomlens.analyses.declaration import Declaration
from geomlens.analyses.registry import ANALYSES, register_declaration
from geomlens.analyses.spec import MetricSpec
from geomlens.analyses.words.guards import (
    AT_CHANCE,
    AT_THE_CEILING,
    a_cosine,
    at_chance,
    below_uniform_loss,
    chance_interval,
    digit_split_years,
    enough,
    is_null,
    profile_grid,
    profile_span,
    resolved_scale,
    within,
)
from geomlens.analyses.words.metric_words import metric_value
from geomlens.results import Result

SITE = "blocks.2.hook_resid_post"


def _result(analysis: str = "planted", **metrics: float) -> Result:
    return Result(
        analysis,
        metrics={f"{SITE}.{k}": v for k, v in metrics.items()},
        provenance={"sites": [SITE]},
    )


def test_an_interval_over_chance_is_at_chance_and_one_beside_it_is_read():
    guard = at_chance(0.5)
    over = _result(p=0.499, p_ci_low=0.47, p_ci_high=0.53)
    beside = _result(p=0.62, p_ci_low=0.55, p_ci_high=0.69)
    assert guard(over, f"{SITE}.p") == AT_CHANCE
    assert guard(beside, f"{SITE}.p") is None


def test_chance_from_a_standard_error_matches_a_binomial_recomputation():
    # 400 coin flips: p̂ = 0.52, se = sqrt(p(1-p)/n); its 95 % interval contains 0.5.
    rng = np.random.default_rng(3)
    flips = rng.random(400) < 0.5
    p = float(flips.mean())
    se = math.sqrt(p * (1 - p) / len(flips))
    result = _result(p=p, p_se=se)
    low, high = chance_interval(result, f"{SITE}.p")
    assert low == pytest.approx(p - 1.959964 * se) and high == pytest.approx(p + 1.959964 * se)
    assert at_chance(0.5)(result, f"{SITE}.p") == AT_CHANCE
    sure = _result(p=0.9, p_se=0.01)
    assert at_chance(0.5)(sure, f"{SITE}.p") is None


@pytest.mark.parametrize(
    ("value", "refused"),
    [(0.5, False), (1.0, False), (0.0, False), (2.18, True), (-0.3, True)],
)
def test_a_share_outside_zero_to_one_is_a_measurement_failure(value, refused):
    words = within(0.0, 1.0, "a share")(_result(share=value), f"{SITE}.share")
    assert (words is not None) == refused
    if refused:
        assert words.startswith("measurement failure") and "not read" in words


def test_a_cosine_offset_below_minus_one_is_refused():
    guard = within(-1.0, 1.0, "a cosine")
    assert guard(_result(offset=-1.35), f"{SITE}.offset") is not None
    assert guard(_result(offset=-0.35), f"{SITE}.offset") is None


def test_a_scale_beyond_the_range_or_under_the_grid_is_unresolved_with_the_range():
    guard = resolved_scale(1500.0, 2000.0, grid=10.0, unit=lambda result: "years")
    beyond = guard(_result(epsilon=2465.0), f"{SITE}.epsilon")
    under = guard(_result(epsilon=1.01), f"{SITE}.epsilon")
    missing = guard(_result(epsilon=math.nan), f"{SITE}.epsilon")
    assert beyond.startswith("unresolved") and "1,500 years to 2,000 years" in beyond
    assert under.startswith("unresolved") and "grid spacing of 10 years" in under
    assert missing.startswith("unresolved")
    assert guard(_result(epsilon=166.0), f"{SITE}.epsilon") is None


def test_a_loss_worse_than_a_uniform_guess_is_refused_against_log_v():
    vocabulary = 49_152.0  # SmolLM2's: log V = 10.80 nats
    guard = below_uniform_loss(vocabulary)
    assert math.log(vocabulary) == pytest.approx(10.8025, abs=1e-3)
    refused = guard(_result(loss=13.1), f"{SITE}.loss")
    assert refused is not None and "10.8 nats" in refused
    assert guard(_result(loss=4.65), f"{SITE}.loss") is None
    bits = below_uniform_loss(vocabulary, unit="bits")  # log2 V = 15.58 bits
    assert bits(_result(loss=15.0), f"{SITE}.loss") is None
    assert bits(_result(loss=16.0), f"{SITE}.loss") is not None


def test_a_statistic_from_too_few_pairs_says_its_count():
    guard = enough("pairs_far", 5, "pairs")
    one = guard(_result(g_far=0.0843, pairs_far=1.0), f"{SITE}.g_far")
    assert one is not None and "only 1 pair" in one
    assert guard(_result(g_far=0.0843, pairs_far=40.0), f"{SITE}.g_far") is None


def test_digit_split_years_are_named_for_a_model_that_splits_them():
    years = Result("resolution", provenance={"data": "Years 1500–2000", "years_digit_tokens": True})
    words = digit_split_years(years)
    assert words is not None and "every 10 years" in words
    assert digit_split_years(Result("resolution", provenance={"data": "Years 1500–2000"})) is None
    assert digit_split_years(Result("resolution", provenance={"data": "colours"})) is None


def test_metric_value_reads_the_guard_of_the_results_own_analysis():
    """Two analyses may both name a metric p: each result is guarded by its own analysis's
    spec, so a guard on one never refuses (or lets through) the other's number."""
    guarded_specs = (MetricSpec("p_guarded", guards=(at_chance(0.5),)),)
    for name, specs in (("guarded-one", guarded_specs), ("plain-one", (MetricSpec("p_guarded"),))):
        register_declaration(
            Declaration(name=name, summary="", analysis="never.imported:Class", metrics=specs)
        )
    metrics = {f"{SITE}.p_guarded": 0.5, f"{SITE}.p_guarded_ci_low": 0.4,
               f"{SITE}.p_guarded_ci_high": 0.6}  # fmt: skip
    guarded = Result("guarded-one", metrics=metrics, provenance={"sites": [SITE]})
    plain = Result("plain-one", metrics=metrics, provenance={"sites": [SITE]})
    assert metric_value(guarded, f"{SITE}.p_guarded") == AT_CHANCE
    assert metric_value(plain, f"{SITE}.p_guarded") == "0.5"
    assert is_null(metric_value(guarded, f"{SITE}.p_guarded"))
    assert not is_null(metric_value(plain, f"{SITE}.p_guarded"))
    for name in ("guarded-one", "plain-one"):
        ANALYSES.remove(name)


def test_the_scale_guard_reads_the_range_and_grid_of_the_measured_profile():
    rows = [{"site": SITE, "distance": d, "mean": 0.0} for d in (10.0, 20.0, 30.0, 500.0)]
    rows.append({"site": "blocks.9.hook_resid_post", "distance": 9000.0, "mean": 0.0})
    result = Result(
        "planted", metrics={f"{SITE}.epsilon": 2465.0}, tables={"g_of_d": rows},
        provenance={"sites": [SITE]},
    )  # fmt: skip
    key = f"{SITE}.epsilon"
    assert profile_span(result, key) == 500.0 and profile_grid(result, key) == 10.0
    guard = resolved_scale(0.0, profile_span, profile_grid)
    assert guard(result, key).startswith("unresolved: outside the range")
    result.metrics[key] = 5.0
    assert guard(result, key).startswith("unresolved: below the grid spacing of 10")
    result.metrics[key] = 166.0
    assert guard(result, key) is None


def test_a_probe_accuracy_within_coin_flips_is_at_chance_and_one_beyond_them_is_read():
    # Two tasks of 100 test predictions: coin flips reach 0.5 ± 1.96·√(2·¼/100)/2 = ± 0.069.
    from geomlens.analyses.words.guards import probe_at_chance, probe_chance_half_width

    splits = [{"site": SITE, "task": t, "accuracy": 0.5, "n_test": 50} for t in "aabb"]
    key = f"{SITE}.ccgp"
    noise = Result("planted", metrics={key: 0.55}, tables={"splits": splits},
                   provenance={"sites": [SITE]})  # fmt: skip
    assert probe_chance_half_width(noise, key) == pytest.approx(0.0693, abs=1e-3)
    assert probe_at_chance()(noise, key).startswith(AT_CHANCE)
    noise.metrics[key] = 0.62
    assert probe_at_chance()(noise, key) is None
    other = [dict(row, condition="linearized", n_test=5) for row in splits]
    noise.tables["splits"] += other  # a condition's own rows give its own (wider) range
    assert probe_at_chance("linearized")(noise, key) is not None
    assert probe_at_chance("base")(noise, key) is None


def test_an_accuracy_read_only_above_chance_refuses_an_interval_below_it():
    below = _result(p=0.4999, p_ci_low=0.49985, p_ci_high=0.49992)
    assert at_chance(0.5)(below, f"{SITE}.p") is None  # two-sided: chance is not inside
    assert at_chance(0.5, above=True)(below, f"{SITE}.p") == AT_CHANCE
    above = _result(p=0.7, p_ci_low=0.6, p_ci_high=0.8)
    assert at_chance(0.5, above=True)(above, f"{SITE}.p") is None


@pytest.mark.parametrize(
    ("value", "low", "high", "words"),
    [
        (0.8, 0.6, 1.1, None),  # inside [−1, 1]: read as a number
        (1.05, 0.83, 1.27, AT_THE_CEILING),  # past 1 by noise: its interval holds 1
        (-1.04, -1.2, -0.9, AT_THE_CEILING),
        (1.3, 1.1, 1.5, "not read"),  # the whole interval past 1: the correction overshoots
        (1.3, math.nan, math.nan, "not read"),  # no interval to say whether by noise
    ],
)
def test_a_cosine_past_one_is_never_a_number(value, low, high, words):
    result = _result(
        alpha_corrected=value, alpha_corrected_ci_low=low, alpha_corrected_ci_high=high
    )
    said = a_cosine(result, f"{SITE}.alpha_corrected")
    if words is None:
        assert said is None
    else:
        assert said.startswith(words) and str(value) not in said, said


def test_a_condition_qualified_cosine_reads_its_own_interval():
    """linearization-effect's ``alpha_corrected_base`` has ``alpha_corrected_ci_low_base``."""
    result = _result(
        alpha_corrected_base=1.035,
        alpha_corrected_ci_low_base=0.9,
        alpha_corrected_ci_high_base=1.2,
    )
    assert a_cosine(result, f"{SITE}.alpha_corrected_base").startswith(AT_THE_CEILING)

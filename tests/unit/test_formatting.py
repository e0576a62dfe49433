"""The report's number and name formatting: thousands separators, no exponent below 10⁶,
units, and identifiers in words."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import geomlens as gl
from geomlens.analyses import registry  # noqa: F401  (the metric specs' words and units)
from geomlens.analyses.words.metric_words import metric_label, metric_value
from geomlens.formatting import distance_unit, duration, human_name, number, quantity

EXPONENT = re.compile(r"\d[eE][+-]?\d")


def _parse(text: str) -> float:
    return float(text.replace(",", "").replace("−", "-"))


def test_numbers_below_a_million_never_use_exponents_and_read_back_to_their_value():
    rng = np.random.default_rng(0)
    values = np.concatenate([10 ** rng.uniform(-4, 6, 2000), -(10 ** rng.uniform(-4, 6, 200))])
    for value in values:
        text = number(value)
        assert not EXPONENT.search(text) and "×" not in text, (value, text)
        # 3 significant digits, or whole units for values of 100 and more
        tolerance = max(abs(value) * 5.01e-3, 0.5 if abs(value) >= 100 else 0.0)
        assert abs(_parse(text) - value) <= tolerance, (value, text)


def test_counts_have_thousands_separators_and_large_values_a_readable_exponent():
    assert number(1506) == "1,506"
    assert number(1506.0) == "1,506"
    assert number(20_000) == "20,000"
    assert number(0.0843) == "0.0843"
    assert number(-0.22) == "-0.22"
    assert number(2.5e7) == "2.5 × 10⁷"
    assert number(float("nan")) == "undefined" and number(None) == "undefined"


def test_quantities_carry_their_unit():
    assert quantity(166.2, "years") == "166 years"
    assert quantity(1, "tokens") == "1 token"
    assert quantity(1506, "tokens") == "1,506 tokens"
    assert duration(330) == "5 min 30 s"
    assert duration(12.34) == "12.3 s"


def test_identifiers_read_as_words():
    assert human_name("random_tokens") == "random tokens"
    assert human_name("replaced_15pct") == "15 % of tokens replaced"
    assert human_name("replaced_5pct") == "5 % of tokens replaced"
    label = metric_label("blocks.3.hook_resid_post.auroc.replaced_15pct")
    assert label == "layer 3, residual stream after the block: AUROC, 15 % of tokens replaced"
    assert metric_label("blocks.0.hook_resid_post.p_similarity").endswith(
        ": similarity accuracy p_S"
    )


@pytest.mark.parametrize(
    ("provenance", "unit"),
    [
        ({"data": "Years 1500–2000 every 10 years in three templates (153 texts)."}, "years"),
        ({"coordinate_unit": "km"}, "km"),
        ({"data_source": "in-memory list of 153 texts"}, ""),
    ],
)
def test_distance_metrics_take_the_stimuli_unit(provenance, unit):
    result = gl.Result(
        "resolution",
        metrics={"blocks.1.hook_resid_post.epsilon": 166.0, "blocks.1.hook_resid_post.alpha": 0.5},
        provenance=provenance,
    )
    assert distance_unit(result) == unit
    assert metric_value(result, "blocks.1.hook_resid_post.epsilon") == f"166 {unit}".strip()
    assert metric_value(result, "blocks.1.hook_resid_post.alpha") == "0.5"
    assert math.isnan(result.metrics.get("missing", math.nan))


def test_g_of_d_band_is_labelled_as_a_spread_and_the_distance_has_its_unit():
    from geomlens.analyses.registry import analysis_class

    rows = [
        {"site": "blocks.0.hook_resid_post", "distance": d, "mean": 1 / (1 + d), "std": 0.1,
         "count": 4}
        for d in (10.0, 20.0, 40.0)
    ]  # fmt: skip
    result = gl.Result(
        "similarity",
        tables={"g_of_d": rows},
        config={"similarity": "centred-cosine"},
        provenance={"data": "Years 1500–2000 every 10 years in three templates (153 texts)."},
    )
    figure = analysis_class("similarity").plot(result)
    axes = figure.axes[0]
    assert axes.get_xlabel() == "stimulus distance d (years)"
    legend = [text.get_text() for text in axes.get_legend().get_texts()]
    assert any("±1 SD of the pair similarities" in t and "not a confidence" in t for t in legend)


def test_a_metric_of_a_pair_of_sites_reads_as_both():
    key = "blocks.1.hook_resid_post~blocks.4.hook_resid_post.cka"
    assert metric_label(key) == (
        "layer 1, residual stream after the block and layer 4, residual stream after the block: cka"
    )

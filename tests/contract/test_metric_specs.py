"""Metric specs: each analysis declares its metrics once (words, unit, headline, format, guards),
and the report's headlines, the number formatting and the guards read them."""

from __future__ import annotations

import geomlens as gl
from geomlens.analyses.registry import builtin_analyses, register_analysis
from geomlens.analyses.spec import MetricSpec
from geomlens.analyses.words.metric_words import metric_name, metric_unit, metric_value
from geomlens.report.readings import headline_names


def test_every_builtin_declares_its_metrics_once_with_headlines():
    for name in builtin_analyses():
        specs = gl.analysis_class(name).metric_specs
        names = [spec.name for spec in specs]
        assert len(names) == len(set(names)), name
        assert any(spec.headline for spec in specs), name
        result = gl.Result(name, metrics={})
        assert headline_names(result) == tuple(s.name for s in specs if s.headline)


def test_words_and_units_come_from_the_specs():
    assert metric_name("epsilon") == "resolution scale ε"
    assert metric_unit("blocks.1.hook_resid_post.pool_size") == "latents"
    assert metric_unit("blocks.1.hook_resid_post.bound") == "bits per token"


def at_chance(result, key):
    """A guard: an accuracy whose interval contains 0.5 is not read as a number."""
    low, high = result.metrics.get(key + "_ci_low"), result.metrics.get(key + "_ci_high")
    return "at chance" if low is not None and low <= 0.5 <= high else None


def test_a_guard_refuses_a_number_and_a_format_writes_it():
    @register_analysis("test-metric-specs-guarded", replace=True)
    class Guarded(gl.analysis_class("activation-stats")):
        metric_specs = (
            MetricSpec("probe_accuracy", "probe accuracy", headline=True, guards=(at_chance,)),
            MetricSpec("share_kept", "share kept", format=lambda v: f"{100 * v:.0f} %"),
        )

    key = "blocks.1.hook_resid_post.probe_accuracy"
    result = gl.Result(Guarded.name, metrics={key: 0.55, key + "_ci_low": 0.45,
                                              key + "_ci_high": 0.65,
                                              "blocks.1.hook_resid_post.share_kept": 0.25})  # fmt: skip
    assert metric_value(result, key) == "at chance"
    result.metrics[key + "_ci_low"] = 0.52
    assert metric_value(result, key) == "0.55"
    assert metric_value(result, "blocks.1.hook_resid_post.share_kept") == "25 %"
    assert metric_name("probe_accuracy") == "probe accuracy"

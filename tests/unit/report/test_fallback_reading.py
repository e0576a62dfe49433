"""The fallback reading (an analysis with no reading of its own) writes each metric in words
with its unit, never its raw snake_case key."""

from __future__ import annotations

import re

from geomlens.report.readings import read
from geomlens.results import Result


def test_the_fallback_reading_names_metrics_in_words_not_keys():
    site = "blocks.1.hook_resid_post"
    result = Result(
        "an-analysis-not-installed",
        metrics={f"{site}.mean_norm": 3.5, f"{site}.some_score_ci_low": 0.25},
        provenance={"sites": [site]},
    )
    (paragraph,) = read(result)
    assert "mean token norm = 3.5" in paragraph, paragraph
    assert not re.search(r"\b(mean_norm|some_score)", paragraph), paragraph

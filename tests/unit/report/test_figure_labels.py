"""The figures' words: every legend names sites in words (never a hook name), every axis names
the quantity drawn, the ±1 SD band is labelled wherever it is drawn, and the choice accuracy
has its chance line. Read from the saved quick report (tests/fixtures), drawing no model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from geomlens.analyses.registry import analysis_class
from geomlens.analyses.similarity.analysis import BAND_LABEL
from geomlens.results import Result

SAVED = Path(__file__).parents[2] / "fixtures" / "report-quick" / "results.json"
HOOK = re.compile(r"blocks\.\d+|hook_")


def _results() -> dict[str, Result]:
    saved = json.loads(SAVED.read_text(encoding="utf-8"))
    found = {name: Result.from_dict(r) for name, r in saved["results"].items()}
    section = saved.get("causal_lm", {}).get("results", {})
    found.update({f"causal-lm/{name}": Result.from_dict(r) for name, r in section.items()})
    return found


CASES = ["similarity", "resolution", "causal-lm/similarity", "causal-lm/resolution"]


@pytest.mark.parametrize("name", CASES)
def test_legends_and_axes_name_what_is_drawn(name):
    import matplotlib.pyplot as plt

    result = _results()[name]
    figure = analysis_class(result.analysis).plot(result)
    try:
        for axes in figure.axes:
            legend = axes.get_legend()
            labels = [t.get_text() for t in legend.get_texts()] if legend else []
            assert not [label for label in labels if HOOK.search(label)], labels
            assert axes.get_ylabel() and axes.get_xlabel(), (name, axes.get_title())
        profile = figure.axes[0]
        labels = [t.get_text() for t in profile.get_legend().get_texts()]
        assert BAND_LABEL in labels, labels
        if "choice_accuracy" in result.tables:
            assert "cosine" not in profile.get_ylabel().replace("not a cosine", "")
            choices = figure.axes[1]
            labels = [t.get_text() for t in choices.get_legend().get_texts()]
            assert "chance, 1/n" in labels
            ticks = [tick for tick in choices.get_xticks()]
            assert all(float(t).is_integer() for t in ticks), ticks
    finally:
        plt.close(figure)

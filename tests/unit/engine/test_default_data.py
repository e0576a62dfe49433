"""``gl.run(name, model)`` without data runs the analysis on its own shipped data, as
``geomlens run NAME`` does; several analyses without data are refused (each has its own)."""

from __future__ import annotations

import pytest
from helpers.tiny_models import tiny_gpt2

import geomlens as gl
from geomlens.analyses.activation_stats import ActivationStats


class FewTexts(ActivationStats):
    """activation-stats whose own data is three planted texts (so the test knows the count)."""

    def default_data(self, adapter):
        return ["the first text", "a second one", "and a third"]


@pytest.fixture(scope="module")
def adapter():
    model, tokenizer = tiny_gpt2()
    return gl.attach(model, tokenizer=tokenizer)


def test_one_analysis_without_data_runs_on_its_own_data(adapter):
    result = gl.run(FewTexts(), adapter, progress=False)
    assert result.provenance["num_examples"] == 3
    given = gl.run(FewTexts(), adapter, FewTexts().default_data(adapter), progress=False)
    assert result.metrics == given.metrics


def test_several_analyses_without_data_are_refused(adapter):
    with pytest.raises(ValueError, match="own default data"):
        gl.run([FewTexts(), "similarity"], adapter, progress=False)

"""Every analysis, built-in or installed plugin, against every named check of the contract
(``geomlens.testing.CHECKS``: merge, merge of three parts, merge with an empty instance, merge
leaves the other, merge checks the config, finalize twice, state, no batch tensor kept, no host read per batch, NaN at
padding ignored, fault leaves the model clean, resume, two processes, deterministic, JSON,
figure from the JSON copy, cross-backend), each on the analysis's own example and the tiny GPT-2.
A check that cannot run skips with its reason; an analysis without an example skips them all."""

from __future__ import annotations

import math

import pytest
from helpers.tiny_models import tiny_gpt2

import geomlens as gl
from geomlens.analyses.registry import builtin_analyses, list_analyses
from geomlens.testing import parametrize_with_checks, run_check


@pytest.fixture(scope="module")
def adapter():
    model, tokenizer = tiny_gpt2()
    return gl.attach(model, backend="nnsight", tokenizer=tokenizer)


@pytest.fixture(scope="module")
def other_backends():
    model, tokenizer = tiny_gpt2()
    return {"transformer-lens": gl.attach(model, tokenizer=tokenizer, backend="transformer-lens")}


@parametrize_with_checks(list_analyses())
def test_the_analysis_keeps_the_contract(analysis, check, adapter, request):
    others = request.getfixturevalue("other_backends") if check.name == "cross-backend" else None
    run_check(analysis, check, adapter, others)


@pytest.mark.parametrize("name", builtin_analyses())
def test_undefined_interval_ends_read_back_from_json_still_plot(name, adapter):
    """An interval end that is NaN (null in the JSON copy, None once read back) leaves a gap in
    the figure, never a TypeError: the report draws every figure from the JSON copy."""
    cls = gl.analysis_class(name)
    result = gl.run(name, adapter, cls.example.rows(), **cls.example.run_options())
    for rows in result.tables.values():
        for row in rows:
            for key, value in row.items():
                if "_ci_" in key and isinstance(value, float):
                    row[key] = math.nan
    loaded = gl.Result.from_json(result.to_json())
    figure = cls.plot(loaded)
    assert figure.axes

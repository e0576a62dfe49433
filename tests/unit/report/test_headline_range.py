"""Every headline names the stimulus range it holds for, and a scale that grows with the range
reads as such: in the command line's summary, the report's summary line and its headline
table. Planted similarities on the years 1901–2000 (no model): exp(−d/3) has one scale,
(1 + d)^−0.3 none (its half-width follows the range)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from helpers.planted_kernels import gram_vectors, run_planted
from helpers.planted_reports import planted_report

import geomlens as gl
from geomlens.cli.run import _print_run_summary
from geomlens.report.outcome import Outcome
from geomlens.report.page import headline_table, write_report
from geomlens.report.page_check import problems
from geomlens.report.readings import headline

SITE = "blocks.0.hook_resid_post"
YEARS = np.arange(1901.0, 2001.0)
OVER = "over 1901–2000"
GROWS = "grows with the range: no single scale over 1901–2000"


def _planted(kind: str, analysis: str = "resolution") -> gl.Result:
    d = np.abs(np.subtract.outer(YEARS, YEARS))
    gram = np.exp(-d / 3) if kind == "laplace" else (1 + d) ** -0.3
    if analysis != "resolution":
        return gl.run(analysis, {SITE: gram_vectors(gram)}, {"coordinate": YEARS}, progress=False)
    return run_planted(gram_vectors(gram), YEARS, site=SITE, similarity="centred-cosine")


@pytest.fixture(scope="module")
def results() -> dict[str, gl.Result]:
    return {kind: _planted(kind) for kind in ("laplace", "power")}


def test_the_planted_scales_are_what_the_words_say(results):
    assert results["laplace"][f"{SITE}.scale_depends_on_range"] == 0
    assert results["power"][f"{SITE}.scale_depends_on_range"] == 1
    for result in results.values():  # the range, as metrics of the site
        assert result[f"{SITE}.coordinate_low"] == 1901
        assert result[f"{SITE}.coordinate_high"] == 2000


@pytest.mark.parametrize("kind", ["laplace", "power"])
def test_the_summary_line_names_the_range_and_a_range_dependent_scale(results, kind):
    line = headline(results[kind])
    assert f"at layer 0, residual stream after the block, {OVER}" in line
    assert "1,901" not in line  # a year is written as a year
    assert (GROWS in line) == (kind == "power")


@pytest.mark.parametrize("kind", ["laplace", "power"])
def test_the_command_line_names_the_range_and_a_range_dependent_scale(
    results, kind, capsys, tmp_path
):
    result = results[kind]
    result.provenance.setdefault("data_source", "planted years")
    result.provenance.setdefault("num_examples", len(YEARS))
    _print_run_summary(result, None, tmp_path / "r.json", used_default_data=False)
    printed = capsys.readouterr().out
    assert f"measured {OVER}: every number below holds for that range" in printed
    row = next(ln for ln in printed.splitlines() if ln.strip().startswith("layer 0"))
    assert (GROWS in row) == (kind == "power")
    if kind == "laplace":
        assert "no: the central half and quarter of the range give the same" in row


def test_the_page_names_the_range_in_its_summary_and_headline_table(results, tmp_path):
    for kind, result in results.items():
        folder = tmp_path / kind
        outcome = Outcome("resolution", result=result, rows=len(YEARS), full_rows=len(YEARS))
        report = planted_report(folder, [outcome])
        write_report(report)
        page = Path(report.index).read_text(encoding="utf-8")
        caption = re.search(r"<caption>(.*?)</caption>", page, re.S)
        assert caption is not None and OVER in caption.group(1)
        summary = re.search(r'<table id="summary">(.*?)</table>', page, re.S)
        assert summary is not None and OVER in summary.group(1)
        assert (GROWS in summary.group(1)) == (kind == "power")
        cell = re.search(r'data-metric="scale_depends_on_range">(.*?)</td>', page, re.S)
        assert cell is not None and (cell.group(1) == GROWS) == (kind == "power")
        assert not problems(page), [str(p) for p in problems(page)]


def test_rows_over_different_ranges_each_name_their_own(results):
    result = results["power"]
    other = "blocks.1.hook_resid_post"
    metrics = dict(result.metrics)
    for key, value in result.metrics.items():
        if key.startswith(SITE + "."):
            metrics[other + key[len(SITE) :]] = value
    metrics[f"{other}.coordinate_low"] = 1951.0
    two = gl.Result("resolution", metrics=metrics, provenance={"sites": [SITE, other]})
    table = headline_table(two)
    assert table is not None and table["range"] == ""
    labels = [row["label"] for row in table["rows"]]
    assert labels[0].endswith(OVER) and labels[1].endswith("over 1951–2000")


def test_the_similarity_analysis_names_its_range_too():
    result = _planted("laplace", analysis="similarity")
    assert OVER in headline(result)
    table = headline_table(result)
    assert table is not None and table["range"] == OVER
    assert OVER in result.plot().get_suptitle()  # the figure too


def test_the_resolution_figure_names_the_range(results):
    figure = results["power"].plot()
    assert OVER in figure.axes[0].get_title()

"""A figure that fails is a failure: the page's status says so and names it, the command exits
non-zero; a report whose figures all drew says "ok". Built from planted outcomes, no model."""

from __future__ import annotations

import json
import re

import pytest
from helpers.planted_reports import planted_report
from typer.testing import CliRunner

import geomlens as gl
from geomlens.analyses.registry import ANALYSES
from geomlens.cli import app
from geomlens.report import figures
from geomlens.report.outcome import Outcome, Report
from geomlens.report.page import write_report

SITE = "blocks.0.hook_resid_post"


def _planted(name: str, plot_fails: bool) -> type:
    class Planted(gl.Analysis):
        """A planted analysis for the report's page."""

        def update(self, batch):
            pass

        def merge(self, other):
            pass

        def finalize(self):
            return gl.Result(self.name)

        @classmethod
        def plot(cls, result, **kwargs):
            if plot_fails:
                raise RuntimeError("planted plot failure")
            from matplotlib.figure import Figure

            figure = Figure()
            figure.subplots().plot([0, 1], [result.metrics[f"{SITE}.value"]] * 2)
            return figure

    return gl.register_analysis(name)(Planted)


@pytest.fixture
def planted():
    _planted("test-page-plot-fails", plot_fails=True)
    _planted("test-page-plot-draws", plot_fails=False)
    yield
    for name in ("test-page-plot-fails", "test-page-plot-draws"):
        ANALYSES.remove(name)


def _report(folder, names) -> Report:
    outcomes = [
        Outcome(name, result=gl.Result(name, metrics={f"{SITE}.value": 0.25}), rows=4, full_rows=4)
        for name in names
    ]
    return planted_report(folder, outcomes)


def _status(page: str) -> str:
    return re.search(r'id="status" data-status="(\w+)"', page).group(1)


def test_a_planted_plot_failure_fails_the_page_and_names_the_figure(planted, tmp_path):
    report = _report(tmp_path, ["test-page-plot-draws", "test-page-plot-fails"])
    write_report(report)
    page = report.index.read_text()
    assert _status(page) == "failed"
    assert "Its figure could not be drawn: RuntimeError: planted plot failure" in page
    assert [o.name for o in report.failed] == ["test-page-plot-fails"]
    assert any("planted plot failure" in line for line in report.problems)
    assert (tmp_path / "test-page-plot-draws.png").is_file()
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["status"] == "failed" and "test-page-plot-fails" in saved["figure_errors"]


def test_a_report_whose_figures_all_drew_is_ok(planted, tmp_path):
    report = _report(tmp_path, ["test-page-plot-draws"])
    write_report(report)
    page = report.index.read_text()
    assert _status(page) == "ok" and not report.problems
    assert "could not be drawn" not in page


def test_a_failing_theory_figure_fails_the_report(planted, tmp_path, monkeypatch):
    def broken(results, path):
        raise ValueError("planted theory failure")

    monkeypatch.setattr(figures, "THEORY_FIGURES", (("theory-resolution.png", broken),))
    report = _report(tmp_path, ["test-page-plot-draws"])
    write_report(report)
    page = report.index.read_text()
    assert _status(page) == "failed"
    assert "This figure could not be drawn: ValueError: planted theory failure" in page
    assert report.problems == [
        "theory figure 'Semantic resolution against the universal front': "
        "ValueError: planted theory failure"
    ]


def test_the_command_exits_non_zero_when_a_figure_failed(planted, tmp_path, monkeypatch):
    import geomlens.report.runner as runner

    def build(*args, **kwargs):
        report = _report(tmp_path, ["test-page-plot-draws", "test-page-plot-fails"])
        write_report(report)
        return report

    monkeypatch.setattr(runner, "build_report", build)
    ran = CliRunner().invoke(app, ["report", "--quick", "--out", str(tmp_path)])
    assert ran.exit_code == 1, ran.output
    assert re.search(r"test-page-plot-fails\s+FAILED", ran.output)
    assert "planted plot failure" in ran.output

"""``geomlens report``: every built-in analysis on its shipped data, as one readable web page.

    from geomlens.report import build_report
    report = build_report(quick=True, out="report")   # bundled MiniLM; report/index.html
    report.results["activation-stats"].metrics

See docs/report.md for what the page holds and how to read it.
"""

from geomlens.report.outcome import Outcome, Report
from geomlens.report.runner import build_report, run_analyses

__all__ = ["Outcome", "Report", "build_report", "run_analyses"]

"""benchmarks/bench_report.py: the report's wall time, CPU time and peak memory as a user runs
it, read from /usr/bin/time -v of a child process."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from helpers.paths import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import bench_report  # noqa: E402

TIME_OUTPUT = """\tCommand being timed: "python -m geomlens report"
\tUser time (seconds): 101.25
\tSystem time (seconds): 7.50
\tMaximum resident set size (kbytes): 2048000
\tExit status: 0
"""


def test_the_figures_are_read_from_time_v():
    figures = bench_report.parse_time_output(TIME_OUTPUT)
    assert figures == {
        "peak_rss_bytes": 2048000 * 1024,
        "user_cpu_seconds": 101.25,
        "system_cpu_seconds": 7.5,
    }
    with pytest.raises(ValueError, match="Maximum resident set size"):
        bench_report.parse_time_output(TIME_OUTPUT.replace("Maximum resident", "Largest"))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("time") is None, reason="needs /usr/bin/time (Debian's time)")
def test_a_small_report_is_measured(tmp_path):
    out = tmp_path / "report.json"
    bench_report.main(["--name", "smoke", "--out", str(out), "--report-folder",
                       str(tmp_path / "report"), "--", "--quick", "--analysis",
                       "activation-stats", "--causal-lm", "none"])  # fmt: skip
    numbers = json.loads(out.read_text())
    assert (tmp_path / "report" / "index.html").is_file()
    # A process that loaded torch and a model holds more than 100 MB, and used CPU to do it.
    assert numbers["peak_rss_bytes"] > 100e6
    assert numbers["cpu_seconds"] > 0 and numbers["wall_seconds"] > 0
    assert numbers["command"][:2] == ["geomlens", "report"]

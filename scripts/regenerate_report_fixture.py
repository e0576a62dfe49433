"""Regenerate the saved report the tests render and check (tests/fixtures/report-*/results.json).

A real run of ``geomlens report`` (the full default report, about 35 min on two CPU cores, or
``--quick``, about 6 min), whose ``results.json`` is copied into the tests' fixtures. The tests
(tests/e2e/test_report_from.py) re-render it with ``geomlens report --from`` (no model loaded)
and read every sentence of the page with the page checker (geomlens.report.page_check), so the
page of a full run is checked on every test run, not only the quick one.

    python scripts/regenerate_report_fixture.py            # the full default report
    python scripts/regenerate_report_fixture.py --quick    # the quick one

The per-analysis JSON files, the figures and the page are not kept: ``--from`` draws them
again from ``results.json``. The run's standard error is kept as ``progress.log`` (the tests
read its progress lines: a plan, a line before SAE training, counts within fixed targets).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the quick report (a first look)")
    args = parser.parse_args(argv)
    name = "report-quick" if args.quick else "report-default"
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / name
        command = [sys.executable, "-m", "geomlens", "report", "--out", str(out)]
        command += ["--quick"] if args.quick else []
        log = Path(scratch) / "progress.log"
        returncode = _run_recording_stderr(command, log)
        if returncode != 0:
            print(f"geomlens report failed (exit {returncode}); the fixture is unchanged")
            return returncode
        target = FIXTURES / name
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out / "results.json", target / "results.json")
        # The run's progress lines, read by tests/e2e/test_report_from.py for what they promise.
        shutil.copyfile(log, target / "progress.log")
    print(f"wrote {target / 'results.json'}")
    return 0


def _run_recording_stderr(command: list[str], log: Path) -> int:
    """Run ``command``, showing its standard error and saving a copy of it to ``log``."""
    with log.open("wb") as copy, subprocess.Popen(command, stderr=subprocess.PIPE) as process:
        assert process.stderr is not None
        for chunk in iter(lambda: process.stderr.read1(4096), b""):  # type: ignore[union-attr]
            sys.stderr.buffer.write(chunk)
            sys.stderr.buffer.flush()
            copy.write(chunk)
    return process.returncode


if __name__ == "__main__":
    raise SystemExit(main())

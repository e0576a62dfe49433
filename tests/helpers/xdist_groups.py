"""Names of the pytest-xdist groups (pyproject runs the suite with ``--dist loadgroup``): tests
marked ``xdist_group(NAME)`` run on one worker, so a fixture they share is built once."""

#: Tests that read the ``quick_report_run`` fixture (tests/conftest.py): the README's
#: ``geomlens report`` command and tests/e2e/test_report.py.
QUICK_REPORT = "quick_report"

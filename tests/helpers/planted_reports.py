"""A report of planted outcomes, to write a page with no model."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def planted_report(folder: Path, outcomes: list[Any]) -> Any:
    """A :class:`~geomlens.report.outcome.Report` of ``outcomes`` with the provenance a page
    needs (a quick run of a model named "planted")."""
    from geomlens.report.outcome import Report

    provenance = {
        "model": {"model_id": "planted"},
        "quick": True,
        "passes": [],
        "run_seconds": 1.0,
        "started_utc": "2026-01-01T00:00:00+00:00",
    }
    return Report(folder, outcomes, provenance)

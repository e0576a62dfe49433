"""Writing a report: the JSON files, the figures and the page, each written atomically.

The page is rendered by Jinja2 from ``templates/index.html.j2`` (autoescaped), with no
external resources, so it opens offline from the file system in any browser.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geomlens.analyses.catalog import analysis_class
from geomlens.report import figures, readings
from geomlens.results import atomic_write_text

if TYPE_CHECKING:
    from geomlens.report.outcome import Report

#: Metrics listed under each figure (the rest are in the analysis's JSON file).
METRICS_SHOWN = 12


def _environment():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader(__package__, "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _section(outcome: Any, folder: Any) -> dict[str, Any]:
    section: dict[str, Any] = {
        "name": outcome.name,
        "error": outcome.error,
        "rows": outcome.rows,
        "full_rows": outcome.full_rows,
        "seconds": round(outcome.seconds, 1),
        "figure": None,
        "figure_error": None,
        "reading": [],
        "metrics": [],
        "more_metrics": 0,
        "json": None,
        "summary": "",
    }
    if outcome.result is None:
        return section
    result = outcome.result
    cls = analysis_class(outcome.name)
    json_name = f"{outcome.name}.json"
    result.to_json(folder / json_name)
    section["json"] = json_name
    try:
        drawn = figures.analysis_figure(cls, result, folder / f"{outcome.name}.png")
        section["figure"] = drawn.name if drawn is not None else None
    except Exception as error:  # a broken plot must not lose the numbers
        section["figure_error"] = f"{type(error).__name__}: {error}"
    section["reading"] = readings.read(result, cls)
    section["summary"] = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
    shown = list(result.metrics.items())
    section["metrics"] = [(k, readings.number(v, 4)) for k, v in shown[:METRICS_SHOWN]]
    section["more_metrics"] = max(0, len(shown) - METRICS_SHOWN)
    return section


#: The files the last report written into a folder consists of (hidden, beside them).
MANIFEST = ".geomlens-report-files.json"


def _inodes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_ino for p in folder.iterdir() if p.is_file()}


def _remove_previous_run(folder: Path, before: dict[str, int]) -> list[str]:
    """A report folder holds one run: delete what the previous report wrote and this one did
    not (its per-analysis JSON and figures), record this run's files, return them."""
    after = _inodes(folder)
    written = sorted(n for n, inode in after.items() if before.get(n) != inode and n != MANIFEST)
    try:
        previous = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        previous = []
    for name in previous if isinstance(previous, list) else []:
        if isinstance(name, str) and name not in written and "/" not in name:
            (folder / name).unlink(missing_ok=True)
    atomic_write_text(folder / MANIFEST, json.dumps(written) + "\n")
    return written


def write_report(report: Report) -> None:
    """Write ``report.folder``: per-analysis JSON and figures, results.json, index.html. Files
    an earlier report left in the folder that this one does not rewrite are removed."""
    folder = report.folder
    folder.mkdir(parents=True, exist_ok=True)
    before = _inodes(folder)
    sections = [_section(outcome, folder) for outcome in report.outcomes]
    theory = figures.theory_figures(report.results, folder)
    everything = {
        "provenance": report.provenance,
        "results": {name: result.to_dict() for name, result in report.results.items()},
        "errors": {o.name: o.error for o in report.failed},
    }
    atomic_write_text(folder / "results.json", json.dumps(everything, indent=2, default=str) + "\n")
    page = (
        _environment()
        .get_template("index.html.j2")
        .render(
            model_id=report.provenance["model"].get("model_id", "model"),
            sections=sections,
            theory=theory,
            provenance=json.dumps(report.provenance, indent=2, default=str),
            quick=report.provenance["quick"],
            passes=report.provenance["passes"],
            run_seconds=report.provenance["run_seconds"],
            started=report.provenance["started_utc"],
        )
    )
    atomic_write_text(folder / "index.html", page)
    _remove_previous_run(folder, before)
    report.files = sorted(p for p in folder.iterdir() if not p.name.startswith("."))

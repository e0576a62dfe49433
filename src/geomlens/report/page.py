"""Writing a report: the JSON files, the figures and the page, each written atomically.

The page is rendered by Jinja2 from ``templates/index.html.j2`` (autoescaped), with no
external resources, so it opens offline from the file system in any browser.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geomlens.registry import analysis_class
from geomlens.report import figures, readings
from geomlens.report.causal_lm import SECTION_FOLDER, CausalLMSection
from geomlens.results import atomic_write_text

if TYPE_CHECKING:
    from geomlens.report.runner import Report

#: Metrics listed under each figure (the rest are in the analysis's JSON file).
METRICS_SHOWN = 12


def _environment():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("geomlens.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _section(outcome: Any, folder: Any, prefix: str = "") -> dict[str, Any]:
    """One analysis's part of the page, its JSON and figure written in ``folder``; ``prefix``:
    that folder relative to the page, and the anchor prefix of the section's id."""
    section: dict[str, Any] = {
        "name": outcome.name,
        "anchor": prefix.replace("/", "-") + outcome.name,
        "claim": "",  # the causal-LM section's sentence on what the analysis measures
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
    section["json"] = prefix + json_name
    try:
        drawn = figures.analysis_figure(cls, result, folder / f"{outcome.name}.png")
        section["figure"] = prefix + drawn.name if drawn is not None else None
    except Exception as error:  # a broken plot must not lose the numbers
        section["figure_error"] = f"{type(error).__name__}: {error}"
    section["reading"] = readings.read(result, cls)
    section["summary"] = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
    shown = list(result.metrics.items())
    section["metrics"] = [(k, readings.number(v, 4)) for k, v in shown[:METRICS_SHOWN]]
    section["more_metrics"] = max(0, len(shown) - METRICS_SHOWN)
    return section


def _causal_lm_part(section: CausalLMSection, folder: Path) -> dict[str, Any]:
    """The causal-LM section's part of the page; its files go to ``folder/causal-lm/``."""
    sub = folder / SECTION_FOLDER
    sub.mkdir(parents=True, exist_ok=True)
    prefix = f"{SECTION_FOLDER}/"
    claims = section.claims()
    analyses = []
    for outcome in section.outcomes:
        part = _section(outcome, sub, prefix)
        part["claim"] = claims.get(outcome.name, "")
        analyses.append(part)
    theory = figures.theory_figures(section.results, sub)
    for figure in theory:
        figure.file = prefix + figure.file
    model = section.provenance.get("model", {})
    return {
        "model": section.model,
        "model_id": model.get("model_id", section.model),
        "source": model.get("model_source"),
        "unavailable": section.unavailable,
        "sections": analyses,
        "theory": theory,
        "run_seconds": section.provenance.get("run_seconds"),
    }


def write_report(report: Report) -> None:
    """Write ``report.folder``: per-analysis JSON and figures, results.json, index.html."""
    folder = report.folder
    folder.mkdir(parents=True, exist_ok=True)
    sections = [_section(outcome, folder) for outcome in report.outcomes]
    theory = figures.theory_figures(report.results, folder)
    causal_lm = _causal_lm_part(report.causal_lm, folder) if report.causal_lm else None
    everything = {
        "provenance": report.provenance,
        "results": {name: result.to_dict() for name, result in report.results.items()},
        "errors": {o.name: o.error for o in report.outcomes if o.error is not None},
    }
    if report.causal_lm is not None:
        section = report.causal_lm
        everything["causal_lm"] = {
            "model": section.model,
            "unavailable": section.unavailable,
            "results": {name: result.to_dict() for name, result in section.results.items()},
            "errors": {o.name: o.error for o in section.failed},
        }
    atomic_write_text(folder / "results.json", json.dumps(everything, indent=2, default=str) + "\n")
    page = (
        _environment()
        .get_template("index.html.j2")
        .render(
            model_id=report.provenance["model"].get("model_id", "model"),
            sections=sections,
            theory=theory,
            causal_lm=causal_lm,
            provenance=json.dumps(report.provenance, indent=2, default=str),
            quick=report.provenance["quick"],
            passes=report.provenance["passes"],
            run_seconds=report.provenance["run_seconds"],
            started=report.provenance["started_utc"],
        )
    )
    atomic_write_text(folder / "index.html", page)
    report.files = sorted(p for p in folder.iterdir() if not p.name.startswith("."))

"""Writing a report: the JSON files, the figures and the page, each written atomically.

The page is rendered by Jinja2 from ``templates/index.html.j2`` (autoescaped), with no
external resources, so it opens offline from the file system in any browser.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geomlens.analyses.registry import analysis_class
from geomlens.analyses.words.metric_words import (
    metric_label,
    metric_name,
    metric_unit,
    metric_value,
    shared_stimulus_range,
    stimulus_range,
)
from geomlens.formatting import duration, layer_label
from geomlens.report import figures, readings
from geomlens.report.causal_lm import SECTION_FOLDER, CausalLMSection
from geomlens.report.folder import publish, start_staging
from geomlens.results import atomic_write_text

if TYPE_CHECKING:
    from geomlens.report.outcome import Report


def _environment():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader(__package__, "templates"),
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
        "headline": "",
        "table": None,
        "metrics": [],
        "json": None,
        "summary": "",
        "cost": duration(outcome.seconds),
        "cost_detail": "",
        "status": "failed" if outcome.error else "ok",
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
    except Exception as error:  # a broken plot must not lose the numbers, nor pass as "ok"
        section["figure_error"] = f"{type(error).__name__}: {error}"
        outcome.figure_error = section["figure_error"]
        section["status"] = "figure failed"
    section["reading"] = readings.read(result, cls)
    declared = readings.declaration_of(result)
    section["summary"] = declared.summary if declared is not None else ""
    section["headline"] = readings.headline(result)
    section["table"] = headline_table(result)
    sites = readings.result_sites(result)  # once: it reads every metric name
    section["metrics"] = [
        (metric_label(key, sites), metric_value(result, key, 4)) for key in result.metrics
    ]
    section["cost_detail"] = cost_detail(result.provenance or {})
    return section


def cell_text(result: Any, key: str) -> str:
    """A headline cell: the number (its unit is in the column's header), or, when a guard of
    its metric spec refuses it, the guard's words instead (never the number as a finding)."""
    return metric_value(result, key, 3, unit=False)


def headline_table(result: Any) -> dict[str, Any] | None:
    """The analysis's headline metrics for every site: one row per site, one column per metric
    (its unit in the header), and the metrics of no site (``summary.*``) apart. ``range``:
    "over 1901–2000", the stimulus range every row holds for (:func:`stimulus_range`), when
    the rows share one; rows over different ranges name their own in their labels."""
    sites = readings.result_sites(result)
    names = readings.headline_metrics(result)
    if not sites or not names:
        return None
    columns = []
    for name in names:
        unit = metric_unit(f"{sites[0]}.{name}", result, sites)
        label = metric_name(name)
        columns.append({"name": name, "label": f"{label} ({unit})" if unit else label})
    rows: list[dict[str, Any]] = []
    for site in sites:
        cells = [
            {"name": name, "text": cell_text(result, f"{site}.{name}")}
            if f"{site}.{name}" in result.metrics
            else {"name": name, "text": ""}
            for name in names
        ]
        rows.append({"site": site, "label": layer_label(site), "cells": cells})
    only = shared_stimulus_range(result, sites)
    for row in rows if only is None else ():  # each row says its own range
        span = stimulus_range(result, row["site"])
        if span:
            row["label"] = f"{row['label']}, over {span}"
    prefixes = tuple(site + "." for site in sites)
    other = [
        (metric_label(key, sites), metric_value(result, key))
        for key in result.metrics
        if not key.startswith(prefixes)
    ]
    return {
        "columns": columns,
        "rows": rows,
        "other": other,
        "range": f"over {only}" if only else "",
    }


def cost_detail(provenance: dict[str, Any]) -> str:
    """What an analysis's cost is made of, in words (see geomlens.engine.analysis_cost)."""
    if "cost_seconds" not in provenance:
        return ""
    fused = len(provenance.get("fused_with") or [None])
    shared = (
        f"an equal share of the {duration(provenance['shared_pass_seconds'])} pass shared by "
        f"{fused} analyses"
        if fused > 1
        else f"the pass, {duration(provenance['shared_pass_seconds'])}"
    )
    setup = provenance.get("setup_seconds", 0.0)
    if setup >= 0.05:  # e.g. sae-features training or loading its SAE
        shared += f", its setup ({duration(setup)}: e.g. training or loading an SAE)"
    return (
        f"{duration(provenance['cost_seconds'])}: {shared}, plus its own work in the pass "
        f"({duration(provenance['update_seconds'])}, any second forward pass included) and after "
        f"it ({duration(provenance['finalize_seconds'])}: fits, bootstraps, shuffles, probes)"
    )


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
        "quick_note": section.quick_note,
        "sections": analyses,
        "theory": theory,
        "run_seconds": (
            duration(section.provenance["run_seconds"])
            if "run_seconds" in section.provenance
            else None
        ),
    }


def write_report(report: Report) -> None:
    """Write ``report.folder``: per-analysis JSON and figures, results.json, index.html. The
    files are written into a staging folder and moved into place; files an earlier report
    wrote there that this one does not rewrite are removed, and nothing else is touched
    (:mod:`geomlens.report.folder`)."""
    target = report.folder
    folder = start_staging(target)
    drawing_started = time.perf_counter()
    sections = [_section(outcome, folder) for outcome in report.outcomes]
    theory = figures.theory_figures(report.results, folder)
    causal_lm = _causal_lm_part(report.causal_lm, folder) if report.causal_lm else None
    report.theory_errors = [(f.title, f.error) for f in theory if f.error] + [
        (f"{f.title} ({report.causal_lm.model})", f.error)
        for f in (causal_lm or {}).get("theory", [])
        if f.error and report.causal_lm is not None
    ]
    report.provenance.setdefault("phase_seconds", {})["drawing"] = round(
        time.perf_counter() - drawing_started, 2
    )
    everything = {
        "provenance": report.provenance,
        "results": {name: result.to_dict() for name, result in report.results.items()},
        "errors": {o.name: o.error for o in report.outcomes if o.error is not None},
        "figure_errors": {o.name: o.figure_error for o in report.outcomes if o.figure_error},
        "status": "failed" if report.problems else "ok",
    }
    if report.causal_lm is not None:
        section = report.causal_lm
        everything["causal_lm"] = {
            "model": section.model,
            "unavailable": section.unavailable,
            "results": {name: result.to_dict() for name, result in section.results.items()},
            "errors": {o.name: o.error for o in section.failed if o.error is not None},
            "figure_errors": {o.name: o.figure_error for o in section.failed if o.figure_error},
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
            run_seconds=duration(report.provenance["run_seconds"]),
            started=report.provenance["started_utc"],
            problems=report.problems,
        )
    )
    atomic_write_text(folder / "index.html", page)
    written = publish(target, folder)
    report.files = sorted({target / name.split("/")[0] for name in written})

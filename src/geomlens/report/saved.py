"""``geomlens report --from DIR --out NEW``: a report page re-rendered from a report folder's
saved results, without loading a model.

A report folder's ``results.json`` holds every result, every error and the report's
provenance (its passes give each analysis's rows, its costs each analysis's cost), which is
all the page is made of; the readings, the guards, the tables and the figures are drawn again
by this geomlens. So an upgrade's words are read on an old run's numbers, and a folder can be
shared and re-rendered elsewhere. A folder this geomlens cannot read is refused with one line
that names the geomlens that wrote it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from geomlens.report.causal_lm import CausalLMSection
from geomlens.report.outcome import Outcome, Report
from geomlens.results import Result

__all__ = ["REPORT_FORMAT", "SavedReportError", "load_saved_report", "render_saved_report"]

#: The form of ``results.json`` this geomlens writes and re-renders (1: results, errors,
#: figure errors and provenance with passes and costs; the causal-LM section's alike).
REPORT_FORMAT = 1


class SavedReportError(ValueError):
    """A report folder that cannot be re-rendered (one line: why, and which geomlens wrote it)."""


def _writer(saved: dict[str, Any]) -> str:
    versions = (saved.get("provenance") or {}).get("versions") or {}
    version = versions.get("geomlens") if isinstance(versions, dict) else None
    return f"geomlens {version}" if version else "an unknown geomlens version"


def _refuse(source: Path, saved: dict[str, Any], why: str) -> SavedReportError:
    from geomlens.version import __version__

    return SavedReportError(
        f"--from {source}: written by {_writer(saved)}, which this geomlens ({__version__}) "
        f"cannot re-render: {why}; run `geomlens report` again to make a new folder."
    )


def _outcomes(part: dict[str, Any], provenance: dict[str, Any]) -> list[Outcome]:
    """Each analysis's outcome in the order the run listed them (its costs' order), with its
    rows from the pass that read it."""
    results = {name: Result.from_dict(data) for name, data in (part.get("results") or {}).items()}
    errors = part.get("errors") or {}
    figure_errors = part.get("figure_errors") or {}
    rows: dict[str, tuple[int, int]] = {}
    for record in provenance.get("passes") or []:
        for name in record.get("analyses") or []:
            rows[name] = (int(record.get("rows", 0)), int(record.get("rows_shipped", 0)))
    order = list(dict.fromkeys([*(provenance.get("costs") or {}), *results, *errors]))
    outcomes = []
    for name in order:
        if name not in results and name not in errors:
            continue
        result = results.get(name)
        seconds = (result.provenance or {}).get("cost_seconds", 0.0) if result else 0.0
        count, shipped = rows.get(name, (0, 0))
        outcomes.append(
            Outcome(
                name,
                result=result,
                error=errors.get(name),
                figure_error=None,  # drawn again here: a figure that fails now fails now
                rows=count,
                full_rows=shipped,
                seconds=float(seconds),
            )
        )
    del figure_errors  # the saved ones are the old run's; this rendering draws its own
    return outcomes


def load_saved_report(source: str | Path, out: str | Path) -> Report:
    """The :class:`Report` a report folder ``source`` holds, to be written to ``out``."""
    source = Path(source)
    path = source / "results.json"
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SavedReportError(
            f"--from {source}: no results.json there; give a folder `geomlens report` wrote."
        ) from None
    except (OSError, ValueError) as error:
        raise SavedReportError(f"--from {source}: results.json cannot be read ({error}).") from None
    if not isinstance(saved, dict) or not isinstance(saved.get("provenance"), dict):
        raise SavedReportError(f"--from {source}: results.json is not a report's (no provenance).")
    provenance = saved["provenance"]
    found = provenance.get("report_format", REPORT_FORMAT)
    if not isinstance(found, int) or found > REPORT_FORMAT:
        raise _refuse(source, saved, f"its results are in report format {found!r}")
    missing = [
        key for key in ("model", "passes", "run_seconds", "started_utc") if key not in provenance
    ]
    if missing:
        raise _refuse(source, saved, f"its provenance has no {', '.join(missing)}")
    try:
        outcomes = _outcomes(saved, provenance)
        section = None
        if "causal_lm" in saved:
            part = saved["causal_lm"]
            section_provenance = provenance.get("causal_lm") or {}
            section = CausalLMSection(
                str(part.get("model", "")),
                outcomes=_outcomes(part, section_provenance),
                provenance={k: v for k, v in section_provenance.items() if k != "unavailable"},
                unavailable=part.get("unavailable"),
                quick_note=section_provenance.get("quick_note"),
            )
    except (KeyError, TypeError, ValueError) as error:
        raise _refuse(source, saved, f"{type(error).__name__}: {error}") from None
    return Report(Path(out), outcomes, dict(provenance), causal_lm=section)


def render_saved_report(source: str | Path, out: str | Path) -> Report:
    """Re-render report folder ``source`` into ``out`` (figures, JSON and page), loading no
    model; ``out`` is checked as a report's output folder is."""
    from geomlens.report.folder import check_report_folder, planned_files
    from geomlens.report.page import write_report

    report = load_saved_report(source, out)
    if Path(out).resolve() == Path(source).resolve():
        raise SavedReportError(
            f"--out {out} is the --from folder; give a new folder for the re-rendered page."
        )
    section = report.causal_lm
    check_report_folder(
        Path(out),
        planned_files(
            [o.name for o in report.outcomes],
            [o.name for o in section.outcomes] if section is not None else (),
        ),
    )
    write_report(report)
    return report

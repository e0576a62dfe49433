"""``build_report``: every built-in analysis on its shipped data, fused, written as a web page.

The analyses are grouped by their data (see :mod:`geomlens.report.plan`) and each group runs
as one ``gl.run`` call. If a fused pass fails, its analyses are retried one by one, so one
failing analysis costs only its own section: the report shows its error and the command exits
non-zero, but every other result is still written.
"""

from __future__ import annotations

import datetime
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from geomlens.defaults import DEFAULT_BATCH_SIZE, DEFAULT_MAX_LENGTH
from geomlens.registry import analysis_class
from geomlens.report.causal_lm import CausalLMSection, run_section, section_model
from geomlens.report.plan import (
    PlannedAnalysis,
    ReportPass,
    builtin_analyses,
    plan_passes,
    planned_name,
)
from geomlens.results import Result

#: A report runs with the same defaults as ``gl.run`` and ``geomlens run``, so its numbers match.
REPORT_BATCH_SIZE = DEFAULT_BATCH_SIZE
REPORT_MAX_LENGTH = DEFAULT_MAX_LENGTH


@dataclass
class Outcome:
    """One analysis in the report: its result, or the error that stopped it."""

    name: str
    result: Result | None = None
    error: str | None = None
    pass_index: int | None = None
    rows: int = 0
    full_rows: int = 0
    seconds: float = 0.0


@dataclass
class Report:
    """What ``build_report`` ran and wrote."""

    folder: Path
    outcomes: list[Outcome]
    provenance: dict[str, Any]
    files: list[Path] = field(default_factory=list)
    #: The causal-LM section (geomlens.report.causal_lm), when the report has one.
    causal_lm: CausalLMSection | None = None

    @property
    def results(self) -> dict[str, Result]:
        return {o.name: o.result for o in self.outcomes if o.result is not None}

    @property
    def failed(self) -> list[Outcome]:
        """Analyses that raised: the main model's, then the causal-LM section's."""
        section = self.causal_lm.failed if self.causal_lm is not None else []
        return [o for o in self.outcomes if o.error is not None] + section

    @property
    def index(self) -> Path:
        return self.folder / "index.html"


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _run_pass(
    report_pass: ReportPass, adapter: Any, index: int, run_options: dict[str, Any]
) -> list[Outcome]:
    import geomlens as gl

    def outcome(name: str, **kwargs: Any) -> Outcome:
        return Outcome(
            name,
            pass_index=index,
            rows=len(report_pass.dataset),
            full_rows=report_pass.full_rows,
            **kwargs,
        )

    started = time.perf_counter()
    try:
        results = gl.run(report_pass.analyses, adapter, report_pass.dataset, **run_options)
    except Exception:  # fall back to one run per analysis, to tell which one failed
        if len(report_pass.analyses) == 1:
            raise
    else:
        seconds = (time.perf_counter() - started) / len(results)
        return [outcome(name, result=r, seconds=seconds) for name, r in results.items()]
    outcomes = []
    for analysis in report_pass.analyses:
        started = time.perf_counter()
        fresh = type(analysis)(analysis.config)
        try:
            result = gl.run(fresh, adapter, report_pass.dataset, **run_options)
        except Exception as error:  # recorded in the report; the other analyses go on
            outcomes.append(outcome(analysis.name, error=_error_text(error)))
        else:
            outcomes.append(outcome(analysis.name, result=result))
        outcomes[-1].seconds = time.perf_counter() - started
    return outcomes


def run_analyses(
    adapter: Any,
    names: Sequence[PlannedAnalysis],
    *,
    quick: bool = False,
    batch_size: int = REPORT_BATCH_SIZE,
    max_length: int | None = REPORT_MAX_LENGTH,
    seed: int = 0,
    progress: bool = True,
) -> tuple[list[Outcome], list[ReportPass]]:
    """Plan the passes and run them; one :class:`Outcome` per analysis, in ``names`` order
    (names, analyses built with options, or (analysis, data): see :func:`plan_passes`)."""
    passes, failures = plan_passes(adapter, names, quick=quick)
    run_options = {
        "batch_size": batch_size,
        "max_length": max_length,
        "seed": seed,
        "progress": progress,
    }
    outcomes: dict[str, Outcome] = {f.name: Outcome(f.name, error=f.error) for f in failures}
    bar = tqdm(passes, desc="report passes", unit="pass", disable=not progress)
    for index, report_pass in enumerate(bar):
        bar.set_postfix_str(", ".join(report_pass.names))
        try:
            done = _run_pass(report_pass, adapter, index, run_options)
        except Exception as error:  # a lone analysis failed: record it and go on
            done = [
                Outcome(
                    report_pass.names[0],
                    error=_error_text(error),
                    pass_index=index,
                    rows=len(report_pass.dataset),
                    full_rows=report_pass.full_rows,
                )
            ]
        outcomes.update({o.name: o for o in done})
    order = [planned_name(item) for item in names]
    return [outcomes[name] for name in order if name in outcomes], passes


def pass_records(passes: Sequence[ReportPass]) -> list[dict[str, Any]]:
    """The passes as the provenance lists them: analyses, rows, columns, data digest."""
    return [
        {
            "analyses": p.names,
            "rows": len(p.dataset),
            "rows_shipped": p.full_rows,
            "columns": p.columns,
            "data_fingerprint": p.fingerprint,
        }
        for p in passes
    ]


def build_report(
    model: Any = None,
    *,
    backend: str = "nnsight",
    device: str | None = None,
    out: str | Path = "report",
    quick: bool = False,
    analyses: Sequence[str] | None = None,
    batch_size: int = REPORT_BATCH_SIZE,
    max_length: int | None = REPORT_MAX_LENGTH,
    seed: int = 0,
    progress: bool = True,
    causal_lm: str | None = None,
) -> Report:
    """Run every built-in analysis (or ``analyses``) on ``model`` and write the report to ``out``.

    ``model`` is a name or path for ``gl.load`` (default: the bundled all-MiniLM-L6-v2), or an
    adapter / model object for ``gl.attach``. Writes ``out/index.html`` with the figures beside
    it, ``out/results.json`` (every result and the report's provenance) and one
    ``out/<analysis>.json`` per analysis. ``quick`` runs a small part of each data set.

    The default report (no ``model``, no ``analyses``) adds the causal-LM section on
    SmolLM2-135M-Instruct (:mod:`geomlens.report.causal_lm`), its files in
    ``out/causal-lm/``; ``causal_lm`` names another causal LM for it, or ``"none"``.
    """

    import geomlens as gl
    from geomlens.engine import library_versions
    from geomlens.report.page import write_report

    names = list(analyses) if analyses else builtin_analyses()
    for name in names:  # an unknown name fails here, before the model is loaded
        analysis_class(name)
    started_at = datetime.datetime.now(datetime.timezone.utc)
    started = time.perf_counter()
    if model is None or isinstance(model, (str, Path)):
        adapter = gl.load(model, backend=backend, device=device)
    else:
        adapter = gl.attach(model)
    load_seconds = time.perf_counter() - started
    outcomes, passes = run_analyses(
        adapter,
        names,
        quick=quick,
        batch_size=batch_size,
        max_length=max_length,
        seed=seed,
        progress=progress,
    )
    section_lm = section_model(model, analyses, causal_lm)
    section = None
    if section_lm is not None:
        section = run_section(
            section_lm,
            backend=backend,
            device=device,
            quick=quick,
            batch_size=batch_size,
            max_length=max_length,
            seed=seed,
            progress=progress,
        )
    provenance = {
        "command": " ".join(["geomlens", *sys.argv[1:]]) if sys.argv else "",
        "started_utc": started_at.isoformat(timespec="seconds"),
        "model": adapter.describe(),
        "device": str(adapter.device),
        "quick": quick,
        "seed": seed,
        "batch_size": batch_size,
        "max_length": max_length,
        "passes": pass_records(passes),
        "load_seconds": round(load_seconds, 2),
        "platform": platform.platform(),
        "versions": library_versions(),
    }
    if section is not None:
        provenance["causal_lm"] = section.provenance or {"unavailable": section.unavailable}
    # Loading and running; drawing and writing the page come after and are not counted.
    provenance["run_seconds"] = round(time.perf_counter() - started, 2)
    report = Report(Path(out), outcomes, provenance, causal_lm=section)
    write_report(report)
    return report

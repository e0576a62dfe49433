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
from pathlib import Path
from typing import Any

from geomlens.analyses.declaration import first_paragraph
from geomlens.analyses.registry import analysis_class, report_analyses
from geomlens.progress import phase, say, showing_progress
from geomlens.report.causal_lm import (
    CAUSAL_LM_ANALYSES,
    QUICK_CAUSAL_LM_ROWS,
    CausalLMSection,
    quick_note,
    section_model,
)
from geomlens.report.outcome import Outcome, Report
from geomlens.report.plan import (
    QUICK_ROWS,
    PlannedAnalysis,
    ReportPass,
    build_analysis,
    plan_passes,
    planned_name,
)
from geomlens.report.saved import REPORT_FORMAT
from geomlens.results import Result
from geomlens.run_defaults import DEFAULT_BATCH_SIZE, DEFAULT_MAX_LENGTH

#: A report runs with the same defaults as ``gl.run`` and ``geomlens run``, so its numbers match.
REPORT_BATCH_SIZE = DEFAULT_BATCH_SIZE
REPORT_MAX_LENGTH = DEFAULT_MAX_LENGTH


def default_folder(quick: bool) -> Path:
    """Where a report goes unless told: ``report``, or ``report-quick`` for a quick one."""
    return Path("report-quick" if quick else "report")


def existing_report(folder: str | Path) -> str | None:
    """What report ``folder`` already holds, in words ("the full report of M from DATE"), or
    None when it holds none."""
    import json

    saved = Path(folder) / "results.json"
    try:
        provenance = json.loads(saved.read_text()).get("provenance", {})
    except (OSError, ValueError):
        return None
    kind = "quick" if provenance.get("quick") else "full"
    model = (provenance.get("model") or {}).get("model_id")
    when = provenance.get("started_utc")
    return (
        f"the {kind} report" + (f" of {model}" if model else "") + (f" from {when}" if when else "")
    )


def check_report_options(
    out: str | Path,
    names: Sequence[str],
    section: str | None,
    *,
    batch_size: int,
    max_length: int | None,
    seed: int,
    flag: str = "out",
) -> None:
    """Everything a report is given, checked before the first model load or file write: the
    seed, the batch size and length, and the output folder (a file is refused, and so is a
    folder whose files the report would replace unless geomlens provably wrote them)."""
    from geomlens.engine.feed import check_seed
    from geomlens.report.folder import check_report_folder, planned_files

    check_seed(seed)
    for what, value in (("batch_size", batch_size), ("max_length", max_length)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise ValueError(f"{what} must be a positive integer; got {value!r}.")
    section_names = [spec.name for spec in CAUSAL_LM_ANALYSES] if section is not None else []
    check_report_folder(Path(out), planned_files(names, section_names), flag=flag)


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _run_pass(
    report_pass: ReportPass, adapter: Any, index: int, run_options: dict[str, Any]
) -> list[Outcome]:
    from geomlens.engine import run

    def outcome(name: str, **kwargs: Any) -> Outcome:
        return Outcome(
            name,
            pass_index=index,
            rows=len(report_pass.dataset),
            full_rows=report_pass.full_rows,
            **kwargs,
        )

    try:
        results = run(report_pass.analyses, adapter, report_pass.dataset, **run_options)
    except Exception:  # fall back to one run per analysis, to tell which one failed
        if len(report_pass.analyses) == 1:
            raise
    else:  # each result's provenance says what it cost (see geomlens.engine.analysis_cost)
        assert isinstance(results, dict)  # a list of analyses gives {name: Result}
        for result in results.values():
            result.provenance["data"] = report_pass.description
        return [
            outcome(name, result=r, seconds=float(r.provenance.get("cost_seconds", 0.0)))
            for name, r in results.items()
        ]
    outcomes = []
    for analysis in report_pass.analyses:
        started = time.perf_counter()
        fresh = type(analysis)(analysis.config)
        try:
            single = run(fresh, adapter, report_pass.dataset, **run_options)
        except Exception as error:  # recorded in the report; the other analyses go on
            outcomes.append(outcome(analysis.name, error=_error_text(error)))
        else:
            assert isinstance(single, Result)  # one analysis gives one Result
            single.provenance["data"] = report_pass.description
            outcomes.append(outcome(analysis.name, result=single))
        outcomes[-1].seconds = time.perf_counter() - started
    return outcomes


#: Provenance keys of a result that say what its analysis cost (written by the engine).
COST_KEYS = (
    "shared_pass_seconds",
    "setup_seconds",
    "update_seconds",
    "finalize_seconds",
    "cost_seconds",
)


def analysis_costs(outcome: Outcome) -> dict[str, float]:
    """Seconds one analysis of the report cost: the shared pass (once per pass, for all its
    analyses), its setup (e.g. training or loading an SAE), its own updates (with any second pass), its finalize, and the total that is its
    own work plus an equal share of the shared pass."""
    provenance = outcome.result.provenance if outcome.result is not None else {}
    costs = {key: float(provenance[key]) for key in COST_KEYS if key in provenance}
    costs.setdefault("cost_seconds", round(outcome.seconds, 4))
    return costs


def run_analyses(
    adapter: Any,
    names: Sequence[PlannedAnalysis],
    *,
    quick: bool = False,
    batch_size: int = REPORT_BATCH_SIZE,
    max_length: int | None = REPORT_MAX_LENGTH,
    seed: int = 0,
    progress: bool = True,
    quick_rows: int = QUICK_ROWS,
    section: str = "",
) -> tuple[list[Outcome], list[ReportPass]]:
    """Plan the passes and run them; one :class:`Outcome` per analysis, in ``names`` order
    (names, analyses built with options, or (analysis, data): see :func:`plan_passes`).
    ``section``: the words its progress lines begin with (the causal-LM section's passes are
    not a second "pass 1 of 4" of the encoder's)."""
    passes, failures = plan_passes(adapter, names, quick=quick, quick_rows=quick_rows)
    where = f"{section}: " if section else ""
    with showing_progress(progress):
        say(
            f"{where}{len(passes)} pass{'' if len(passes) == 1 else 'es'} planned: "
            + "; ".join(f"{i + 1}. {', '.join(p.names)}" for i, p in enumerate(passes))
        )
    run_options = {
        "batch_size": batch_size,
        "max_length": max_length,
        "seed": seed,
        "progress": progress,
    }
    outcomes: dict[str, Outcome] = {f.name: Outcome(f.name, error=f.error) for f in failures}
    for index, report_pass in enumerate(passes):
        # A line per pass, no bar: passes differ too much in cost for a count to give an ETA.
        what = (
            f"{where}pass {index + 1} of {len(passes)}: {', '.join(report_pass.names)} "
            f"on {len(report_pass.dataset):,} rows"
        )
        try:
            with showing_progress(progress), phase(what, announce=True):
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
            "data": p.description,
            "rows": len(p.dataset),
            "rows_shipped": p.full_rows,
            "columns": p.columns,
            "data_fingerprint": p.fingerprint,
        }
        for p in passes
    ]


def run_causal_lm_section(
    model: Any,
    *,
    backend: str = "nnsight",
    device: str | None = None,
    quick: bool = False,
    batch_size: int | None = None,
    max_length: int | None = None,
    seed: int = 0,
    progress: bool = True,
) -> CausalLMSection:
    """Load ``model`` and run the section's analyses on it (fused by data, as the report does).

    ``model`` is a name or folder for :func:`geomlens.load`, or an adapter already attached
    (the planted-null tests run the section on a random-weight model that way). A model that cannot be had (its package missing, offline) leaves the section
    ``unavailable`` with the one-line reason, which the page shows; the encoder report is
    still written and its exit status is not changed by it.
    """
    from geomlens.models.attach import load

    started = time.perf_counter()
    if not isinstance(model, str):
        adapter = model
        section = CausalLMSection(str(adapter.describe().get("model_id", "model")))
    else:
        section = CausalLMSection(model)
        try:
            adapter = load(model, backend=backend, device=device)
        except (ImportError, OSError) as error:
            section.unavailable = str(error).splitlines()[0]
            return section
    load_seconds = time.perf_counter() - started
    planned: list[PlannedAnalysis] = []
    for spec in CAUSAL_LM_ANALYSES:
        analysis = build_analysis(spec.name, quick, adapter, spec.run_options(adapter, quick))
        if spec.data is None:
            planned.append(analysis)
        else:  # the pass's provenance names this data, not the analysis's default
            planned.append((analysis, spec.data(adapter, quick), first_paragraph(spec.data)))
    planned_at = time.perf_counter()
    if quick:
        sae = next((a for a in planned if planned_name(a) == "sae-features"), None)
        sae = sae[0] if isinstance(sae, tuple) else sae
        section.quick_note = quick_note(getattr(getattr(sae, "config", None), "training", None))
    section.outcomes, passes = run_analyses(
        adapter,
        planned,
        quick=quick,
        batch_size=batch_size or REPORT_BATCH_SIZE,
        max_length=max_length,
        seed=seed,
        progress=progress,
        quick_rows=QUICK_CAUSAL_LM_ROWS,
        section=f"causal-LM section on {section.model}",
    )
    after_seconds: dict[str, float] = {}
    for spec, outcome in zip(CAUSAL_LM_ANALYSES, section.outcomes):
        if spec.after is not None and outcome.result is not None:
            after_started = time.perf_counter()
            try:
                outcome.result.metrics.update(spec.after(adapter, outcome.result, quick))
            except Exception as error:  # the analysis's own numbers still stand
                outcome.error = f"after {spec.name}: {type(error).__name__}: {error}"
            after_seconds[spec.name] = round(time.perf_counter() - after_started, 2)
    section.provenance = {
        "model": adapter.describe(),
        "device": str(adapter.device),
        "analyses": {spec.name: spec.run_options(adapter, quick) for spec in CAUSAL_LM_ANALYSES},
        "passes": pass_records(passes),
        "costs": {o.name: analysis_costs(o) for o in section.outcomes},
        "load_seconds": round(load_seconds, 2),
        # Building the analyses and their data (tokenising, chat templates) before the passes.
        "plan_seconds": round(planned_at - started - load_seconds, 2),
        # What is measured after an analysis with the same model (e.g. the held-out LM loss).
        "after_seconds": after_seconds,
        "quick_note": section.quick_note,
        "run_seconds": round(time.perf_counter() - started, 2),
    }
    return section


def _say_plan(analyses: int, section_lm: Any, progress: bool) -> None:
    """The plan, in one line, before any work: the model, its analyses, the causal-LM section
    where there is one, the page."""
    section = (
        f", then the causal-LM section's {len(CAUSAL_LM_ANALYSES)} analyses on {section_lm}"
        if section_lm is not None
        else ""
    )
    with showing_progress(progress):
        say(
            f"plan: load the model, run its {analyses} analyses (fused into passes by their data)"
            f"{section}, then draw the figures and write the page"
        )


def _run_settings(
    adapter: Any, quick: bool, seed: int, batch_size: int, max_length: int | None
) -> dict[str, Any]:
    """The model and the settings the report ran with (its provenance's middle part)."""
    return {
        "model": adapter.describe(),
        "device": str(adapter.device),
        "quick": quick,
        "seed": seed,
        "batch_size": batch_size,
        "max_length": max_length,
    }


def build_report(
    model: Any = None,
    *,
    backend: str = "nnsight",
    device: str | None = None,
    out: str | Path | None = None,
    quick: bool = False,
    analyses: Sequence[str] | None = None,
    batch_size: int = REPORT_BATCH_SIZE,
    max_length: int | None = REPORT_MAX_LENGTH,
    seed: int = 0,
    progress: bool = True,
    causal_lm: str | None = None,
) -> Report:
    """Run every built-in analysis (or ``analyses``) on ``model`` and write the report to ``out``.

    ``out`` defaults to ``report`` (``report-quick`` when ``quick``).
    ``model`` is a name or path for ``gl.load`` (default: the bundled all-MiniLM-L6-v2), or an
    adapter / model object for ``gl.attach``. Writes ``out/index.html`` with the figures beside
    it, ``out/results.json`` (every result and the report's provenance) and one
    ``out/<analysis>.json`` per analysis. ``quick`` runs a small part of each data set.

    The default report (no ``model``, no ``analyses``) adds the causal-LM section on
    SmolLM2-135M-Instruct (:mod:`geomlens.report.causal_lm`), its files in
    ``out/causal-lm/``; ``causal_lm`` names another causal LM for it, or ``"none"``.
    """
    from geomlens.engine import library_versions
    from geomlens.models.attach import attach, load
    from geomlens.report.page import write_report

    names = list(analyses) if analyses else report_analyses()
    for name in names:  # an unknown name fails here, before the model is loaded
        analysis_class(name)
    check_report_options(
        out if out is not None else default_folder(quick),
        names,
        section_model(model, analyses, causal_lm),
        batch_size=batch_size,
        max_length=max_length,
        seed=seed,
    )
    started_at = datetime.datetime.now(datetime.UTC)
    started = time.perf_counter()
    section_lm = section_model(model, analyses, causal_lm)
    _say_plan(len(names), section_lm, progress)
    with showing_progress(progress), phase("loading the model"):
        if model is None or isinstance(model, (str, Path)):
            adapter = load(model, backend=backend, device=device)
        else:
            adapter = attach(model)
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
    encoder_seconds = time.perf_counter() - started - load_seconds
    section = None
    if section_lm is not None:
        section = run_causal_lm_section(
            section_lm,
            backend=backend,
            device=device,
            quick=quick,
            batch_size=batch_size,
            max_length=max_length,
            seed=seed,
            progress=progress,
        )
    provenance: dict[str, Any] = {
        "report_format": REPORT_FORMAT,
        "command": " ".join(["geomlens", *sys.argv[1:]]) if sys.argv else "",
        "started_utc": started_at.isoformat(timespec="seconds"),
        **_run_settings(adapter, quick, seed, batch_size, max_length),
        "passes": pass_records(passes),
        "costs": {o.name: analysis_costs(o) for o in outcomes},
        "load_seconds": round(load_seconds, 2),
        "platform": platform.platform(),
        "versions": library_versions(),
    }
    if section is not None:
        provenance["causal_lm"] = section.provenance or {"unavailable": section.unavailable}
    # Loading and running; drawing and writing the page come after and are not counted (the
    # page adds "drawing_seconds" when it has drawn the figures).
    provenance["run_seconds"] = round(time.perf_counter() - started, 2)
    provenance["phase_seconds"] = {
        "load": round(load_seconds, 2),
        "analyses": round(encoder_seconds, 2),
        "causal_lm": round(provenance["run_seconds"] - load_seconds - encoder_seconds, 2),
    }
    report = Report(
        Path(out) if out is not None else default_folder(quick),
        outcomes,
        provenance,
        causal_lm=section,
    )
    with (
        showing_progress(progress),
        phase("drawing the figures and writing the page", announce=True),
    ):
        write_report(report)
    return report

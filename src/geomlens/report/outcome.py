"""What a report holds: one :class:`Outcome` per analysis, and the :class:`Report` written."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geomlens.report.causal_lm import CausalLMSection
from geomlens.results import Result


@dataclass
class Outcome:
    """One analysis in the report: its result, or the error that stopped it; ``figure_error``:
    why its figure could not be drawn (the numbers stand, but the report has failed)."""

    name: str
    result: Result | None = None
    error: str | None = None
    figure_error: str | None = None
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

    #: Theory figures that could not be drawn: (title, error), the section's included.
    theory_errors: list[tuple[str, str]] = field(default_factory=list)

    @property
    def failed(self) -> list[Outcome]:
        """Analyses that raised or whose figure could not be drawn: the main model's, then the
        causal-LM section's."""
        section = self.causal_lm.failed if self.causal_lm is not None else []
        return [o for o in self.outcomes if o.error is not None or o.figure_error] + section

    @property
    def problems(self) -> list[str]:
        """Everything that failed, one line each: an analysis, a figure, a theory figure. A
        report with any is a failed report (the command exits non-zero)."""
        lines = []
        for outcome in self.failed:
            if outcome.error is not None:
                lines.append(f"{outcome.name}: {outcome.error}")
            if outcome.figure_error:
                lines.append(
                    f"{outcome.name}: its figure could not be drawn ({outcome.figure_error})"
                )
        lines += [f"theory figure {title!r}: {error}" for title, error in self.theory_errors]
        return lines

    @property
    def index(self) -> Path:
        return self.folder / "index.html"

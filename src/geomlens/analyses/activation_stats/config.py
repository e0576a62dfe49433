"""activation-stats' options."""

from __future__ import annotations

from dataclasses import dataclass

from geomlens.analyses.declaration import AnalysisConfig, option


@dataclass
class ActivationStatsConfig(AnalysisConfig):
    site: str | list[str] | None = option(
        None, "Site(s) to summarise; default: every blocks.{L}.hook_resid_post of the model."
    )
    pooling: str | None = option(
        None, "None: every real token is a row; or 'mean' / 'last' / 'first' / 'span' per example."
    )
    dead_threshold: float = option(
        0.0, "A unit is dead when its activation never exceeds this value on any row."
    )

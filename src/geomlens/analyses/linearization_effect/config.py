"""linearization-effect's options: abstraction's and ccgp's, and the linearisation's."""

from __future__ import annotations

from dataclasses import dataclass

from geomlens.analyses.abstraction.config import AbstractionConfig
from geomlens.analyses.ccgp.config import CCGPConfig
from geomlens.analyses.declaration import option


@dataclass
class LinearizationEffectConfig(AbstractionConfig, CCGPConfig):
    layers: list[int] | None = option(
        None, "Layers whose MLP activation is linearised; default: the penultimate layer."
    )
    mode: str = option("identity", "'identity' (φ(x) → x) or 'tangent' (expansion at mean x₀).")
    calibration_texts: int = option(
        64, "For mode='tangent': paragraphs of the bundled English corpus that give x₀."
    )

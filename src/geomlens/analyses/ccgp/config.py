"""ccgp's options."""

from __future__ import annotations

from dataclasses import dataclass

from geomlens.analyses.abstraction.config import ConceptConfig
from geomlens.analyses.declaration import option


@dataclass
class CCGPConfig(ConceptConfig):
    max_splits: int = option(
        0,
        "0 (default): leave one context out exactly. N > 0: past N contexts, hold contexts out "
        "in N groups instead (faster; recorded as split_scheme / n_splits).",
        low=0,
    )
    folds: int = option(
        5, "Folds of the cross-validation inside each context (and of the mixed one).", low=2
    )
    inverse_regularisation: float = option(1.0, "C of the logistic-regression probe.")

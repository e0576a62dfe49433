"""The linearization-effect analysis's example: small rows and options every contract check runs it on."""

from __future__ import annotations

from geomlens.analyses.example_rows import concept_rows
from geomlens.analyses.spec import Example

EXAMPLE = Example(concept_rows, {"n_bootstrap": 20, "n_shuffles": 10})

"""The sae-features analysis's example: small rows and options every contract check runs it on."""

from __future__ import annotations

from geomlens.analyses.example_rows import condition_rows, tiny_sae
from geomlens.analyses.spec import Example

EXAMPLE = Example(condition_rows, built_options=tiny_sae)

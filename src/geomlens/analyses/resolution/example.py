"""The resolution analysis's example: small rows and options every contract check runs it on."""

from __future__ import annotations

from geomlens.analyses.example_rows import coordinate_rows
from geomlens.analyses.spec import Example

EXAMPLE = Example(coordinate_rows, {"bootstrap": 20})

"""The activation-stats analysis's example: small rows and options every contract check runs it on."""

from __future__ import annotations

from geomlens.analyses.example_rows import corpus_rows
from geomlens.analyses.spec import Example

EXAMPLE = Example(corpus_rows)

"""The resolution analysis's example: small rows and options every contract check runs it on."""

from __future__ import annotations

from geomlens.analyses.example_rows import coordinate_rows
from geomlens.analyses.spec import Example

EXAMPLE = Example(
    coordinate_rows,
    {"bootstrap": 20},
    known_failures={
        "cross-backend": "the fitted profile's half width on the tiny GPT-2's 20 stimuli moves "
        "by a few % between backends whose activations differ at float rounding (the fit is "
        "not smooth in them); similarity, its input, agrees",
    },
)

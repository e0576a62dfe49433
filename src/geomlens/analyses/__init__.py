"""The analyses: the framework (the base class, the declaration, the registry) and one folder
per built-in (``geomlens/analyses/<name>/``, whose ``__init__`` declares it, see
:mod:`geomlens.analyses.declaration`). Importing this package imports no torch: the base class
and each analysis's class are imported when first used."""

from __future__ import annotations

from geomlens.lazy import lazy_attributes

#: Names this package lends from its modules, imported on first use (the base class needs torch).
_EXPORTS = {
    "Analysis": "geomlens.analyses.base",
    "Batch": "geomlens.analyses.base",
    "RunContext": "geomlens.analyses.base",
    "AnalysisConfig": "geomlens.analyses.declaration",
    "Declaration": "geomlens.analyses.declaration",
    "option": "geomlens.analyses.declaration",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_attributes(__name__, _EXPORTS)

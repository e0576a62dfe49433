"""The analyses: the framework (the base class, the declaration, the registry) and one folder
per built-in (``geomlens/analyses/<name>/``, whose ``__init__`` declares it, see
:mod:`geomlens.analyses.declaration`). Importing this package imports no torch: the base class
and each analysis's class are imported when first used."""

from __future__ import annotations

from geomlens.lazy import lazy_attributes, lent

#: Names this package lends from its modules, imported on first use (the base class needs torch).
_EXPORTS = {
    **lent("geomlens.analyses.base", "Analysis", "Batch", "RunContext"),
    **lent("geomlens.analyses.declaration", "AnalysisConfig", "Declaration", "option"),
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_attributes(__name__, _EXPORTS)

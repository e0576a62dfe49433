"""Compatibility path: the analysis registry moved beside ``Analysis``.

``register_analysis`` and ``ANALYSES`` are in :mod:`geomlens.analyses.registry`,
``analysis_class`` and ``list_analyses`` in :mod:`geomlens.analyses.catalog`; new code imports
those. Names are looked up on first use (see :mod:`geomlens.registry`).
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    import geomlens.registry

    return getattr(geomlens.registry, name)

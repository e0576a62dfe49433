"""The generic registry (names, aliases, lazy entry points), and the old home of the analysis
registry.

The analysis registry itself lives beside :class:`~geomlens.analyses.base.Analysis`:
:mod:`geomlens.analyses.registry` (``register_analysis``, ``ANALYSES``) and
:mod:`geomlens.analyses.catalog` (``analysis_class``, ``list_analyses``). The names below are
kept here for code written against ``geomlens.registry``; they are looked up on first use, so
that this floor imports nothing above it when it loads (a documented compatibility shim).
"""

from __future__ import annotations

import importlib
from typing import Any

from geomlens.registry.registry import PluginLoadError, Registry, UnknownNameError

#: Old name → the module that now holds it.
_MOVED = {
    "ANALYSES": "geomlens.analyses.registry",
    "ENTRY_POINT_GROUP": "geomlens.analyses.registry",
    "register_analysis": "geomlens.analyses.registry",
    "analysis_class": "geomlens.analyses.catalog",
    "list_analyses": "geomlens.analyses.catalog",
}

__all__ = ["PluginLoadError", "Registry", "UnknownNameError", *_MOVED]


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module 'geomlens.registry' has no attribute {name!r}")

"""Looking analyses up by name: the built-ins (:data:`~geomlens.analyses.registry.BUILTINS`,
imported on first lookup) and the installed plugins (entry points, loaded on first lookup)."""

from __future__ import annotations

from geomlens.analyses.base import Analysis
from geomlens.analyses.registry import ANALYSES, BUILTINS


def analysis_class(name: str) -> type[Analysis]:
    """The analysis class registered under ``name`` (or an alias); errors list what exists."""
    return ANALYSES.get(name)


def list_analyses() -> list[str]:
    """Names of every registered analysis, built-ins and installed plugins."""
    return ANALYSES.names()


def builtin_analyses() -> list[str]:
    """Names of the analyses that ship with geomlens, in :data:`BUILTINS` order."""
    return [builtin.name for builtin in BUILTINS]

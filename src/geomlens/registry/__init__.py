"""The analysis registry: built-ins register on import, plugins through entry points."""

from geomlens.registry.analyses import (
    ANALYSES,
    ENTRY_POINT_GROUP,
    analysis_class,
    list_analyses,
    register_analysis,
)
from geomlens.registry.registry import PluginLoadError, Registry, UnknownNameError

__all__ = [
    "ANALYSES",
    "ENTRY_POINT_GROUP",
    "PluginLoadError",
    "Registry",
    "UnknownNameError",
    "analysis_class",
    "list_analyses",
    "register_analysis",
]

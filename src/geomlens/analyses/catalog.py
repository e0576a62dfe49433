"""Looking analyses up by name: the built-ins (imported here, once) and the installed plugins."""

from __future__ import annotations

import geomlens.analyses  # noqa: F401  (importing the package registers every built-in)
from geomlens.analyses.base import Analysis
from geomlens.analyses.registry import ANALYSES


def analysis_class(name: str) -> type[Analysis]:
    """The analysis class registered under ``name`` (or an alias); errors list what exists."""
    return ANALYSES.get(name)


def list_analyses() -> list[str]:
    """Names of every registered analysis, built-ins and installed plugins."""
    return ANALYSES.names()

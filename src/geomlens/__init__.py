"""geomlens: representation-geometry analyses for TransformerLens and nnsight models.

import geomlens as gl
adapter = gl.load()                       # bundled all-MiniLM-L6-v2, or any HF name/path
result = gl.run("activation-stats", adapter, ["some text", "more text"])
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Public names, imported on first use so that `import geomlens.theory` stays light (numpy/scipy).
_EXPORTS = {
    "attach": "geomlens.hooks.attach",
    "load": "geomlens.hooks.attach",
    "run": "geomlens.engine",
    "stream": "geomlens.engine",
    "Result": "geomlens.results",
    "plot": "geomlens.plotting",
    "Dataset": "geomlens.data.dataset",
    "Adapter": "geomlens.hooks.base",
    "Analysis": "geomlens.analyses.base",
    "AnalysisConfig": "geomlens.analyses.base",
    "Batch": "geomlens.analyses.base",
    "option": "geomlens.analyses.base",
    "register_analysis": "geomlens.registry",
    "list_analyses": "geomlens.registry",
    "analysis_class": "geomlens.registry",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'geomlens' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)

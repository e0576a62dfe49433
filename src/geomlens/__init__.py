"""geomlens: representation-geometry analyses for TransformerLens and nnsight models.

import geomlens as gl
adapter = gl.load()                       # bundled all-MiniLM-L6-v2, or any HF name/path
result = gl.run("activation-stats", adapter, ["some text", "more text"])
"""

from __future__ import annotations

import importlib
from typing import Any

from geomlens import results as _results
from geomlens.lazy import lazy_attributes
from geomlens.version import __version__

# Public names, imported on first use so that `import geomlens.theory` stays light (numpy/scipy).
_EXPORTS = {
    "attach": "geomlens.models.attach",
    "load": "geomlens.models.attach",
    "run": "geomlens.engine",
    "stream": "geomlens.engine",
    "Result": "geomlens.results",
    "plot": "geomlens.analyses.plotting",
    "Dataset": "geomlens.data.dataset",
    "Adapter": "geomlens.models.adapter",
    "Analysis": "geomlens.analyses.base",
    "AnalysisConfig": "geomlens.analyses.declaration",
    "Batch": "geomlens.analyses.base",
    "option": "geomlens.analyses.declaration",
    "Declaration": "geomlens.analyses.declaration",
    "register_analysis": "geomlens.analyses.registry",
    "list_analyses": "geomlens.analyses.registry",
    "analysis_class": "geomlens.analyses.registry",
    "series": "geomlens.dynamics.series",
    "sweep": "geomlens.dynamics.sweep",
}

__all__ = [*_EXPORTS, "__version__"]


def _draw(result: Any, path: Any = None, **kwargs: Any) -> Any:
    """``Result.plot``: the analysis that wrote the result draws it (imported only when drawing)."""
    return importlib.import_module("geomlens.analyses.plotting").plot(result, path, **kwargs)


# A Result is data on the lowest floor; the front door, above everything, lends it the drawer.
_results.set_drawer(_draw)


__getattr__ = lazy_attributes(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted(__all__)

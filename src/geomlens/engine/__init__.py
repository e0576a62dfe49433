"""The run: one pass over the data feeding every analysis (:mod:`geomlens.engine.feed`), with its
checkpoints, data-parallel sharding and benchmark harness beside it.

``geomlens.engine.stream`` and ``geomlens.engine.run`` are the public entry points (``gl.run``).
"""

from geomlens.engine.feed import (
    FeedSummary,
    build_analyses,
    library_versions,
    prepare_data,
    run,
    stream,
    union_sites,
)
from geomlens.inputs.batches import batch_indices

__all__ = [
    "FeedSummary",
    "batch_indices",
    "build_analyses",
    "library_versions",
    "prepare_data",
    "run",
    "stream",
    "union_sites",
]

"""A minimal registered analysis (no state, no figure) for tests of the registry and the CLI."""

from __future__ import annotations

import geomlens as gl
from geomlens.analyses.registry import ANALYSES


def register_minimal_analysis(name: str) -> type[gl.Analysis]:
    """Register (once) and return an analysis named ``name`` that reads one site, keeps
    nothing and draws no figure."""
    if name in ANALYSES:
        return ANALYSES.get(name)

    @gl.register_analysis(name)
    class Minimal(gl.Analysis):
        def sites(self, adapter):
            return adapter.sites()[:1]

        def update(self, batch):
            pass

        def merge(self, other):
            pass

        def finalize(self):
            return gl.Result(self.name)

    return Minimal

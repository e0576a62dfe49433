"""Analyses across training: a series of checkpoints, a cached sweep, the theory beside it.

- :mod:`~geomlens.dynamics.series`: ``gl.series(source)``, the checkpoints of one model;
- :mod:`~geomlens.dynamics.sweep`: ``gl.sweep(analyses, series)``, every checkpoint through
  ``gl.run``, cached and resumable, written as Result files and a trajectory table;
- :mod:`~geomlens.dynamics.trajectory`: the table, rebuilt from the Result files;
- :mod:`~geomlens.dynamics.overlay`: the theory levels (exact, parameter-free laws, none);
- :mod:`~geomlens.dynamics.figures`: one figure per analysis.

The public names are ``gl.series`` and ``gl.sweep`` (this package imports nothing itself, so
that its modules keep their names). See docs/dynamics.md.
"""

"""The ``geomlens`` command (``geomlens.cli:app``): one module per command group.

:mod:`~geomlens.cli.main` (``list``, ``run``, ``check``, ``sites`` and the mounting of the
others), :mod:`~geomlens.cli.report`, :mod:`~geomlens.cli.sae`, :mod:`~geomlens.cli.theory`,
:mod:`~geomlens.cli.scaffold` (``new-plugin``); the shared options are in
:mod:`~geomlens.cli.options` and the shared error helpers in :mod:`~geomlens.cli.errors`.
"""

from geomlens.cli.main import app

__all__ = ["app"]

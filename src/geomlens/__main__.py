"""``python -m geomlens`` is the ``geomlens`` command."""

from geomlens.cli import app

app(prog_name="geomlens")

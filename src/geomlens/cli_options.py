"""Compatibility path: this module moved to :mod:`geomlens.cli.options`.

Importing the old path gives the new module itself, so old imports (and monkeypatching through
them) keep working. Code inside geomlens imports the new path; see tests/test_layers.py.
"""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("geomlens.cli.options")

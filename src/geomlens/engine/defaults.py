"""Run defaults shared by the Python API (``gl.run``) and the CLI (``geomlens run``).

One place to read them, so that the same texts give the same numbers whichever way they are run.
Each value is defined on the lowest floor that uses it: the batch loop's in
:mod:`geomlens.inputs.batches`, the bundled corpus's in :mod:`geomlens.data.corpus`.
"""

from geomlens.data.corpus import DEFAULT_CORPUS_SIZE
from geomlens.inputs.batches import DEFAULT_BATCH_SIZE, DEFAULT_MAX_LENGTH

__all__ = ["DEFAULT_BATCH_SIZE", "DEFAULT_CORPUS_SIZE", "DEFAULT_MAX_LENGTH"]

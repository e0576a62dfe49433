"""The run's defaults, in a module that imports nothing: the command line's options and its
``--help`` read them without loading torch (``inputs.batches`` and ``models.attach`` take
theirs from here, so there is one value of each)."""

from __future__ import annotations

#: Rows per forward pass of ``gl.run``, ``geomlens run`` and the report.
DEFAULT_BATCH_SIZE = 32
#: Tokens kept per row (None: every token, up to the model's position table).
DEFAULT_MAX_LENGTH: int | None = None
#: The backend a model name is loaded with.
DEFAULT_BACKEND = "nnsight"
#: The model of ``gl.load()`` with no name: the bundled all-MiniLM-L6-v2.
DEFAULT_MODEL = "all-MiniLM-L6-v2"

#: A position is flagged as an attention sink when its norm exceeds this many times the row's
#: reference norm. On SmolLM2-135M the first position is 38-140 × the median in layers 12-27
#: while every other token stays under 4.5 ×.
SINK_NORM_RATIO = 10.0

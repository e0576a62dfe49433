"""Run defaults shared by the Python API (``gl.run``) and the CLI (``geomlens run``).

One place, so that the same texts give the same numbers whichever way they are run.
"""

#: Inputs per forward pass.
DEFAULT_BATCH_SIZE = 32
#: Tokens kept per input; ``None`` keeps every token (the model's own limit still applies).
DEFAULT_MAX_LENGTH: int | None = None
#: Paragraphs of the bundled corpus used when an analysis runs on it without a limit.
DEFAULT_CORPUS_SIZE = 64

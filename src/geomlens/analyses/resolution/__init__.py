"""resolution: a model's resolution scale ε and its place on the theory's (p_S, p_I) front.

This folder holds everything about the analysis: the class and its options (``analysis.py``),
its example (``example.py``), its metric specs (``metrics.py``) and its reading
(``reading.py``); the figure is the class's ``plot``. The registry finds it by ``ANALYSIS``.
"""

from .analysis import *  # noqa: F403
from .analysis import Resolution

ANALYSIS = Resolution

"""The ``--linearize LAYERS[:MODE]`` flag of ``geomlens run``: parsed, and turned into the
linearisation (:mod:`geomlens.interventions.linearize`) it asks for."""

from __future__ import annotations

import contextlib

from geomlens.interventions.linearize import MODES
from geomlens.models.adapter import Adapter


def parse_linearize_flag(text: str) -> tuple[list[int], str]:
    """``"4"``, ``"3,4"``, ``"-2:tangent"`` → (layers, mode): the CLI's ``--linearize``."""
    layers_text, _, mode = text.partition(":")
    mode = mode or "identity"
    if mode not in MODES:
        raise ValueError(
            f"--linearize {text!r}: mode must be 'identity' or 'tangent', got {mode!r}."
        )
    try:
        layers = [int(part) for part in layers_text.split(",") if part.strip()]
    except ValueError:
        layers = []
    if not layers:
        raise ValueError(
            f"--linearize {text!r} must be LAYERS[:MODE], layers as integers separated by commas "
            "(negative counts from the end), e.g. 4, 3,4 or -2:tangent."
        )
    return layers, mode


def linearized_from_flag(adapter: Adapter, text: str | None) -> contextlib.AbstractContextManager:
    """The linearisation a ``--linearize`` flag asks for (tangent mode calibrates on 64
    paragraphs of the bundled English corpus), or nothing when the flag is absent."""
    if text is None:
        return contextlib.nullcontext()
    layers, mode = parse_linearize_flag(text)
    calibration = None
    if mode == "tangent":
        from geomlens.data.corpus import stdlib_paragraphs

        calibration = stdlib_paragraphs(64)
    return adapter.linearize(layers, mode=mode, calibration=calibration)

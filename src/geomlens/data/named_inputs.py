"""Named model inputs in a data mapping, and their check: one entry per example.

A :class:`~geomlens.data.dataset.Dataset` may carry ``inputs`` (``{"pixel_values": array}``,
``{"images": [paths]}``); how a batch of them is encoded for a model is in
:mod:`geomlens.inputs.tensor_inputs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

#: The named input a processor turns into model inputs: image files or PIL images.
IMAGES = "images"
#: Keys of a data mapping that are model inputs rather than label columns: ``inputs`` holds any
#: named inputs; ``pixel_values`` and ``images`` may also stand at the top level.
INPUT_KEYS = ("inputs", "pixel_values", IMAGES)


def named_inputs_of(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The named model inputs in a data mapping (see :data:`INPUT_KEYS`), or None."""
    inputs = dict(data.get("inputs") or {})
    inputs.update({key: data[key] for key in INPUT_KEYS[1:] if key in data})
    return inputs or None


def check_named_inputs(inputs: Mapping[str, Any], rows: int | None = None) -> dict[str, Any]:
    """Validate named model inputs: non-empty, each with one entry per example (``rows`` of
    them when texts or token ids come beside them)."""
    if not isinstance(inputs, Mapping) or not inputs:
        raise ValueError(
            "inputs must be a non-empty mapping of named model inputs, e.g. "
            "{'pixel_values': array [N, C, H, W]} or {'images': [paths]}."
        )
    checked = {name: _as_rows(name, values) for name, values in inputs.items()}
    lengths = {name: len(values) for name, values in checked.items()}
    if len(set(lengths.values())) != 1 or (rows is not None and rows not in lengths.values()):
        beside = f" and {rows} texts / token-id rows" if rows is not None else ""
        raise ValueError(
            f"Named model inputs have {lengths} examples{beside}; every input needs one entry "
            "per example."
        )
    return checked


def _as_rows(name: str, values: Any) -> Any:
    """One input's values as rows: image files / PIL images as a list; numbers as a tensor
    ``[N, ...]``; per-example arrays of different shapes as a list (handed over as they are)."""
    if name == IMAGES:
        return list(values)
    if isinstance(values, torch.Tensor):
        return values
    if isinstance(values, (list, tuple)) and values and hasattr(values[0], "shape"):
        shapes = {tuple(np.shape(v)) for v in values}
        if len(shapes) > 1:
            return list(values)
        values = np.stack([np.asarray(v) for v in values])
    array = np.asarray(values)
    if array.dtype.kind not in "biuf" or array.ndim == 0:
        raise ValueError(
            f"Model input {name!r} must be numbers, an array [N, ...] with one entry per "
            f"example; got {type(values).__name__}. Image files and PIL images go under "
            f"{IMAGES!r}, with a processor."
        )
    return torch.as_tensor(array)


def take_rows(values: Any, index: np.ndarray) -> Any:
    """Rows ``index`` of one named input (a tensor ``[N, ...]`` or a list), in that order."""
    if isinstance(values, torch.Tensor):
        return values[torch.as_tensor(index, dtype=torch.long)]
    return [values[i] for i in index]

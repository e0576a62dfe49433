"""Recorded activations as a model-free backend.

Arrays ``[N, d]`` or ``[N, T, d]`` per site — from an activation cache, or from neural
recordings such as the V4/IT data the abstraction paper compares with — run through every
analysis exactly as a model's activations would. The rows are the examples; per-example labels
come with the data passed to ``gl.run``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from geomlens.data.dataset import Dataset
from geomlens.inputs.encoding import ModelInputs
from geomlens.models.adapter import Adapter


class RecordedAdapter(Adapter):
    """Serve stored activations by row. Interventions are not possible: there is no model."""

    backend = "recorded"

    def __init__(
        self,
        activations: Mapping[str, Any],
        *,
        attention_mask: Any | None = None,
        model_id: str = "recorded",
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__(model_id)
        if not activations:
            raise ValueError("gl.attach({...}) needs at least one site: {site_name: array [N, d]}.")
        self._device = torch.device(device)
        self._arrays: dict[str, torch.Tensor] = {}
        rows: int | None = None
        for site, array in activations.items():
            tensor = torch.as_tensor(
                np.asarray(array) if not isinstance(array, torch.Tensor) else array
            )
            if tensor.dim() not in (2, 3) or not tensor.is_floating_point():
                raise ValueError(
                    f"Recorded activations for site {site!r} must be a float array [N, d] or "
                    f"[N, T, d]; got dtype {tensor.dtype} and shape {tuple(tensor.shape)}."
                )
            if rows is not None and tensor.shape[0] != rows:
                raise ValueError(
                    f"Site {site!r} has {tensor.shape[0]} rows but another site has {rows}; every "
                    "recorded site needs one row per example."
                )
            rows = tensor.shape[0]
            self._arrays[site] = tensor.detach()
        self.num_rows = int(rows or 0)
        self._mask: torch.Tensor | None = None
        if attention_mask is not None:
            mask = torch.as_tensor(np.asarray(attention_mask)).bool()
            widths = {t.shape[1] for t in self._arrays.values() if t.dim() == 3}
            if mask.shape[0] != self.num_rows or len(widths) != 1 or mask.shape[1] not in widths:
                raise ValueError(
                    f"attention_mask must be [N, T] = [{self.num_rows}, T] matching the [N, T, d] "
                    f"arrays; got {tuple(mask.shape)}."
                )
            self._mask = mask

    def sites(self) -> list[str]:
        return list(self._arrays)

    @property
    def n_layers(self) -> int:
        return 0

    @property
    def recorded_arrays(self) -> dict[str, torch.Tensor]:
        """The stored activations by site (what a checkpoint fingerprints as the "weights")."""
        return dict(self._arrays)

    @property
    def device(self) -> torch.device:
        return self._device

    def describe(self) -> dict[str, Any]:
        shapes = {site: list(t.shape) for site, t in self._arrays.items()}
        return {**super().describe(), "recorded_shapes": shapes}

    def encode(self, dataset: Dataset, index: np.ndarray, **_token_options: Any) -> ModelInputs:
        """Rows ``index`` of the recorded arrays (``padding_side`` and ``max_length`` have no
        tokens to pad or cut here)."""
        if len(dataset) != self.num_rows:
            raise ValueError(
                f"The data has {len(dataset)} examples but the recorded activations have "
                f"{self.num_rows} rows; pass one label row per recorded row."
            )
        index = np.asarray(index)
        widths = [t.shape[1] for t in self._arrays.values() if t.dim() == 3]
        width = max(widths) if widths else 1
        if self._mask is not None:
            mask = self._mask[index]
        else:
            mask = torch.ones((len(index), width), dtype=torch.bool)
        return ModelInputs(index=index, attention_mask=mask.to(self._device))

    def capture(self, inputs: ModelInputs, sites: Sequence[str]) -> dict[str, torch.Tensor]:
        if self._edits:
            raise ValueError(
                "Recorded activations cannot be intervened on (there is no model to run); "
                "record the activations under the intervention instead."
            )
        rows = torch.as_tensor(inputs.index, dtype=torch.long)
        out = {}
        for site in sites:
            tensor = self._arrays[self.resolve_site(site)][rows]
            if tensor.dim() == 2:
                tensor = tensor.unsqueeze(1)
            out[site] = tensor.to(self._device)
        return out

    def hook_count(self) -> int:
        return 0

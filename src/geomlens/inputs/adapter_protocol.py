"""What the code below the adapters needs of one, as a protocol.

The batch loop (:mod:`geomlens.inputs.batches`), linearisation and the resumed pass
(:mod:`geomlens.interventions`) run under :class:`~geomlens.models.adapter.Adapter`
(``Adapter.encode`` and ``Adapter.linearize`` call into them), so they name the adapter by this
protocol rather than by importing the class: neither ``inputs/`` nor ``interventions/`` imports
``models/``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from geomlens.inputs.encoding import ModelInputs, PaddingSide

if TYPE_CHECKING:
    from geomlens.data.dataset import Dataset


#: An edit of one activation (as :data:`geomlens.models.adapter.EditFn`).
EditFn = Callable[[torch.Tensor], torch.Tensor]


class ModelAdapter(Protocol):
    """The members of an adapter that the batch loop and linearisation read."""

    model_id: str
    backend: str
    model: Any

    @property
    def device(self) -> torch.device: ...

    @property
    def n_layers(self) -> int: ...

    @property
    def is_hooked_transformer(self) -> bool: ...

    @property
    def max_positions(self) -> int | None: ...

    def sites(self) -> list[str]: ...

    def resolve_site(self, site: str) -> str: ...

    def transformer_blocks(self) -> torch.nn.Module | None: ...

    def encode(
        self,
        dataset: Dataset,
        index: np.ndarray,
        *,
        padding_side: PaddingSide = "right",
        max_length: int | None = None,
    ) -> ModelInputs: ...

    def capture(self, inputs: ModelInputs, sites: Sequence[str]) -> dict[str, torch.Tensor]: ...

    @property
    def active_edits(self) -> list[tuple[str, EditFn]]: ...

    @contextlib.contextmanager
    def intervene(self, site: str, edit: EditFn) -> Iterator[None]:
        yield

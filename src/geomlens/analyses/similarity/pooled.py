"""Per-stimulus pooled representations: the state shared by ``similarity`` and ``resolution``.

A similarity matrix needs every pair of stimuli, so these analyses keep the pooled vector of
every row ([N, d] per site, N a stimulus set: thousands at most) instead of a fixed-size
statistic. Rows are stored with their dataset index, so states from disjoint rows merge by
concatenation and the result does not depend on batch order or on how the rows were split.
Rows that share a coordinate are one stimulus (the same year in several templates): its
representation is the mean of theirs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from geomlens.plain_state import state_class


@dataclass
class StimulusRepresentations:
    """The stimuli of one site: unique coordinates, mean pooled vectors, rows per stimulus.

    ``row_vectors`` and ``stimulus_of_row`` keep the rows themselves (the same stimulus in
    different texts), for the similarity of a stimulus with itself in another text."""

    coordinates: np.ndarray  # [S] or [S, k]
    vectors: np.ndarray  # [S, d], float64
    rows: np.ndarray  # [S] how many dataset rows were averaged into each stimulus
    row_vectors: np.ndarray | None = None  # [N, d] every row's pooled vector
    stimulus_of_row: np.ndarray | None = None  # [N] which stimulus each row is
    row_index: np.ndarray | None = None  # [N] each row's number in the dataset


@state_class
@dataclass
class PooledRows:
    """Pooled vectors per site and a coordinate per row, kept by dataset row index."""

    chunks: dict[str, list[tuple[np.ndarray, torch.Tensor]]] = field(default_factory=dict)
    coordinates: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)

    def add(self, site: str, index: np.ndarray, pooled: torch.Tensor) -> None:
        """Keep a float64 copy of ``pooled`` [B, d], never the batch's tensor, on its device:
        nothing is read back to the host per batch (the rows come to the CPU in finalize)."""
        vectors = pooled.detach().reshape(pooled.shape[0], -1).to(torch.float64).clone()
        self.chunks.setdefault(site, []).append((np.asarray(index).copy(), vectors))

    def add_coordinates(self, index: np.ndarray, coordinates: np.ndarray) -> None:
        values = np.asarray([np.asarray(c, dtype=float) for c in coordinates], dtype=float)
        self.coordinates.append((np.asarray(index).copy(), values))

    def merge(self, other: PooledRows) -> None:
        for site, chunks in other.chunks.items():
            self.chunks.setdefault(site, []).extend(chunks)
        self.coordinates.extend(other.coordinates)

    def __bool__(self) -> bool:
        return bool(self.chunks)

    def sites(self) -> list[str]:
        return list(self.chunks)

    def row_coordinates(self) -> tuple[np.ndarray, np.ndarray]:
        """(row indices sorted, their coordinates)."""
        index, values = _sorted(self.coordinates)
        return index, values

    def stimuli(self, site: str) -> StimulusRepresentations:
        """Rows grouped by coordinate: one mean vector per distinct coordinate."""
        index, vectors = _sorted(self.chunks[site])
        coordinate_index, coordinates = self.row_coordinates()
        if not np.array_equal(index, coordinate_index):
            raise ValueError(
                f"Site {site!r} saw rows that have no coordinate (or the reverse); every row "
                "needs a 'coordinate'."
            )
        unique, stimulus_of_row = np.unique(coordinates, axis=0, return_inverse=True)
        stimulus_of_row = stimulus_of_row.reshape(-1)
        counts = np.bincount(stimulus_of_row, minlength=len(unique))
        sums = np.zeros((len(unique), vectors.shape[1]))
        np.add.at(sums, stimulus_of_row, vectors)
        return StimulusRepresentations(
            unique, sums / counts[:, None], counts, vectors, stimulus_of_row, index
        )


def _host(parts: list[Any]) -> np.ndarray:
    """Rows as one CPU array (pooled vectors are kept on the device until finalize: joined
    there, they come back in one read)."""
    if parts and all(isinstance(v, torch.Tensor) for v in parts):
        device = parts[-1].device
        return torch.cat([v.to(device) for v in parts]).cpu().numpy()
    return np.concatenate([v.cpu().numpy() if isinstance(v, torch.Tensor) else v for v in parts])


def _sorted(chunks: list[tuple[np.ndarray, Any]]) -> tuple[np.ndarray, np.ndarray]:
    index = np.concatenate([i for i, _ in chunks])
    values = _host([v for _, v in chunks])
    order = np.argsort(index, kind="stable")
    if len(np.unique(index)) != len(index):
        raise ValueError("The same dataset row was seen twice; merge states of disjoint rows only.")
    return index[order], values[order]

"""Mergeable streaming statistics (the sufficient statistics analyses keep between batches)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class StreamingMoments:
    """Per-dimension count, mean, sum of squared deviations (M2), min and max over rows.

    Updates and merges use Chan et al.'s parallel algorithm, so any split of the data into
    batches or workers gives the same mean and variance up to rounding. Kept in float64 on the
    device the data lives on.
    """

    count: int = 0
    mean: torch.Tensor | None = None
    m2: torch.Tensor | None = None
    minimum: torch.Tensor | None = None
    maximum: torch.Tensor | None = None

    def update(self, rows: torch.Tensor) -> None:
        """Add rows ``[n, d]``."""
        if rows.dim() != 2:
            raise ValueError(
                f"StreamingMoments.update takes rows [n, d]; got shape {tuple(rows.shape)}."
            )
        if rows.shape[0] == 0:
            return
        rows = rows.detach().to(torch.float64)
        other = StreamingMoments(
            count=rows.shape[0],
            mean=rows.mean(dim=0),
            m2=((rows - rows.mean(dim=0)) ** 2).sum(dim=0),
            minimum=rows.min(dim=0).values,
            maximum=rows.max(dim=0).values,
        )
        self.merge(other)

    def merge(self, other: StreamingMoments) -> None:
        """Fold ``other`` (statistics of disjoint rows) into this one."""
        if other.count == 0:
            return
        if self.count == 0:
            self.count, self.mean, self.m2 = other.count, other.mean.clone(), other.m2.clone()
            self.minimum, self.maximum = other.minimum.clone(), other.maximum.clone()
            return
        if other.mean.shape != self.mean.shape:
            raise ValueError(
                f"Cannot merge statistics of dimension {tuple(other.mean.shape)} into "
                f"{tuple(self.mean.shape)}."
            )
        other_mean = other.mean.to(self.mean.device)
        total = self.count + other.count
        delta = other_mean - self.mean
        self.mean = self.mean + delta * (other.count / total)
        self.m2 = (
            self.m2 + other.m2.to(self.m2.device) + delta**2 * (self.count * other.count / total)
        )
        self.minimum = torch.minimum(self.minimum, other.minimum.to(self.minimum.device))
        self.maximum = torch.maximum(self.maximum, other.maximum.to(self.maximum.device))
        self.count = total

    def variance(self, ddof: int = 0) -> torch.Tensor:
        if self.count - ddof <= 0:
            raise ValueError(
                f"Variance with ddof={ddof} needs more than {ddof} rows; have {self.count}."
            )
        return self.m2 / (self.count - ddof)

"""anisotropy: mean pairwise cosine similarity of pooled representations (a geomlens plugin)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from geomlens import Analysis, AnalysisConfig, Result, option, register_analysis


@dataclass
class AnisotropyConfig(AnalysisConfig):
    site: str | None = option(None, "Site to read; default: the last block's hook_resid_post.")
    pooling: str = option("mean", "How to pool tokens per input: mean, last, first or span.")


@register_analysis("anisotropy")
class Anisotropy(Analysis):
    """Mean cosine similarity between the pooled representations of distinct inputs."""

    Config = AnisotropyConfig
    config: AnisotropyConfig

    def __init__(self, config: AnisotropyConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        self.unit_sum: torch.Tensor | None = None
        self.count = 0

    def sites(self, adapter: Any) -> list[str]:
        if self.config.site is not None:
            return [self.config.site]
        return [s for s in adapter.sites() if s.endswith("hook_resid_post")][-1:]

    def update(self, batch: Any) -> None:
        (site,) = self.sites(self.context.adapter)
        pooled = batch.pooled(site, self.config.pooling).to(torch.float64)
        units = torch.nn.functional.normalize(pooled, dim=-1).sum(dim=0)
        self.unit_sum = units if self.unit_sum is None else self.unit_sum + units
        self.count += pooled.shape[0]

    def merge(self, other: Analysis) -> None:
        self._check_mergeable(other)
        if other.unit_sum is not None:
            self.unit_sum = (
                other.unit_sum.clone()  # no shared tensors (docs/plugins.md, merge checklist)
                if self.unit_sum is None
                else self.unit_sum + other.unit_sum
            )
            self.count += other.count

    def finalize(self) -> Result:
        if self.count < 2:
            raise ValueError("anisotropy needs at least two inputs.")
        n = self.count
        mean_cosine = (self.unit_sum.square().sum().item() - n) / (n * (n - 1))
        return Result(self.name, metrics={"mean_cosine": mean_cosine, "inputs": float(n)})

    @classmethod
    def plot(cls, result: Result, **kwargs: Any) -> Any:
        """A bar of the mean cosine (0: isotropic; 1: every input points one way)."""
        from matplotlib.figure import Figure

        figure = Figure(figsize=kwargs.get("figsize", (3, 3)))
        axis = figure.subplots()
        axis.bar(["mean cosine"], [result.metrics["mean_cosine"]])
        axis.set_ylim(min(0.0, result.metrics["mean_cosine"]), 1.0)
        return figure

"""activation-stats: per-site mean norm, per-dimension mean and variance, dead units.

The simplest real analysis: it exercises the whole path (sites, batches, streaming moments,
merge, result) and gives the first look at a model's activations. Statistics are over every
real (non-padding) token, or over pooled examples when ``pooling`` is set.
"""

from __future__ import annotations

from typing import Any

import torch

from geomlens.analyses.base import Analysis, Batch
from geomlens.models.adapter import Adapter
from geomlens.results import Result
from geomlens.stats import StreamingMoments

from . import DECLARATION
from .config import ActivationStatsConfig


class ActivationStats(Analysis, declaration=DECLARATION):
    """Streaming per-dimension moments at each site."""

    config: ActivationStatsConfig

    def __init__(self, config: ActivationStatsConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        self.moments: dict[str, StreamingMoments] = {}
        self.norm_sums: dict[str, float | torch.Tensor] = {}  # a device tensor once updated

    def sites(self, adapter: Adapter) -> list[str]:
        site = self.config.site
        if site is None:
            defaults = adapter.residual_sites()
            return defaults or adapter.sites()
        return [site] if isinstance(site, str) else list(site)

    def update(self, batch: Batch) -> None:
        # Statistics stay on the device in float64; nothing is read back per batch (no .item(),
        # no boolean indexing), so a GPU run never waits on this loop.
        for site in self.sites(self._run_context().adapter):
            moments = self.moments.setdefault(site, StreamingMoments())
            if self.config.pooling is None:
                activation = batch.activations[site]
                rows = activation.reshape(activation.shape[0] * activation.shape[1], -1)
                real = batch.attention_mask.to(rows.device).reshape(-1)
                moments.update_masked(rows, real)
                if rows.device.type == "cpu":  # selecting stalls nothing on a CPU
                    norms = rows[real.bool()].to(torch.float64).norm(dim=1).sum()
                else:  # where, not × real: a padded row's NaN norm times 0 is still NaN.
                    norms = torch.where(real.bool(), rows.to(torch.float64).norm(dim=1), 0.0)
                    norms = norms.sum()
            else:
                rows = batch.pooled(site, self.config.pooling)
                rows = rows.reshape(rows.shape[0], -1)
                moments.update(rows)
                norms = rows.to(torch.float64).norm(dim=1).sum()
            self.norm_sums[site] = self.norm_sums.get(site, 0.0) + norms

    def merge(self, other: Analysis) -> None:
        self._check_mergeable(other)
        assert isinstance(other, ActivationStats)
        for site, moments in other.moments.items():
            self.moments.setdefault(site, StreamingMoments()).merge(moments)
            theirs = other.norm_sums[site]
            mine = self.norm_sums.get(site, 0.0)
            if isinstance(mine, torch.Tensor) and isinstance(theirs, torch.Tensor):
                theirs = theirs.to(mine.device)
            self.norm_sums[site] = mine + theirs

    def finalize(self) -> Result:
        if not self.moments:
            raise ValueError("activation-stats saw no data; give at least one example.")
        metrics: dict[str, float] = {}
        rows: list[dict[str, Any]] = []
        for site, moments in self.moments.items():
            variance = moments.variance().cpu()
            # variance() refused a site with no rows: mean and maximum are set.
            assert moments.mean is not None and moments.maximum is not None
            mean = moments.mean.cpu()
            maximum = moments.maximum.cpu()
            dead = maximum <= self.config.dead_threshold
            metrics[f"{site}.mean_norm"] = float(self.norm_sums[site]) / float(moments.count)
            metrics[f"{site}.dead_fraction"] = dead.double().mean().item()
            metrics[f"{site}.mean_variance"] = variance.mean().item()
            metrics[f"{site}.rows"] = float(moments.count)
            rows.extend(
                {"site": site, "dim": d, "mean": m, "variance": v, "max": x}
                for d, (m, v, x) in enumerate(
                    zip(mean.tolist(), variance.tolist(), maximum.tolist())
                )
            )
        return Result(self.name, metrics=metrics, tables={"per_dimension": rows})

    @classmethod
    def plot(cls, result: Result, **kwargs: Any) -> Any:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        sites = [k[: -len(".mean_norm")] for k in result.metrics if k.endswith(".mean_norm")]
        figure, (ax_norm, ax_var) = plt.subplots(1, 2, figsize=(10, 3.5))
        positions = range(len(sites))
        ax_norm.bar(positions, [result.metrics[f"{s}.mean_norm"] for s in sites])
        ax_norm.set_ylabel("mean token norm")
        ax_var.bar(positions, [result.metrics[f"{s}.mean_variance"] for s in sites])
        ax_var.set_ylabel("mean per-dimension variance")
        for ax in (ax_norm, ax_var):
            ax.set_xticks(list(positions), sites, rotation=60, ha="right", fontsize=7)
        figure.suptitle(f"activation-stats · {result.provenance.get('model_id', '')}")
        figure.tight_layout()
        return figure

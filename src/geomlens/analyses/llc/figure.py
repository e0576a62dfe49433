"""llc's figure: each chain's mean loss per SGLD step against the loss at the weights."""

from __future__ import annotations

from typing import Any

from geomlens.formatting import number
from geomlens.results import Result


def draw(result: Result) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.5))
    chains: dict[int, list[tuple[int, float]]] = {}
    for row in result.tables.get("loss_trace", []):
        chains.setdefault(int(row["chain"]), []).append((int(row["step"]), row["loss"]))
    for chain, points in sorted(chains.items()):
        steps, losses = zip(*sorted(points))
        axis.plot(steps, [float("nan") if v is None else v for v in losses], lw=1,
                  label=f"chain {chain}")  # fmt: skip
    origin = result.metrics.get("summary.init_loss")
    if origin is not None:
        axis.axhline(origin, color="k", ls="--", lw=1, label="loss at the weights")
    axis.set_xlabel("SGLD step")
    axis.set_ylabel("mean next-token loss (nats)")
    axis.legend(fontsize=7)
    llc = result.metrics.get("summary.llc")
    std = result.metrics.get("summary.llc_std")
    axis.set_title(
        f"llc · {result.provenance.get('model_id', '')}: λ̂ = {number(llc)} (sd {number(std)})",
        fontsize=9,
    )
    figure.tight_layout()
    return figure

"""sae-features' figure: k histograms, pool growth, and the bound (or the splice fidelity)."""

from __future__ import annotations

from typing import Any

import numpy as np

from geomlens.formatting import human_name, layer_label, number
from geomlens.results import Result


def plot_sae_features(result: Result) -> Any:
    """Per site: the k histograms by condition, the pool's growth, and the bound's terms (or
    the splice fidelity when there is no bound)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sites = sorted({row["site"] for row in result.tables.get("ood", [])})
    figure, axes = plt.subplots(len(sites), 3, figsize=(14, 3.8 * len(sites)), squeeze=False)
    for (ax_k, ax_pool, ax_bound), site in zip(axes, sites):
        _plot_histograms(ax_k, result, site)
        growth = [r for r in result.tables.get("pool_growth", []) if r["site"] == site]
        ax_pool.plot([r["tokens"] for r in growth], [r["pool_size"] for r in growth], "-o", ms=3)
        ax_pool.set_xscale("log")
        ax_pool.set_xlabel("calibration tokens")
        ax_pool.set_ylabel("pool size P")
        ax_pool.set_title("pool growth")
        _plot_bound(ax_bound, result, site)
    figure.suptitle(f"sae-features · {result.provenance.get('model_id', '')}")
    figure.tight_layout()
    return figure


def token_variant(result: Result) -> str:
    """Which tokens the figure and the reading both count: ``"content"`` (special tokens and
    attention sinks left out) when the result has them, else ``"all"`` (an older result)."""
    return "content" if result.tables.get("k_histogram_content") else "all"


def _plot_histograms(ax: Any, result: Result, site: str, bins: int = 40) -> None:
    # The same tokens as the reading beside the figure: content tokens where the result has
    # them (an attention sink's k would otherwise dominate every histogram and AUROC).
    way = token_variant(result)
    table, auroc_name, k_name = (
        ("k_histogram_content", "auroc_content", "mean_k_content")
        if way == "content"
        else ("k_histogram", "auroc", "mean_k")
    )
    rows = [r for r in result.tables.get(table, []) if r["site"] == site]
    if not rows:
        return
    width = max(1, int(np.ceil((max(r["k"] for r in rows) + 1) / bins)))
    edges = np.arange(0, max(r["k"] for r in rows) + width + 1, width)
    for condition in dict.fromkeys(r["condition"] for r in rows):
        mine = [r for r in rows if r["condition"] == condition]
        counts, _ = np.histogram(
            [r["k"] for r in mine], bins=edges, weights=[r["count"] for r in mine]
        )
        # The legend gives the numbers the reading gives, of the same tokens: mean k, AUROC.
        mean_k = result.metrics.get(f"{site}.{k_name}.{condition}")
        auroc = result.metrics.get(f"{site}.{auroc_name}.{condition}")
        numbers = [f"mean k {number(mean_k)}"] if mean_k is not None and mean_k == mean_k else []
        if auroc is not None and auroc == auroc:  # NaN: no AUROC to show
            numbers.append(f"AUROC {number(auroc)}")
        label = human_name(condition) + (f" ({', '.join(numbers)})" if numbers else "")
        ax.stairs(counts / counts.sum(), edges, label=label)
    tokens = "content tokens" if way == "content" else "every token"
    ax.set_xlabel(f"active latents per token, k ({tokens})")
    ax.set_ylabel(f"fraction of {tokens}")
    ax.set_title(f"{layer_label(site)}: k and AUROC against held-out text, {tokens}", fontsize=9)
    ax.legend(fontsize=7)


#: The bound's terms in words (the legend of its panel).
BOUND_TERMS = {
    "empirical_risk": "empirical risk",
    "eps_loss": "splice loss gap ε̂_loss",
    "pool_mismatch": "pool mismatch term",
    "complexity": "complexity term",
    "k_union": "union over k term",
    "confidence": "confidence term",
}


def _plot_bound(ax: Any, result: Result, site: str) -> None:
    rows = [r for r in result.tables.get("bound_terms", []) if r["site"] == site]
    if not rows:
        _plot_fidelity(ax, result, site)
        return
    forms = list(dict.fromkeys(r["form"] for r in rows))
    bottoms = [0.0] * len(forms)
    for term in dict.fromkeys(r["term"] for r in rows):
        values = [
            next((r["value"] for r in rows if r["form"] == f and r["term"] == term), 0.0)
            for f in forms
        ]
        words = BOUND_TERMS.get(term, term.replace("_", " "))
        if term == "eps_loss":  # the number the reading quotes, in its unit
            words += f" {number(values[0])} bits"
        ax.bar(forms, values, bottom=bottoms, label=words)
        bottoms = [b + v for b, v in zip(bottoms, values)]
    threshold = result.metrics.get(f"{site}.vacuity_threshold")
    if threshold is not None:
        ax.axhline(threshold, color="k", ls="--", lw=1, label="log2 V (vacuous above)")
    ax.set_ylabel("bits per token")
    ax.set_title("bound terms")
    ax.legend(fontsize=7)


def _plot_fidelity(ax: Any, result: Result, site: str) -> None:
    """Without a bound (an encoder, or no held-out losses): ε̂ per condition, with the shuffle."""
    rows = [r for r in result.tables.get("ood", []) if r["site"] == site and "epsilon_loss" in r]
    if not rows:
        ax.text(0.5, 0.5, "no bound: needs a causal LM's loss", ha="center", va="center")
        ax.set_axis_off()
        return
    positions = np.arange(len(rows))
    ax.bar(positions - 0.2, [r["epsilon_loss"] for r in rows], 0.4, label="SAE splice")
    ax.bar(positions + 0.2, [r["epsilon_loss_shuffled"] for r in rows], 0.4, label="shuffled")
    ax.set_xticks(
        positions, [human_name(r["condition"]) for r in rows], rotation=30, ha="right", fontsize=7
    )
    kind = next((n["note"] for n in result.tables.get("notes", []) if n["item"] == "loss_kind"), "")
    ax.set_ylabel(f"ε̂_loss ({human_name(kind)})" if kind else "ε̂_loss", fontsize=8)
    ax.set_title("no bound (no LM loss): splice fidelity", fontsize=9)
    ax.legend(fontsize=7)

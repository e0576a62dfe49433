"""From counts to numbers: per-site metrics and tables, OOD AUROC, and the SSD bound."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from geomlens.analyses.sae_features.config import (
    CALIBRATION,
    HELDOUT,
    SMOOTHED_BITS,
    SAEFeaturesConfig,
)
from geomlens.analyses.sae_features.counting import (
    ConditionStats,
    SiteState,
    pool_growth,
    pool_mismatch,
)
from geomlens.theory import ssd as ssd_theory


def summarize_site(
    site: str,
    state: SiteState,
    config: SAEFeaturesConfig,
    loss_kind: str | None,
    metrics: dict[str, float],
    tables: dict[str, list[dict[str, Any]]],
) -> None:
    """Add one site's metrics and table rows: P, SSD, k per condition, η̂, ε̂_loss, OOD
    AUROC, and the bound when a causal LM's held-out loss is there."""
    from sklearn.metrics import roc_auc_score

    pool = state.pool
    P = int(pool.sum())
    metrics[f"{site}.pool_size"] = float(P)
    metrics[f"{site}.ssd"] = ssd_theory.ssd(P, state.m)
    metrics[f"{site}.calibration_tokens"] = float(state.calibration_tokens)
    metrics[f"{site}.dictionary_size"] = float(state.m)
    tables["pool"].extend(
        {"site": site, "latent": int(j), "first_seen_token": int(state.first_seen[j])}
        for j in np.flatnonzero(pool)
    )
    tables["pool_growth"].extend(pool_growth(site, state))
    heldout = state.conditions.get(HELDOUT)
    for name, stats in state.conditions.items():
        metrics[f"{site}.mean_k.{name}"] = float(np.mean(stats.mean_k))
        metrics[f"{site}.max_k.{name}"] = float(np.max(stats.max_k))
        metrics[f"{site}.mean_max_k.{name}"] = float(np.mean(stats.max_k))
        metrics[f"{site}.token_mean_k.{name}"] = stats.k_sum / stats.tokens
        assert stats.histogram is not None
        tables["k_histogram"].extend(
            {"site": site, "condition": name, "k": int(k), "count": int(c)}
            for k, c in enumerate(stats.histogram)
            if c
        )
        row: dict[str, Any] = {
            "site": site,
            "condition": name,
            "inputs": len(stats.mean_k),
            "tokens": stats.tokens,
            "mean_k": float(np.mean(stats.mean_k)),
            "max_k": int(np.max(stats.max_k)),
        }
        if name != CALIBRATION and stats.latents:
            eta = pool_mismatch(stats.latents, pool, state.m)
            metrics[f"{site}.eta.{name}" if name != HELDOUT else f"{site}.eta"] = eta
            row["eta"] = eta
        if stats.losses:
            losses = np.asarray(stats.losses, dtype=float)
            gap = np.abs(losses[:, 1] - losses[:, 0])
            shuffled_gap = np.abs(losses[:, 2] - losses[:, 0])
            suffix = "" if name == HELDOUT else f".{name}"
            metrics[f"{site}.epsilon_loss{suffix}"] = float(gap.mean())
            if not np.isnan(shuffled_gap).any():
                metrics[f"{site}.epsilon_loss_shuffled{suffix}"] = float(shuffled_gap.mean())
            row["epsilon_loss"] = float(gap.mean())
            row["epsilon_loss_shuffled"] = float(shuffled_gap.mean())
            if loss_kind == SMOOTHED_BITS:
                metrics[f"{site}.model_loss{suffix}"] = float(losses[:, 0].mean())
                metrics[f"{site}.proxy_loss{suffix}"] = float(losses[:, 1].mean())
        if name not in (CALIBRATION, HELDOUT) and heldout is not None:
            labels = np.r_[np.zeros(len(heldout.mean_k)), np.ones(len(stats.mean_k))]
            by_mean = float(roc_auc_score(labels, np.r_[heldout.mean_k, stats.mean_k]))
            by_max = float(roc_auc_score(labels, np.r_[heldout.max_k, stats.max_k]))
            metrics[f"{site}.auroc.{name}"] = by_mean if config.score == "mean" else by_max
            row["auroc_mean_k"], row["auroc_max_k"] = by_mean, by_max
        tables["ood"].append(row)
    if heldout is not None and heldout.losses and loss_kind == SMOOTHED_BITS:
        add_bound(site, state, heldout, config, metrics, tables)


def add_bound(
    site: str,
    state: SiteState,
    heldout: ConditionStats,
    config: SAEFeaturesConfig,
    metrics: dict[str, float],
    tables: dict[str, list[dict[str, Any]]],
) -> None:
    """The SSD bound at ``site`` in both forms (pool and released), its terms and n*."""
    losses = np.asarray(heldout.losses, dtype=float)
    risk = float(losses[:, 1].mean())
    eps = float(np.abs(losses[:, 1] - losses[:, 0]).mean())
    eta = metrics.get(f"{site}.eta", 0.0)
    P, V = int(state.pool.sum()), float(state.vocab_size or 2)
    common = dict(m=state.m, V=V, risk=risk, eps_loss=eps, delta=config.delta)
    common["a"] = config.smoothing
    pool_form = ssd_theory.bound(P=P, N=len(losses), eta=eta, **common)
    pool_star = ssd_theory.crossing_size(P=P, eta=eta, **common)
    k = heldout.k_sum / heldout.tokens
    predicted = int(losses[:, 3].sum())
    released = ssd_theory.released_bound(k=k, N=predicted, **common)
    released_star = ssd_theory.released_crossing_size(k=k, **common)
    forms = {"pool": (pool_form, pool_star), "released": (released, released_star)}
    for form, (terms, star) in forms.items():
        metrics[f"{site}.bound.{form}"] = terms.total
        metrics[f"{site}.n_star.{form}"] = star
        metrics[f"{site}.non_vacuous.{form}"] = float(terms.non_vacuous)
        for term in ("empirical_risk", "eps_loss", "pool_mismatch", "complexity", "k_union"):
            if hasattr(terms, term):
                tables["bound_terms"].append(
                    {"site": site, "form": form, "term": term, "value": getattr(terms, term)}
                )
        tables["bound_terms"].append(
            {"site": site, "form": form, "term": "confidence", "value": terms.confidence}
        )
    chosen, star = forms[config.bound_form]
    metrics[f"{site}.bound"] = chosen.total
    metrics[f"{site}.n_star"] = star
    metrics[f"{site}.vacuity_threshold"] = math.log2(V)
    metrics[f"{site}.risk"] = risk
    metrics[f"{site}.heldout_sequences"] = float(len(losses))
    metrics[f"{site}.heldout_predicted_tokens"] = float(predicted)


#: Metric names in the order a reader wants them (the CLI prints the first ones): a pattern
#: ending in "." is a family (``.mean_k.<condition>``), any other is one metric.
_HEADLINE = (
    ".mean_k.", ".auroc.", ".max_k.", ".pool_size", ".ssd", ".eta", ".epsilon_loss",
    ".epsilon_loss_shuffled", ".bound", ".n_star",
)  # fmt: skip


def headline_first(metrics: dict[str, float]) -> dict[str, float]:
    """The same metrics, headline ones first in ``_HEADLINE`` order, the rest after."""

    def rank(name: str) -> int:
        for position, pattern in enumerate(_HEADLINE):
            if (pattern in name) if pattern.endswith(".") else name.endswith(pattern):
                return position
        return len(_HEADLINE)

    return dict(sorted(metrics.items(), key=lambda item: rank(item[0])))

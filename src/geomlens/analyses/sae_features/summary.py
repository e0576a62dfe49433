"""From counts to numbers: per-site metrics and tables, k both ways, OOD AUROC with its
interval, the SAE's quality, and the SSD bound."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from geomlens.analyses.sae_features.config import (
    CALIBRATION,
    HELDOUT,
    POOL_SATURATION,
    SMOOTHED_BITS,
    SAEFeaturesConfig,
)
from geomlens.analyses.sae_features.counting import (
    ConditionStats,
    Count,
    SiteState,
    Total,
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
    *,
    seed: int = 0,
    provenance: dict[str, Any] | None = None,
    notes: dict[str, str] | None = None,
) -> None:
    """Add one site's metrics and table rows: P, SSD, k per condition both ways, η̂, ε̂_loss,
    OOD AUROC with score intervals, beside the baselines' (norm, Mahalanobis), the SAE's quality (``provenance``:
    what :meth:`SAEFeatures.setup` read off the SAE), and the bound when a causal LM's held-out
    loss is there. A saturated pool adds a line to ``notes``."""
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
        if not stats.mean_k:
            continue
        row = condition_counts(site, name, stats, metrics, tables)
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
            add_aurocs(site, name, heldout, stats, config, seed, metrics, row)
        tables["ood"].append(row)
    add_quality(site, state, provenance or {}, metrics, notes if notes is not None else {})
    if heldout is not None and heldout.losses and loss_kind == SMOOTHED_BITS:
        add_bound(site, state, heldout, config, metrics, tables)


def tokens_note(config: SAEFeaturesConfig, special_ids: list[int]) -> str:
    """The result's note on which tokens each way of counting k reads."""
    ratio = config.sink_norm_ratio
    sinks = (
        f"attention sinks (positions whose activation norm exceeds {ratio:g} × the median "
        "norm of the row's other real tokens)"
        if ratio is not None
        else "no attention sinks (sink_norm_ratio=None)"
    )
    splice = (
        "the splice replaces every position"
        if config.splice_excluded
        else "the splice keeps the model's own activation at excluded positions, as "
        "sae-lens's evaluations do"
    )
    return (
        "k is reported two ways. *_all counts every real token, special tokens and sinks "
        "included (the SSD paper's way; the pool P, η̂ and the bound's k̄ use it); *_content "
        f"leaves out special tokens (ids {special_ids}) and {sinks} (sae-lens's way; "
        f"explained variance, L0 and dead latents use it); {splice}. The deprecated names "
        "mean_k.<condition>, max_k.*, mean_max_k.*, token_mean_k.* and auroc.* are the *_all "
        "values."
    )


def condition_counts(
    site: str,
    name: str,
    stats: ConditionStats,
    metrics: dict[str, float],
    tables: dict[str, list[dict[str, Any]]],
) -> dict[str, Any]:
    """k both ways, lengths and excluded tokens of one condition; its ``ood`` table row."""
    ways: dict[str, tuple[Sequence[float], Sequence[float], Total, Count]] = {
        "all": (stats.mean_k, stats.max_k, stats.k_sum, stats.tokens),
        "content": (
            stats.mean_k_content, stats.max_k_content, stats.k_sum_content,
            stats.tokens_content,
        ),
    }  # fmt: skip
    row: dict[str, Any] = {"site": site, "condition": name, "inputs": len(stats.mean_k)}
    for way, (means, maxima, k_sum, tokens) in ways.items():
        values = {
            "mean_k": _nanmean(means),
            "max_k": float(np.nanmax(maxima)) if np.isfinite(maxima).any() else math.nan,
            "mean_max_k": _nanmean(maxima),
            "token_mean_k": float(k_sum) / int(tokens) if tokens else math.nan,
        }
        for metric, value in values.items():
            metrics[f"{site}.{metric}_{way}.{name}"] = value
            if way == "all":  # deprecated names of the paper's way (CHANGELOG.md)
                metrics[f"{site}.{metric}.{name}"] = value
        row[f"tokens_{way}"] = tokens
        row[f"mean_k_{way}"], row[f"max_k_{way}"] = values["mean_k"], values["max_k"]
    # The table's old columns: the paper's way.
    row.update(tokens=stats.tokens, mean_k=row["mean_k_all"], max_k=max(stats.max_k))
    lengths = np.asarray(stats.lengths)
    row.update(
        median_tokens=float(np.median(lengths)),
        min_tokens=int(lengths.min()),
        max_tokens=int(lengths.max()),
        special_tokens=stats.special_tokens,
        sink_tokens=stats.sink_tokens,
        sinks_at_first_position=stats.sinks_at_first_position,
        explained_variance=stats.explained_variance,
    )
    metrics[f"{site}.median_tokens.{name}"] = row["median_tokens"]
    metrics[f"{site}.excluded_tokens.{name}"] = float(stats.special_tokens + stats.sink_tokens)
    metrics[f"{site}.explained_variance.{name}"] = stats.explained_variance
    for way, histogram in (("all", stats.histogram), ("content", stats.histogram_content)):
        table = "k_histogram" if way == "all" else "k_histogram_content"
        tables.setdefault(table, []).extend(
            {"site": site, "condition": name, "k": int(k), "count": int(c)}
            for k, c in enumerate(histogram if histogram is not None else [])
            if c
        )
    return row


def add_aurocs(
    site: str,
    name: str,
    heldout: ConditionStats,
    stats: ConditionStats,
    config: SAEFeaturesConfig,
    seed: int,
    metrics: dict[str, float],
    row: dict[str, Any],
) -> None:
    """AUROC of this condition against held-out, by mean and max k, both ways, and by the two
    baselines on the raw activations (mean content-token norm, Mahalanobis distance of the mean
    content activation to the held-out rows); each with Newcombe's score interval
    (``geomlens.stats.auroc_score_interval``), paired when every row of the condition was made
    from its own held-out row (``source_row``) and every held-out row has one."""
    from geomlens.stats import auroc, auroc_score_interval

    order = pairing(heldout, stats)
    row["paired_with_source"] = order is not None
    row["negatives"] = len(heldout.mean_k)
    scores: dict[
        tuple[str, str], tuple[Sequence[float] | np.ndarray, Sequence[float] | np.ndarray]
    ] = {
        ("mean", "all"): (heldout.mean_k, stats.mean_k),
        ("max", "all"): (heldout.max_k, stats.max_k),
        ("mean", "content"): (heldout.mean_k_content, stats.mean_k_content),
        ("max", "content"): (heldout.max_k_content, stats.max_k_content),
        ("norm", "baseline"): (heldout.norms, stats.norms),
    }
    distances = mahalanobis_scores(heldout, stats)
    if distances is not None:
        scores[("mahalanobis", "baseline")] = distances
    for (score, way), (scores_out, scores_in) in scores.items():
        negatives, positives = np.asarray(scores_out, float), np.asarray(scores_in, float)
        paired = False
        if order is not None:  # pair i: held-out row i and the row made from it
            negatives, positives = negatives[order[0]], positives[order[1]]
            both = np.isfinite(negatives) & np.isfinite(positives)
            negatives, positives, paired = negatives[both], positives[both], True
        negatives, positives = _finite(negatives), _finite(positives)
        if len(negatives) == 0 or len(positives) == 0:
            continue
        value = float(auroc(negatives, positives))
        low, high = auroc_score_interval(
            negatives, positives, confidence=config.confidence, paired=paired
        )
        if way == "baseline":
            key = f"auroc_{score}"
            row[key], row[f"{key}_ci_low"], row[f"{key}_ci_high"] = value, low, high
            metrics[f"{site}.{key}.{name}"] = value
            metrics[f"{site}.{key}_ci_low.{name}"] = low
            metrics[f"{site}.{key}_ci_high.{name}"] = high
            continue
        suffix = "" if way == "all" else "_content"
        row[f"auroc_{score}_k{suffix}"] = value
        row[f"auroc_{score}_k{suffix}_ci_low"], row[f"auroc_{score}_k{suffix}_ci_high"] = (
            low,
            high,
        )
        if score == config.score:
            metrics[f"{site}.auroc_{way}.{name}"] = value
            metrics[f"{site}.auroc_{way}_ci_low.{name}"] = low
            metrics[f"{site}.auroc_{way}_ci_high.{name}"] = high
            if way == "all":  # the deprecated name (CHANGELOG.md)
                metrics[f"{site}.auroc.{name}"] = value


def pairing(heldout: ConditionStats, stats: ConditionStats) -> tuple[np.ndarray, ...] | None:
    """Index orders putting held-out row i beside the row made from it, or None when the
    condition is not paired one to one with the whole held-out set (a row without a source,
    a source used twice, or a held-out row left without its partner)."""
    negatives, positives = np.asarray(heldout.pairs, int), np.asarray(stats.pairs, int)
    if len(negatives) != len(positives) or len(negatives) < 2 or (positives < 0).any():
        return None
    if len(set(negatives.tolist())) != len(negatives):
        return None
    if sorted(negatives.tolist()) != sorted(positives.tolist()):
        return None
    return np.argsort(negatives, kind="stable"), np.argsort(positives, kind="stable")


def mahalanobis_scores(
    heldout: ConditionStats, stats: ConditionStats
) -> tuple[np.ndarray, np.ndarray] | None:
    """Each input's squared Mahalanobis distance from its mean content activation to the
    held-out rows' (Ledoit–Wolf shrunk covariance, so it exists with fewer rows than
    dimensions). No row is scored against a reference that holds it or its source: a held-out
    row is scored against the other held-out rows (leave one out), an OOD row made from a
    held-out row (its ``source_row``) against the held-out rows without that one (leave source
    out), any other OOD row against all of them. None without the activations (or three
    held-out rows)."""
    from sklearn.covariance import LedoitWolf

    if not heldout.pooled or len(stats.pooled) != len(stats.mean_k):
        return None
    reference = np.stack(heldout.pooled)
    usable = np.isfinite(reference).all(1)
    if usable.sum() < 3:
        return None
    candidates = np.stack(stats.pooled)
    ok = np.isfinite(candidates).all(1)
    sources = np.asarray(stats.pairs, int) if len(stats.pairs) == len(candidates) else None
    own = np.asarray(heldout.pairs, int) if len(heldout.pairs) == len(reference) else None
    positives = np.full(len(candidates), np.nan)
    negatives = np.full(len(reference), np.nan)
    left = ok.copy()  # OOD rows still to score
    for i in np.flatnonzero(usable):
        others = usable.copy()
        others[i] = False
        fitted = LedoitWolf().fit(reference[others])
        negatives[i] = fitted.mahalanobis(reference[i : i + 1])[0]
        if sources is not None and own is not None and own[i] >= 0:
            made = left & (sources == own[i])
            if made.any():
                positives[made] = fitted.mahalanobis(candidates[made])
                left &= ~made
    if left.any():
        positives[left] = LedoitWolf().fit(reference[usable]).mahalanobis(candidates[left])
    return negatives, positives


def add_quality(
    site: str,
    state: SiteState,
    record: dict[str, Any],
    metrics: dict[str, float],
    notes: dict[str, str],
) -> None:
    """What a reader needs to judge the SAE: explained variance, L0 and dead latents on
    held-out content tokens, its decoder's column norms, a saturated pool."""
    heldout = state.conditions.get(HELDOUT)
    if heldout is not None and heldout.tokens_content:
        metrics[f"{site}.explained_variance"] = heldout.explained_variance
        metrics[f"{site}.l0"] = float(heldout.k_sum_content) / int(heldout.tokens_content)
    if state.fired is not None:
        dead = int((~state.fired).sum())
        metrics[f"{site}.dead_latents"] = float(dead)
        metrics[f"{site}.dead_fraction"] = dead / state.m
    if "decoder_norms" in record:
        low, mean, high = record["decoder_norms"]
        metrics[f"{site}.decoder_norm_min"] = low
        metrics[f"{site}.decoder_norm_mean"] = mean
        metrics[f"{site}.decoder_norm_max"] = high
        metrics[f"{site}.decoder_norm_spread"] = (high - low) / mean if mean else math.nan
    if record.get("norm_scaling_factor") is not None:
        metrics[f"{site}.norm_scaling_factor"] = float(record["norm_scaling_factor"])
    P = int(state.pool.sum())
    saturated = P / state.m >= 1.0 - POOL_SATURATION
    metrics[f"{site}.pool_saturated"] = float(saturated)
    if saturated:
        notes[f"pool_saturated:{site}"] = (
            f"Saturated pool: P = {P} of m = {state.m} latents (within "
            f"{POOL_SATURATION:.0%} of the dictionary): SSD is then about m and says nothing "
            "about this model's sparsity; a larger or sparser SAE, or pool_top_k, is needed."
        )


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
    k = float(heldout.k_sum) / int(heldout.tokens)
    predicted = int(losses[:, 3].sum())
    released = ssd_theory.released_bound(k=k, N=predicted, **common)
    released_star = ssd_theory.released_crossing_size(k=k, **common)
    forms: dict[str, tuple[ssd_theory.SSDBound | ssd_theory.ReleasedCodeBound, float]] = {
        "pool": (pool_form, pool_star),
        "released": (released, released_star),
    }
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
    ".mean_k_content.", ".auroc_content.", ".mean_k_all.", ".auroc_all.", ".max_k_content.",
    ".max_k_all.", ".pool_size", ".ssd", ".eta", ".epsilon_loss", ".epsilon_loss_shuffled",
    ".bound", ".n_star", ".explained_variance", ".l0", ".dead_fraction",
)  # fmt: skip


def headline_first(metrics: dict[str, float]) -> dict[str, float]:
    """The same metrics, headline ones first in ``_HEADLINE`` order, the rest after."""

    def rank(name: str) -> int:
        for position, pattern in enumerate(_HEADLINE):
            if (pattern in name) if pattern.endswith(".") else name.endswith(pattern):
                return position
        return len(_HEADLINE)

    return dict(sorted(metrics.items(), key=lambda item: rank(item[0])))


def _nanmean(values: Sequence[float]) -> float:
    finite = _finite(values)
    return float(finite.mean()) if len(finite) else math.nan


def _finite(values: Sequence[float] | np.ndarray) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    return array[np.isfinite(array)]

"""The sae-features analysis's reading for the report: plain words from its result's public metrics."""

from __future__ import annotations

import math
from collections.abc import Mapping

from geomlens.analyses.words.metric_words import metric_refused
from geomlens.analyses.words.reading_words import human_name, layer_label, number, per_site
from geomlens.results import Result


def reading(result: Result) -> list[str]:
    pool = per_site(result, "pool_size")
    if not pool:
        return []
    site = list(pool)[-1]
    metrics = result.metrics
    used = (
        f"At {layer_label(site)} the sparse autoencoder used {number(pool[site])} distinct "
        "latents on the calibration text (the pool, P)"
    )
    if metrics.get(f"{site}.pool_saturated"):
        lines = [
            f"{used}, within 5 % of the dictionary's "
            f"{number(metrics.get(f'{site}.dictionary_size'))} latents: the pool is saturated, "
            "so its sparse semantic dimension SSD, and the bound computed from it, say nothing "
            "about the model and are not read."
        ]
    else:
        lines = [
            f"{used}; its sparse semantic dimension is SSD = "
            f"{number(metrics.get(f'{site}.ssd', math.nan))}."
        ]
    lines.extend(_explosion_lines(metrics, site))
    if f"{site}.explained_variance" in metrics:
        lines.append(
            f"The SAE itself: it explains {number(metrics[f'{site}.explained_variance'])} of the "
            f"variance of held-out activations with L0 = {number(metrics.get(f'{site}.l0'))} "
            f"active latents per token; {number(metrics.get(f'{site}.dead_latents', math.nan))}"
            f" latents never fire; its decoder columns' norms spread by "
            f"{number(metrics.get(f'{site}.decoder_norm_spread', math.nan))} of their mean (the "
            "bound assumes unit norms)."
        )
    if f"{site}.bound" in metrics and metric_refused(result, f"{site}.bound") is not None:
        lines.append(
            "The SSD generalisation bound U and the sample size N* are computed from the "
            "saturated pool, so neither is read."
        )
    else:
        lines.append(_bound_line(metrics, site))
    return lines


def _explosion_lines(metrics: Mapping[str, float], site: str) -> list[str]:
    """Feature explosion in words: mean k on held-out English against each out-of-distribution
    input, with the AUROC that tells them apart; nothing when there is no held-out k."""

    def family(name: str) -> dict[str, float]:
        prefix = f"{site}.{name}."
        return {k[len(prefix) :]: v for k, v in metrics.items() if k.startswith(prefix)}

    # Content tokens (special tokens and attention sinks left out) where the result has them;
    # a result from before they existed has only the every-token names.
    way = "content" if family("mean_k_content") else None
    mean_k = family(f"mean_k_{way}") if way else family("mean_k")
    auroc = family(f"auroc_{way}") if way else family("auroc")
    low, high = family(f"auroc_{way}_ci_low"), family(f"auroc_{way}_ci_high")

    def score(name: str) -> str:
        if name not in auroc:
            return ""
        interval = (
            f", 95 % interval {number(low[name])}–{number(high[name])}"
            if name in low and math.isfinite(low[name])
            else ""
        )
        return f" (AUROC {number(auroc[name])}{interval})"

    if "heldout" not in mean_k:
        return []
    others = ", ".join(
        f"{human_name(name)} {number(value)}{score(name)}"
        for name, value in mean_k.items()
        if name not in ("heldout", "calibration")
    )
    tokens = (
        " (special tokens and attention sinks left out, as sae-lens counts; counting every "
        f"token as the SSD paper does, held-out k is "
        f"{number(metrics.get(f'{site}.mean_k_all.heldout', math.nan))})"
        if way
        else ""
    )
    return [
        f"Feature explosion: the mean number of active latents per token is "
        f"{number(mean_k['heldout'])} on held-out English{tokens} and "
        f"{others or 'not measured'} on out-of-distribution inputs of the same lengths; an "
        "AUROC near 1 means k alone tells them apart, and an interval that reaches 0.5 means "
        "this sample cannot tell."
    ]


def _bound_line(metrics: Mapping[str, float], site: str) -> str:
    """The SSD generalisation bound in both forms against guessing, or why there is none."""
    if f"{site}.bound" not in metrics:
        return (
            "The model has no language-model loss (an encoder), so the SSD bound, which bounds "
            "that loss, is not computed; the fidelity of the SAE's reconstruction is measured "
            "on the output instead."
        )
    forms = [
        f"{form} form {number(metrics[f'{site}.bound.{form}'])} bits, N* = "
        f"{number(metrics.get(f'{site}.n_star.{form}', math.nan))}"
        for form in ("pool", "released")
        if f"{site}.bound.{form}" in metrics
    ]
    return (
        f"The generalisation bound U is {number(metrics[f'{site}.bound'])} bits per token "
        f"against log2 V = {number(metrics.get(f'{site}.vacuity_threshold', math.nan))} for "
        f"guessing ({'; '.join(forms)}): it becomes non-vacuous from about N* held-out "
        f"sequences (pool form) or predicted tokens (released form); ε̂_loss = "
        f"{number(metrics.get(f'{site}.epsilon_loss', math.nan))} bits."
    )

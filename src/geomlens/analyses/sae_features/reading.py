"""The sae-features analysis's reading for the report: plain words from its result's public metrics."""

from __future__ import annotations

from geomlens.analyses.words import reading_words as words
from geomlens.results import Result


def reading(result: Result) -> list[str]:
    pool = words.per_site(result, "pool_size")
    if not pool:
        return []
    site = list(pool)[-1]
    metrics = result.metrics

    def value(name: str) -> str:
        return words.metric_value(result, f"{site}.{name}")

    used = (
        f"At {words.layer_label(site)} the sparse autoencoder used {value('pool_size')} (distinct, "
        "on the calibration text: the pool, P)"
    )
    if metrics.get(f"{site}.pool_saturated"):
        lines = [
            f"{used}, within 5 % of the dictionary's {value('dictionary_size')}: the pool is "
            "saturated, "
            "so its sparse semantic dimension SSD, and the bound computed from it, say nothing "
            "about the model and are not read."
        ]
    else:
        lines = [f"{used}; its sparse semantic dimension is SSD = {value('ssd')}."]
    lines.extend(_explosion_lines(result, site))
    if f"{site}.explained_variance" in metrics:
        lines.append(
            f"The SAE itself: it explains {value('explained_variance')} of the variance of "
            f"held-out activations with L0 = {value('l0')} active per token; "
            f"{value('dead_latents')} never fire; its decoder columns' norms spread by "
            f"{value('decoder_norm_spread')} of their mean (the bound assumes unit norms)."
        )
    if f"{site}.bound" in metrics and words.metric_refused(result, f"{site}.bound") is not None:
        lines.append(
            "The SSD generalisation bound U and the sample size N* are computed from the "
            "saturated pool, so neither is read."
        )
    else:
        lines.append(_bound_line(result, site))
    return lines


def _explosion_lines(result: Result, site: str) -> list[str]:
    """Feature explosion in words: mean k on held-out English against each out-of-distribution
    input, with the AUROC that tells them apart; nothing when there is no held-out k."""

    metrics = result.metrics

    def family(name: str) -> dict[str, float]:
        prefix = f"{site}.{name}."
        return {k[len(prefix) :]: v for k, v in metrics.items() if k.startswith(prefix)}

    # Content tokens (special tokens and attention sinks left out) where the result has them;
    # a result from before they existed has only the every-token names.
    way = "content" if family("mean_k_content") else None
    k_name = f"mean_k_{way}" if way else "mean_k"
    auroc_name = f"auroc_{way}" if way else "auroc"
    mean_k, auroc = family(k_name), family(auroc_name)

    def score(name: str) -> str:
        if name not in auroc:
            return ""
        key = f"{site}.{auroc_name}.{name}"
        return f" (AUROC {words.metric_value(result, key)}, {words.metric_interval(result, key)})"

    if "heldout" not in mean_k:
        return []
    others = ", ".join(
        f"{words.human_name(name)} {words.metric_value(result, f'{site}.{k_name}.{name}')}{score(name)}"
        for name in mean_k
        if name not in ("heldout", "calibration")
    )
    tokens = (
        " (special tokens and attention sinks left out, as sae-lens counts; counting every "
        f"token as the SSD paper does, held-out k is "
        f"{words.metric_value(result, f'{site}.mean_k_all.heldout')})"
        if way
        else ""
    )
    return [
        f"Feature explosion: the mean number of active latents per token is "
        f"{words.metric_value(result, f'{site}.{k_name}.heldout')} on held-out English{tokens} and "
        f"{others or 'not measured'} on out-of-distribution inputs of the same lengths; an "
        "AUROC near 1 means k alone tells them apart, and an interval that reaches 0.5 means "
        "this sample cannot tell."
    ]


def _bound_line(result: Result, site: str) -> str:
    """The SSD generalisation bound in both forms against guessing, or why there is none."""
    metrics = result.metrics

    def value(name: str) -> str:
        return words.metric_value(result, f"{site}.{name}")

    if f"{site}.bound" not in metrics:
        return (
            "The model has no language-model loss (an encoder), so the SSD bound, which bounds "
            "that loss, is not computed; the fidelity of the SAE's reconstruction is measured "
            "on the output instead."
        )
    forms = [
        f"{form} form {value(f'bound.{form}')}, N* = {value(f'n_star.{form}')}"
        for form in ("pool", "released")
        if f"{site}.bound.{form}" in metrics
    ]
    return (
        f"The generalisation bound U is {value('bound')} against log2 V = "
        f"{value('vacuity_threshold')} for "
        f"guessing ({'; '.join(forms)}): it becomes non-vacuous from about N* held-out "
        f"sequences (pool form) or predicted tokens (released form); ε̂_loss = "
        f"{value('epsilon_loss')}."
    )

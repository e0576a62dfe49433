"""Plain-words readings of results: what a number means for a reader who has not read the papers.

A reading is written from a result's public metric names only (the names each analysis
documents), never from its internals, so it reads a result loaded back from JSON as well as a
fresh one. An analysis (a plugin too) may supply its own reading with a classmethod
``reading(result) -> str``; otherwise the built-in readings below are used, and for an analysis
with none, a plain list of its main metrics.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from geomlens.formatting import layer_label, metric_name, metric_value, number, percent
from geomlens.results import Result
from geomlens.theory.resolution import regime

__all__ = ["headline", "layer_label", "number", "per_site", "read", "reading"]

Reading = Callable[[Result], list[str]]
READINGS: dict[str, Reading] = {}
#: Metrics shown by the fallback reading.
FALLBACK_METRICS = 6
#: Each analysis's headline metrics (the part of ``<site>.<name>`` after the site): the page
#: shows them for every site, the printed summary the first few at the last site. Owners of an
#: analysis keep its entry; an analysis not listed shows its first per-site metrics.
HEADLINES: dict[str, tuple[str, ...]] = {
    "activation-stats": ("mean_norm", "mean_variance", "dead_fraction"),
    "similarity": ("g_nearest", "g_farthest", "zero_crossing"),
    "resolution": (
        "epsilon", "epsilon_ci_low", "epsilon_ci_high", "delta", "p_similarity",
        "p_identification", "front_distance",
    ),
    "abstraction": ("alpha", "alpha_ci_low", "alpha_ci_high", "alpha_null_p95"),
    "ccgp": ("ccgp", "within_context_accuracy"),
    "linearization-effect": ("alpha_base", "alpha_linearized", "ccgp_base", "ccgp_linearized"),
    # k and AUROC the content way (special tokens and attention sinks left out, sae-lens's
    # way); the *_all values are in the result beside them.
    "sae-features": (
        "pool_size", "dictionary_size", "ssd", "mean_k_content.heldout",
        "auroc_content.random_tokens", "auroc_content.replaced_15pct",
        "auroc_content.python_source", "explained_variance", "bound",
    ),
}  # fmt: skip
#: Headline metrics of an analysis without an entry in :data:`HEADLINES`.
FALLBACK_HEADLINES = 4
#: Headline metrics in the printed summary line.
SUMMARY_HEADLINES = 3


def reading(name: str) -> Callable[[Reading], Reading]:
    """Register the reading of analysis ``name``."""

    def decorate(function: Reading) -> Reading:
        READINGS[name] = function
        return function

    return decorate


def per_site(result: Result, metric: str) -> dict[str, float]:
    """``{site: value}`` of the metrics named ``<site>.<metric>``, in the result's order."""
    suffix = "." + metric
    return {
        key[: -len(suffix)]: value for key, value in result.metrics.items() if key.endswith(suffix)
    }


def _extremes(values: dict[str, float]) -> tuple[str, str]:
    finite = {k: v for k, v in values.items() if not math.isnan(v)}
    if not finite:
        return "", ""
    return max(finite, key=finite.__getitem__), min(finite, key=finite.__getitem__)


@reading("activation-stats")
def _activation_stats(result: Result) -> list[str]:
    norms = per_site(result, "mean_norm")
    dead = per_site(result, "dead_fraction")
    if not norms:
        return []
    sites = list(norms)
    growth = norms[sites[-1]] / norms[sites[0]] if norms[sites[0]] else math.nan
    lines = [
        f"The mean token norm goes from {number(norms[sites[0]])} at {layer_label(sites[0])} to "
        f"{number(norms[sites[-1]])} at {layer_label(sites[-1])} (× {number(growth)}): "
        "this is the scale the other analyses' representations live at."
    ]
    worst = max(dead, key=dead.__getitem__) if dead else None
    # A residual-stream dimension has no activation function: one that stays negative on every
    # token is a direction the data never push positive, not a "dead" (unused) unit.
    if worst is not None and dead[worst] > 0:
        text = (
            f"{percent(dead[worst])} of the dimensions at {layer_label(worst)} were never "
            "positive on this data."
        )
        if "resid" in worst:
            text += (
                " In the residual stream that is a sign convention, not a dead unit: such a "
                "dimension still carries information in its negative values."
            )
        else:
            text += " After an activation function these are dead units (they pass nothing)."
        lines.append(text)
    else:
        lines.append("Every dimension at every site was positive on some token of this data.")
    return lines


@reading("similarity")
def _similarity(result: Result) -> list[str]:
    table = result.tables.get("g_of_d", [])
    if not table:
        return []
    sites = list(dict.fromkeys(row["site"] for row in table))
    site = sites[-1]
    rows = sorted((r for r in table if r["site"] == site), key=lambda r: r["distance"])
    nearest, farthest = rows[0], rows[-1]
    crossing = next((r["distance"] for r in rows if (r.get("mean") or 0.0) < 0.0), None)
    lines = [
        f"g(d) is the mean similarity of two stimuli at distance d; a stimulus with itself has "
        f"g(0) = 1. At {layer_label(site)} g falls to {number(nearest['mean'])} already at the "
        f"nearest distance d = {number(nearest['distance'])}, and to {number(farthest['mean'])} "
        f"at d = {number(farthest['distance'])}."
    ]
    across = result.metrics.get(f"{site}.g0_across_texts", math.nan)
    if not _missing(across):
        lines.append(_across_texts_words(across, nearest["mean"]))
    if crossing is not None:
        lines.append(
            f"It first drops below zero near d = {number(crossing)}: stimuli farther apart than "
            "that look less alike than two random ones (with the centred cosine this is partly "
            "the centring: it makes the mean similarity of all pairs about 0)."
        )
    lines.append(
        "A g that falls with d means the model represents the stimuli's metric; how fast it "
        "falls is the resolution (see the resolution analysis)."
    )
    return lines


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _across_texts_words(across: float, nearest: float) -> str:
    """What g at d = 0 across texts says about the first drop of g."""
    drop = 1.0 - nearest
    share = (1.0 - across) / drop if drop > 0 else math.nan
    return (
        f"The same stimulus in another text has similarity {number(across)} (d = 0 across "
        f"texts, against 1 on the diagonal): the text alone accounts for about "
        f"{number(100 * share, 2)} % of the drop to the nearest distance."
    )


def _percent(share: float) -> str:
    return "undefined" if _missing(share) else f"{100 * share:.0f} %"


@reading("resolution")
def _resolution(result: Result) -> list[str]:
    epsilon = per_site(result, "epsilon")
    if not epsilon:
        return []
    site = list(epsilon)[-1]

    def metric(name: str) -> float:
        return result.metrics.get(f"{site}.{name}", math.nan)

    family = next(
        (r["family"] for r in result.tables.get("fits", []) if r["site"] == site and r["chosen"]),
        None,
    )
    lines = [
        f"At {layer_label(site)} the fitted resolution scale is ε = {number(epsilon[site])} "
        f"(95 % interval {number(metric('epsilon_ci_low'))} to "
        f"{number(metric('epsilon_ci_high'))}) with a noise floor Δ = {number(metric('delta'))}"
        + (f", {family} family" if family else "")
        + ": the fit keeps the measured g(0) = 1, so ε describes the measured curve."
    ]
    if family == "two-scale":
        lines.append(
            f"One scale does not fit: {_percent(metric('fast_share'))} of the fall happens on "
            f"a fast scale ε_fast = {number(metric('epsilon_fast'))}, the rest on ε; the "
            f"similarity lost already at the nearest distance "
            f"({number(metric('first_distance'))}) is {number(metric('amplitude'))}."
        )
    across = metric("g0_across_texts")
    if not _missing(across) and not _missing(metric("amplitude")):
        lines.append(_across_texts_words(across, 1.0 - metric("amplitude")))
    half = metric("half_width")
    if not _missing(half):
        below = half < metric("first_distance")
        lines.append(
            f"g is halfway down at d = {number(half)} (interval "
            f"{number(metric('half_width_ci_low'))} to {number(metric('half_width_ci_high'))})"
            + (
                ", inside the first step of the stimulus grid: the data only bound it above."
                if below
                else "."
            )
        )
    offset = metric("offset")
    if not _missing(offset) and offset < 0:
        lines.append(
            f"Far pairs sit {number(-offset)} below zero: that is the centring offset (the "
            "stimulus set's mean is subtracted), not noise. ε, the half-width, Δ and the "
            "offset belong to this model, this stimulus range and this centring together."
        )
    mean_b = metric("mean_b")
    if not _missing(mean_b):
        lines.append(
            f"Within the half-width a stimulus finds on average ⟨b⟩ = {number(mean_b)} of the "
            "stimuli (itself included) "
            f"(interval {number(metric('mean_b_ci_low'))} to {number(metric('mean_b_ci_high'))})"
            f": the {regime(float(min(max(mean_b, 0.0), 1.0)))} regime, which "
            f"{_percent(metric('regime_agreement'))} of the bootstrap resamples agree on."
        )
    method = next(
        (r.get("method") for r in result.tables.get("placement", []) if r["site"] == site), None
    )
    how = (
        f" (Monte Carlo, {number(metric('samples'))} trials, standard errors "
        f"{number(metric('p_similarity_se'), 2)} and {number(metric('p_identification_se'), 2)})"
        if method == "monte_carlo"
        else ""
    )
    lines.append(
        f"Measured on the stimuli themselves, a similarity test is passed with probability "
        f"p_S = {number(metric('p_similarity'))} and an identification test with p_I = "
        f"{number(metric('p_identification'))}{how} (1/2 is chance for both)"
        + (
            f"; the fitted g predicts ({number(metric('p_similarity_theory'))}, "
            f"{number(metric('p_identification_theory'))})."
            if not _missing(metric("p_similarity_theory"))
            else "."
        )
    )
    lines.append(
        "The universal front is what an all-or-nothing similarity (alike within ε, unlike "
        "beyond) reaches when every stimulus has a neighbourhood of the same size; graded "
        f"similarities can lie above it. This site sits {number(metric('front_distance'))} "
        "from it in the (p_S, p_I) plane (see the theory figure below)."
    )
    return lines


def _site_row(result: Result, site: str) -> dict:
    """The ``sites`` table's row of ``site`` (which tasks its means average), or {}."""
    return next((r for r in result.tables.get("sites", []) if r.get("site") == site), {})


def _interval(low: float | None, high: float | None) -> str:
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return "no interval"
    return f"95 % interval {number(low)} to {number(high)}"


def _direction(low: float | None, high: float | None, what: str) -> str:
    """How sure a stated direction is, from its interval."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return f"with no interval, so the direction of {what} is not established"
    if low > 0 or high < 0:
        return f"the interval excludes 0, so {what} is resolved at this level"
    return f"the interval includes 0, so the direction of {what} is not resolved"


@reading("abstraction")
def _abstraction(result: Result) -> list[str]:
    alpha = per_site(result, "alpha")
    if not alpha:
        return []
    best, worst = _extremes(alpha)
    if not best:
        return []
    metrics = result.metrics
    tasks = _site_row(result, best).get("tasks", "the concept sets")
    lines = [
        "α is the mean cosine between a concept's difference vectors across contexts (e.g. "
        "king − queen against actor − actress): 1 means one shared direction, 0 none.",
        f"α is highest at {layer_label(best)} ({number(alpha[best])}, "
        f"{_interval(metrics.get(f'{best}.alpha_ci_low'), metrics.get(f'{best}.alpha_ci_high'))}"
        f" for the mean, tasks and contexts resampled) and lowest at {layer_label(worst)} "
        f"({number(alpha[worst])}); each is the mean over {tasks}.",
    ]
    p95 = metrics.get(f"{best}.alpha_null_p95")
    if p95 is not None:
        null = result.config.get("null", "within-context")
        where = "inside each context" if null == "within-context" else "across contexts"
        lines.append(
            f"With the concept label shuffled {where} ({null} null), the mean α there stays "
            f"below {number(p95)} in 95 % of shuffles; the measured {number(alpha[best])} is "
            f"{'above' if alpha[best] > p95 else 'not above'} it."
        )
    return lines


def _mean_of(rows: list[dict], column: str) -> float:
    values = [r[column] for r in rows if isinstance(r.get(column), (int, float))]
    values = [v for v in values if not math.isnan(v)]
    return sum(values) / len(values) if values else math.nan


@reading("ccgp")
def _ccgp(result: Result) -> list[str]:
    ccgp = per_site(result, "ccgp")
    if not ccgp:
        return []
    best, _ = _extremes(ccgp)
    if not best:
        return []
    rows = [r for r in result.tables.get("per_task", []) if r.get("site") == best]
    tasks = _site_row(result, best).get("tasks", "the concept sets")
    lines = [
        "CCGP trains a linear probe for the concept in some contexts and tests it in contexts "
        "it never saw; 0.5 is chance.",
        f"The best site is {layer_label(best)}: CCGP {number(ccgp[best])}, the mean over {tasks}.",
    ]
    within = [r for r in rows if not math.isnan(_mean_of([r], "within_context_accuracy"))]
    without = [r for r in rows if r not in within]
    if within:
        lines.append(
            f"For {', '.join(r['task'] for r in within)}, whose contexts hold several rows of "
            f"each value, CCGP is {number(_mean_of(within, 'ccgp'))} against a within-context "
            f"accuracy of {number(_mean_of(within, 'within_context_accuracy'))} (probes "
            "cross-validated inside each context): a CCGP close to it means the concept is "
            "coded the same way everywhere (abstractly)."
        )
    if without:
        lines.append(
            f"{', '.join(r['task'] for r in without)} have one row per value and context, so "
            "no within-context accuracy exists; their mixed-context accuracy (rows split at "
            f"random over all contexts, i.e. unseen words) is "
            f"{number(_mean_of(without, 'mixed_context_accuracy'))} against a CCGP of "
            f"{number(_mean_of(without, 'ccgp'))}."
        )
    return lines


def _fidelity_phrase(metrics: dict[str, float]) -> str:
    if "fidelity.output_embedding_cosine" in metrics:
        return (
            f"the linearised model's output embedding keeps a cosine of "
            f"{number(metrics['fidelity.output_embedding_cosine'])} with the original's "
            "(1 = unchanged)"
        )
    if "fidelity.lm_loss_change" in metrics:
        return (
            f"the next-token loss changes by {number(metrics['fidelity.lm_loss_change'])} nats "
            f"(from {number(metrics.get('fidelity.lm_loss_base', math.nan))})"
        )
    return "its fidelity cost was not measured"


@reading("linearization-effect")
def _linearization_effect(result: Result) -> list[str]:
    metrics = result.metrics
    info = (result.tables.get("linearization") or [{}])[0]
    mode = info.get("mode", result.config.get("mode", "identity"))
    lines = [
        f"The MLP nonlinearity of layer(s) {info.get('layers', '?')} is replaced by its linear "
        f"version ({mode}) and α and CCGP are measured again; the theory predicts that a "
        "nonlinearity attenuates abstraction, so linearising should raise α."
    ]
    if "summary.alpha_base" in metrics:
        low = metrics.get("summary.alpha_change_ci_low")
        high = metrics.get("summary.alpha_change_ci_high")
        lines.append(
            f"At {layer_label(info.get('summary_site', 'the summary site'))}, mean α goes from "
            f"{number(metrics['summary.alpha_base'])} to "
            f"{number(metrics['summary.alpha_linearized'])} (change "
            f"{number(metrics.get('summary.alpha_change', math.nan))}, {_interval(low, high)} "
            f"from a paired bootstrap over tasks and contexts: "
            f"{_direction(low, high, 'the change')}), up in "
            f"{number(metrics.get('summary.tasks_alpha_up', math.nan))} of "
            f"{number(metrics.get('summary.n_tasks', math.nan))} concept sets, while "
            f"{_fidelity_phrase(metrics)}. CCGP goes from "
            f"{number(metrics.get('summary.ccgp_base', math.nan))} to "
            f"{number(metrics.get('summary.ccgp_linearized', math.nan))}, up or equal in "
            f"{number(metrics.get('summary.tasks_ccgp_up_or_equal', math.nan))} of "
            f"{number(metrics.get('summary.n_tasks', math.nan))} sets (no interval is computed "
            "for the CCGP change: read its direction from the per-task counts only)."
        )
    return lines


@reading("sae-features")
def _sae_features(result: Result) -> list[str]:
    pool = per_site(result, "pool_size")
    if not pool:
        return []
    site = list(pool)[-1]
    metrics = result.metrics
    lines = [
        f"At {layer_label(site)} the sparse autoencoder used {number(pool[site])} distinct "
        f"latents on the calibration text (the pool, P); its sparse semantic dimension is "
        f"SSD = {number(metrics.get(f'{site}.ssd', math.nan))}."
    ]
    if metrics.get(f"{site}.pool_saturated"):
        lines[-1] += (
            f" That is within 5 % of the dictionary's {number(metrics[f'{site}.dictionary_size'])}"
            " latents: the pool is saturated, and SSD then says nothing about the model."
        )

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

    if "heldout" in mean_k:
        others = ", ".join(
            f"{name} {number(value)}{score(name)}"
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
        lines.append(
            f"Feature explosion: the mean number of active latents per token is "
            f"{number(mean_k['heldout'])} on held-out English{tokens} and "
            f"{others or 'not measured'} on out-of-distribution inputs of the same lengths; an "
            "AUROC near 1 means k alone tells them apart, and an interval that reaches 0.5 means "
            "this sample cannot tell."
        )
    if f"{site}.explained_variance" in metrics:
        lines.append(
            f"The SAE itself: it explains {number(metrics[f'{site}.explained_variance'])} of the "
            f"variance of held-out activations with L0 = {number(metrics.get(f'{site}.l0'))} "
            f"active latents per token; {number(metrics.get(f'{site}.dead_latents', math.nan))}"
            f" latents never fire; its decoder columns' norms spread by "
            f"{number(metrics.get(f'{site}.decoder_norm_spread', math.nan))} of their mean (the "
            "bound assumes unit norms)."
        )
    if f"{site}.bound" in metrics:
        forms = [
            f"{form} form {number(metrics[f'{site}.bound.{form}'])} bits, N* = "
            f"{number(metrics.get(f'{site}.n_star.{form}', math.nan))}"
            for form in ("pool", "released")
            if f"{site}.bound.{form}" in metrics
        ]
        lines.append(
            f"The generalisation bound U is {number(metrics[f'{site}.bound'])} bits per token "
            f"against log2 V = {number(metrics.get(f'{site}.vacuity_threshold', math.nan))} for "
            f"guessing ({'; '.join(forms)}): it becomes non-vacuous from about N* held-out "
            f"sequences (pool form) or predicted tokens (released form); ε̂_loss = "
            f"{number(metrics.get(f'{site}.epsilon_loss', math.nan))} bits."
        )
    else:
        lines.append(
            "The model has no language-model loss (an encoder), so the SSD bound, which bounds "
            "that loss, is not computed; the fidelity of the SAE's reconstruction is measured "
            "on the output instead."
        )
    return lines


def fallback_reading(result: Result) -> list[str]:
    shown = list(result.metrics.items())[:FALLBACK_METRICS]
    if not shown:
        return ["This analysis reported no metrics; see its tables in its JSON file."]
    more = len(result.metrics) - len(shown)
    text = "; ".join(f"{name} = {number(value)}" for name, value in shown)
    return [f"Main metrics: {text}" + (f" (and {more} more in its JSON file)." if more else ".")]


def read(result: Result, analysis: type | None = None) -> list[str]:
    """Paragraphs reading ``result`` in plain words (see the module docstring)."""
    own = getattr(analysis, "reading", None)
    if callable(own):
        text = own(result)
        return [text] if isinstance(text, str) else list(text)
    function = READINGS.get(result.analysis)
    paragraphs = function(result) if function else []
    return paragraphs or fallback_reading(result)


def result_sites(result: Result) -> list[str]:
    """The sites a result has metrics for, in the model's order (from its provenance)."""
    from geomlens.formatting import split_metric

    provenance = result.provenance or {}
    known = provenance.get("analysis_sites") or provenance.get("sites")
    if not known:  # a result made by hand: the sites its metric names spell out
        known = dict.fromkeys(split_metric(key)[0] for key in result.metrics)
        known = [site for site in known if site.startswith("blocks.")]
    return [site for site in known if any(k.startswith(site + ".") for k in result.metrics)]


def headline_metrics(result: Result) -> list[str]:
    """The names (after the site) of ``result``'s headline metrics that it has."""
    from geomlens.formatting import split_metric

    sites = result_sites(result)
    present = {split_metric(key, sites)[1] for key in result.metrics if split_metric(key, sites)[0]}
    wanted = HEADLINES.get(result.analysis)
    if wanted is None:
        ordered = dict.fromkeys(split_metric(key, sites)[1] for key in result.metrics)
        wanted = tuple(name for name in ordered if name in present)[:FALLBACK_HEADLINES]
    return [name for name in wanted if name in present]


def headline(result: Result) -> str:
    """A short line for the printed summary: the first headline metrics at the last site, with
    their units, or the result's first summary metrics."""
    sites = result_sites(result)
    names = headline_metrics(result)
    if sites and names:
        site = next(s for s in reversed(sites) if any(f"{s}.{n}" in result.metrics for n in names))
        parts = []
        for name in names:
            key = f"{site}.{name}"
            if key not in result.metrics or "_ci_" in name:
                continue
            text = f"{metric_name(name)} {metric_value(result, key)}"
            low, high = f"{site}.{name}_ci_low", f"{site}.{name}_ci_high"
            if low in result.metrics and high in result.metrics:
                text += (
                    f" (95 % interval {metric_value(result, low)} to {metric_value(result, high)})"
                )
            parts.append(text)
        return "; ".join(parts[:SUMMARY_HEADLINES]) + f" at {layer_label(site)}"
    summary = [(k, v) for k, v in result.metrics.items() if k.startswith("summary.")]
    shown = summary or list(result.metrics.items())
    return "; ".join(f"{name} {number(value)}" for name, value in shown[:3]) or "no metrics"

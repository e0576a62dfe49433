"""Quoted numbers of `abstraction`, `ccgp` and `linearization-effect` (README.md,
docs/abstraction.md).

Every α quoted says which tasks it averages and carries its interval; every α change carries
the linearisation's fidelity cost. The tangent-mode numbers need a second run of
linearization-effect (``--option mode=tangent``), which the driver does not make: the
``linearization-tangent`` section reads it from the results under ``TANGENT`` when given, and
otherwise runs it itself on the identity run's model, as ``geomlens run linearization-effect
--option mode=tangent`` does.
"""

from __future__ import annotations

import re
from typing import Any

from _format import finite, fmt, span, table

ANALYSES = ("abstraction", "ccgp", "linearization-effect")
#: Key of the tangent-mode linearization-effect result in the results mapping.
TANGENT = "linearization-effect:tangent"
#: The word-pair sets (one row per concept value and context).
WORD_PAIR_TASKS = ("degree", "gender", "number", "tense")


def _layer(site: str) -> str:
    found = re.match(r"blocks\.(\d+)\.", site)
    return found.group(1) if found else site


def _sites(result: Any) -> list[str]:
    return list(dict.fromkeys(r["site"] for r in result.tables["per_task"]))


def _tasks(result: Any, site: str) -> list[dict[str, Any]]:
    return [r for r in result.tables["per_task"] if r["site"] == site]


def _interval(low: Any, high: Any, digits: int = 2) -> str:
    if not (finite(low) and finite(high)):
        return "no interval"
    return f"{fmt(low, digits)} to {fmt(high, digits)}"


def _fidelity(result: Any) -> str:
    metrics = result.metrics
    if finite(metrics.get("fidelity.output_embedding_cosine")):
        return f"output-embedding cosine {fmt(metrics['fidelity.output_embedding_cosine'])}"
    return f"LM loss change {fmt(metrics.get('fidelity.lm_loss_change'))} nats"


def _change(result: Any) -> str:
    m = result.metrics
    return (
        f"mean α {fmt(m['summary.alpha_base'], 3)} → {fmt(m['summary.alpha_linearized'], 3)} "
        f"(change {fmt(m['summary.alpha_change'], 3)}, 95 % interval "
        f"{_interval(m['summary.alpha_change_ci_low'], m['summary.alpha_change_ci_high'], 3)}; "
        f"{fmt(m['summary.tasks_alpha_up'], integer=True)} of "
        f"{fmt(m['summary.n_tasks'], integer=True)} sets up), CCGP "
        f"{fmt(m['summary.ccgp_base'], 3)} → {fmt(m['summary.ccgp_linearized'], 3)}, at an "
        f"{_fidelity(result)}"
    )


def readme_paragraph(results: dict[str, Any]) -> str:
    """The README's sentences on what MiniLM gives."""
    alpha, ccgp = results["abstraction"], results["ccgp"]
    sites = _sites(alpha)
    m = alpha.metrics
    top = max(sites, key=lambda s: m[f"{s}.alpha"])
    pair_means = [
        sum(r["alpha"] for r in rows) / len(rows)
        for rows in ([r for r in _tasks(alpha, s) if r["task"] in WORD_PAIR_TASKS] for s in sites)
        if rows
    ]
    crossed = [r["alpha"] for s in sites for r in _tasks(alpha, s) if r["n_contexts"] < 3]
    null = [r["alpha_null_p95"] for s in sites for r in _tasks(alpha, s) if r["n_contexts"] >= 3]
    tasks = alpha.tables["sites"][0]["tasks"]
    pairs = [r for s in sites for r in _tasks(alpha, s) if r["task"] in WORD_PAIR_TASKS]
    above = all(r["alpha"] > r["alpha_null_p95"] for r in pairs)
    verdict = "every set at every layer above" if above else "not every set at every layer above"
    return (
        f"On MiniLM, α averaged over the five English sets ({tasks}) is {span(m[f'{s}.alpha'] for s in sites)} "
        f"by layer (at layer {_layer(top)}: {fmt(m[f'{top}.alpha'])}, 95 % interval "
        f"{_interval(m[f'{top}.alpha_ci_low'], m[f'{top}.alpha_ci_high'])} for that mean, sets "
        f"and contexts resampled). The four word-pair sets alone average {span(pair_means)}, "
        f"{verdict} the 95th percentile of its within-context label-shuffle null "
        f"({span(null)}); "
        f"`animacy-by-colour` (different words in each colour; two contexts, so no interval and "
        f"no null that can reject) gives {span(crossed)}. CCGP is "
        f"{span(ccgp.metrics[f'{s}.ccgp'] for s in _sites(ccgp))}. "
        f"Linearising layer 4's GELU to the identity (the paper's protocol): "
        f"{_change(results['linearization-effect'])}; the tangent expansion at the mean "
        f"pre-activation, which moves the model far less: {_change(_tangent_result(results))}."
    )


def alpha_table(results: dict[str, Any]) -> str:
    """docs/abstraction.md: α per task and layer, the site mean with its interval."""
    alpha = results["abstraction"]
    sites = _sites(alpha)
    task_names = [r["task"] for r in _tasks(alpha, sites[0])]
    rows = []
    for site in sites:
        by_task = {r["task"]: r for r in _tasks(alpha, site)}
        cells = [
            f"{fmt(by_task[t]['alpha'])} ({_interval(by_task[t]['alpha_ci_low'], by_task[t]['alpha_ci_high'])})"
            for t in task_names
        ]
        m = alpha.metrics
        rows.append(
            [
                _layer(site),
                *cells,
                f"{fmt(m[f'{site}.alpha'])} ({_interval(m[f'{site}.alpha_ci_low'], m[f'{site}.alpha_ci_high'])})",
                f"{fmt(m[f'{site}.alpha_null_p95_within_context'])} / "
                f"{fmt(m[f'{site}.alpha_null_p95_across_contexts'])}",
            ]
        )
    return table(
        ["layer", *task_names, "site mean", "null p95 of the mean (within / across)"], rows
    )


def null_table(results: dict[str, Any]) -> str:
    """docs/abstraction.md: both nulls' 95th percentiles per task at the last layer."""
    alpha = results["abstraction"]
    site = _sites(alpha)[-1]
    return table(
        [
            "task (layer " + _layer(site) + ")",
            "α",
            "within-context null p95",
            "across-contexts null p95",
            "p (within)",
        ],
        (
            [
                r["task"],
                fmt(r["alpha"]),
                fmt(r["alpha_null_p95_within_context"], 3),
                fmt(r["alpha_null_p95_across_contexts"], 3),
                fmt(r["alpha_p_value_within_context"], 3),
            ]
            for r in _tasks(alpha, site)
        ),
    )


def ccgp_table(results: dict[str, Any]) -> str:
    """docs/abstraction.md: per task, CCGP against the real within-context accuracy and the
    mixed one (ranges over layers), and the splits that ran."""
    ccgp = results["ccgp"]
    sites = _sites(ccgp)
    rows = []
    for task in [r["task"] for r in _tasks(ccgp, sites[0])]:
        mine = [r for s in sites for r in _tasks(ccgp, s) if r["task"] == task]
        rows.append(
            [
                task,
                span((r["ccgp"] for r in mine), 3),
                span((r["within_context_accuracy"] for r in mine), 3),
                span((r["mixed_context_accuracy"] for r in mine), 3),
                f"{mine[0]['split_scheme']} ({fmt(mine[0]['n_splits'], integer=True)})",
            ]
        )
    return table(
        [
            f"task (layers {_layer(sites[0])}–{_layer(sites[-1])})",
            "CCGP",
            "within-context",
            "mixed-context",
            "splits",
        ],
        rows,
    )


def linearization_identity(results: dict[str, Any]) -> str:
    """docs/abstraction.md: the identity linearisation's headline, cost included."""
    result = results["linearization-effect"]
    info = result.tables["linearization"][0]
    return (
        f"Layer(s) {info['layers']} → {info['mode']}, at the output of layer "
        f"{_layer(info['summary_site'])}: {_change(result)}."
    )


def _tangent_result(results: dict[str, Any]) -> Any:
    if TANGENT not in results:
        import geomlens as gl

        identity = results["linearization-effect"]
        adapter = gl.load(identity.provenance.get("model_id") or "all-MiniLM-L6-v2")
        analysis = gl.analysis_class("linearization-effect")(mode="tangent")
        results[TANGENT] = gl.run(analysis, adapter, analysis.default_data(adapter), seed=0)
    return results[TANGENT]


def linearization_tangent(results: dict[str, Any]) -> str:
    """docs/abstraction.md: the tangent linearisation's headline, cost included."""
    result = _tangent_result(results)
    info = result.tables["linearization"][0]
    return (
        f"Layer(s) {info['layers']} → {info['mode']}, at the output of layer "
        f"{_layer(info['summary_site'])}: {_change(result)}."
    )


SECTIONS = {
    "abstraction-readme": readme_paragraph,
    "abstraction-alpha": alpha_table,
    "abstraction-nulls": null_table,
    "abstraction-ccgp": ccgp_table,
    "linearization-identity": linearization_identity,
    "linearization-tangent": linearization_tangent,
}

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
    return f"{fmt(low, digits)}–{fmt(high, digits)}"


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
    means = [alpha.metrics[f"{s}.alpha"] for s in sites]
    word_pairs = [
        r["alpha"] for s in sites for r in _tasks(alpha, s) if r["task"] in WORD_PAIR_TASKS
    ]
    crossed = [r["alpha"] for s in sites for r in _tasks(alpha, s) if r["n_contexts"] < 3]
    null = [r["alpha_null_p95"] for s in sites for r in _tasks(alpha, s) if r["n_contexts"] >= 3]
    tasks = alpha.tables["sites"][0]["tasks"]
    return (
        f"On MiniLM, α averaged over the five English sets ({tasks}) is {span(means)} by layer "
        f"(95 % intervals for that mean, resampling sets and contexts, about "
        f"{_interval(min(alpha.metrics[f'{s}.alpha_ci_low'] for s in sites), max(alpha.metrics[f'{s}.alpha_ci_high'] for s in sites))}"
        f"); the word-pair sets alone give {span(word_pairs)} against a within-context "
        f"label-shuffle null whose 95th percentile is {span(null)}, and `animacy-by-colour` "
        f"(different words in each colour; two contexts, so no interval and no null that can "
        f"reject) gives {span(crossed)}. CCGP is "
        f"{span(ccgp.metrics[f'{s}.ccgp'] for s in _sites(ccgp))}. "
        f"Linearising layer 4's GELU to the identity (the paper's protocol): "
        f"{_change(results['linearization-effect'])}."
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
    """docs/abstraction.md: CCGP against the real within-context and the mixed accuracy."""
    ccgp = results["ccgp"]
    rows = []
    for site in _sites(ccgp):
        for r in _tasks(ccgp, site):
            rows.append(
                [
                    _layer(site),
                    r["task"],
                    fmt(r["ccgp"], 3),
                    fmt(r["within_context_accuracy"], 3),
                    fmt(r["mixed_context_accuracy"], 3),
                    f"{r['split_scheme']} ({fmt(r['n_splits'], integer=True)})",
                ]
            )
    return table(["layer", "task", "CCGP", "within-context", "mixed-context", "splits"], rows)


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

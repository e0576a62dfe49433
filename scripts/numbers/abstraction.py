"""Quoted numbers of `abstraction`, `ccgp` and `linearization-effect` (README.md,
docs/abstraction.md).

Every α quoted says which tasks it averages and carries its interval; every α change carries
the linearisation's fidelity cost. The tangent-mode numbers need a second run of
linearization-effect (``--option mode=tangent``): registered in ``RUNS`` under ``TANGENT``, so
the driver makes it (and keeps it with ``--save-results``) as ``geomlens run
linearization-effect --option mode=tangent`` does; a results mapping without it gets it run
on the identity run's model.
"""

from __future__ import annotations

import re
from typing import Any

from _format import finite, fmt, span, table

ANALYSES = ("abstraction", "ccgp", "linearization-effect")
#: Key of the tangent-mode linearization-effect result in the results mapping.
TANGENT = "linearization-effect:tangent"


def _tangent_run(adapter: Any) -> Any:
    import geomlens as gl

    analysis = gl.analysis_class("linearization-effect")(mode="tangent")
    return gl.run(analysis, adapter, analysis.default_data(adapter), seed=0, progress=False)


RUNS = {TANGENT: _tangent_run}


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
    corrected = ""
    if finite(m.get("summary.alpha_corrected_base")):
        corrected = (
            f"corrected α {fmt(m['summary.alpha_corrected_base'], 3)} → "
            f"{fmt(m['summary.alpha_corrected_linearized'], 3)} (change "
            f"{fmt(m['summary.alpha_corrected_change'], 3)}, 95 % interval "
            f"{_interval(m['summary.alpha_corrected_change_ci_low'], m['summary.alpha_corrected_change_ci_high'], 3)}; "
            f"{fmt(m['summary.tasks_alpha_corrected_up'], integer=True)} of "
            f"{fmt(m['summary.n_tasks_alpha_corrected'], integer=True)} sets with several rows "
            "per cell up), "
        )
    return (
        f"{corrected}raw α at {fmt(m['summary.rows_per_cell'], integer=True)} row per cell "
        f"{fmt(m['summary.alpha_base'], 3)} → {fmt(m['summary.alpha_linearized'], 3)} "
        f"(change {fmt(m['summary.alpha_change'], 3)}, 95 % interval "
        f"{_interval(m['summary.alpha_change_ci_low'], m['summary.alpha_change_ci_high'], 3)}; "
        f"{fmt(m['summary.tasks_alpha_up'], integer=True)} of "
        f"{fmt(m['summary.n_tasks_alpha'], integer=True)} sets up), CCGP "
        f"{fmt(m['summary.ccgp_base'], 3)} → {fmt(m['summary.ccgp_linearized'], 3)}, at an "
        f"{_fidelity(result)}"
    )


def _rows(value: Any) -> str:
    count = int(round(float(value)))
    return f"{count} row{'' if count == 1 else 's'} per cell"


def readme_paragraph(results: dict[str, Any]) -> str:
    """The README's sentences on what MiniLM gives."""
    alpha, ccgp = results["abstraction"], results["ccgp"]
    sites = _sites(alpha)
    m = alpha.metrics
    top = max(sites, key=lambda s: m[f"{s}.alpha"])
    site_row = alpha.tables["sites"][0]
    one_row = [r for s in sites for r in _tasks(alpha, s) if r["rows_per_cell_min"] < 2]
    several = [r for s in sites for r in _tasks(alpha, s) if r["rows_per_cell_min"] >= 2]
    above = all(r["alpha"] > r["alpha_null_p95"] for r in one_row)
    verdict = "every set at every layer above" if above else "not every set at every layer above"
    text = (
        "On MiniLM (rows: the marked word's tokens averaged at each layer's residual stream; α "
        "compares difference vectors, so centring does not enter) the raw α grows with the rows "
        "averaged into each class mean (Spearman–Brown), so sets are compared only at equal "
        f"cell size. The word-pair sets ({site_row['alpha_tasks']}; "
        f"{_rows(site_row['rows_per_cell'])}) average {span(m[f'{s}.alpha'] for s in sites)} by "
        f"layer (at layer {_layer(top)}: {fmt(m[f'{top}.alpha'])}, 95 % interval "
        f"{_interval(m[f'{top}.alpha_ci_low'], m[f'{top}.alpha_ci_high'])} for that mean, sets "
        f"and contexts resampled), {verdict} the 95th percentile of its within-context "
        f"label-shuffle null ({span(r['alpha_null_p95'] for r in one_row)}); with one row per "
        "cell they have no noise-corrected α."
    )
    shuffles = int(alpha.config.get("n_shuffles", 200))

    def shared(rows: list[dict[str, Any]]) -> str:
        """Whether every layer's interval holds 1 (one shared direction, up to noise)."""
        holds = [r["alpha_corrected_ci_low"] <= 1 <= r["alpha_corrected_ci_high"] for r in rows]
        if all(holds):
            return ", every layer's interval holding 1 (one shared direction, up to noise)"
        return f", {sum(holds)} of {len(holds)} layers' intervals holding 1"

    for task in dict.fromkeys(r["task"] for r in several):
        mine = [r for r in several if r["task"] == task]
        best = max(mine, key=lambda r: r["alpha_corrected"])
        p_values = [r["alpha_p_value_within_context"] for r in mine]
        floor = all(abs(p - 1 / (shuffles + 1)) < 1e-12 for p in p_values)
        p_words = (
            f"p = {fmt(1 / (shuffles + 1), 3)} at every layer (the smallest {shuffles} shuffles "
            "can give)"
            if floor
            else f"p {span(p_values, 3)}"
        )
        above_one = "; a disattenuated cosine, above 1 only by noise in the correction"
        text += (
            f" `{task}` ({_rows(mine[0]['rows_per_cell'])}, {fmt(mine[0]['n_contexts'], integer=True)} "
            f"contexts) has raw α {span(r['alpha'] for r in mine)} and a noise-corrected α of "
            f"{span(r['alpha_corrected'] for r in mine)} (at layer {_layer(best['site'])}: "
            f"{fmt(best['alpha_corrected'])}, 95 % interval "
            f"{_interval(best['alpha_corrected_ci_low'], best['alpha_corrected_ci_high'])}"
            f"{above_one if max(r['alpha_corrected'] for r in mine) > 1 else ''})"
            f"{shared(mine)}; shuffling the concept label among each context's rows gives "
            f"{p_words}."
        )
    if several and one_row:
        text += (
            " The two kinds of set are not compared here: the word pairs have no corrected α, "
            "and a raw α at another cell size is another quantity."
        )
    cm = ccgp.metrics
    csites = _sites(ccgp)
    text += (
        f" CCGP is {span(cm[f'{s}.ccgp'] for s in csites)} over the five sets, and "
        f"{span(cm[f'{s}.ccgp_within_tasks'] for s in csites)} over the set with a within-context "
        f"accuracy, beside that accuracy ({span(cm[f'{s}.within_context_accuracy'] for s in csites)})."
        f" Linearising layer 4's GELU to the identity (the paper's protocol): "
        f"{_change(results['linearization-effect'])}; the tangent expansion at the mean "
        f"pre-activation, which moves the model far less: {_change(_tangent_result(results))}."
    )
    return text


def alpha_table(results: dict[str, Any]) -> str:
    """docs/abstraction.md: α per task and layer (corrected α beside the raw one where cells
    hold several rows), the site mean of the comparable tasks with its interval."""
    alpha = results["abstraction"]
    sites = _sites(alpha)
    first = _tasks(alpha, sites[0])
    task_names = [r["task"] for r in first]
    rows = []
    for site in sites:
        by_task = {r["task"]: r for r in _tasks(alpha, site)}
        cells = []
        for t in task_names:
            r = by_task[t]
            cell = f"{fmt(r['alpha'])} ({_interval(r['alpha_ci_low'], r['alpha_ci_high'])})"
            if finite(r.get("alpha_corrected")):
                cell += (
                    f"; corrected {fmt(r['alpha_corrected'])} "
                    f"({_interval(r['alpha_corrected_ci_low'], r['alpha_corrected_ci_high'])})"
                )
            cells.append(cell)
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
    site_row = alpha.tables["sites"][0]
    headers = [f"{r['task']} ({_rows(r['rows_per_cell'])})" for r in first]
    return table(
        [
            "layer",
            *headers,
            f"site mean of raw α ({site_row['alpha_tasks']})",
            "null p95 of that mean (within / across)",
        ],
        rows,
    )


def null_table(results: dict[str, Any]) -> str:
    """docs/abstraction.md: both nulls' 95th percentiles per task at the last layer, and which
    within-context null ran."""
    alpha = results["abstraction"]
    site = _sites(alpha)[-1]
    return table(
        [
            "task (layer " + _layer(site) + ")",
            "α",
            "within-context null",
            "within-context null p95",
            "across-contexts null p95",
            "p (within)",
        ],
        (
            [
                r["task"],
                fmt(r["alpha"]),
                r["alpha_null_kind_within_context"],
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
        results[TANGENT] = _tangent_run(adapter)
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

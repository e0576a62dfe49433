"""Quoted numbers of `similarity` and `resolution` (README.md, docs/similarity.md).

Every number is read from the `resolution` result (its g(d) table is the `similarity`
profile of the same stimuli), by the metric names docs/similarity.md documents."""

from __future__ import annotations

import re
from typing import Any

from _format import finite, fmt, sig, span, table

ANALYSES = ("resolution",)


def _layer(site: str) -> str:
    """'blocks.3.hook_resid_post' → '3' (other sites as they are)."""
    found = re.match(r"blocks\.(\d+)\.", site)
    return found.group(1) if found else site


def per_site(result: Any) -> list[dict[str, Any]]:
    """One row per site: the chosen fit, its placement and its flat metrics."""
    chosen = {r["site"]: r for r in result.tables["fits"] if r["chosen"]}
    placement = {r["site"]: r for r in result.tables["placement"]}
    scope = {r["site"]: r for r in result.tables["scale_depends_on"]}
    rows = []
    for site, fit in chosen.items():
        prefix = site + "."
        metrics = {k[len(prefix) :]: v for k, v in result.metrics.items() if k.startswith(prefix)}
        profile = [r for r in result.tables["g_of_d"] if r["site"] == site]
        ranges = [
            r
            for r in result.tables.get("range_dependence", [])
            if r["site"] == site and r["share_of_range"] < 1
        ]
        crossing = next((r["distance"] for r in profile if r["mean"] < 0), None)
        rows.append(
            {
                "site": site,
                "layer": _layer(site),
                "crossing": crossing,
                "stimuli": scope[site]["stimuli"],
                "range": f"{scope[site]['coordinate_low']:g}–{scope[site]['coordinate_high']:g}",
                **fit,
                **placement[site],
                **metrics,
                "sub_ranges": ranges,
            }
        )
    return rows


def _scale(row: dict[str, Any], name: str, digits: int = 1) -> str:
    """A scale as the grid resolves it: the number, '< d₁' below the grid's first distance,
    '> bound' at the search bound or beyond the stimulus range."""
    censored = row.get(f"{name}_censored")
    if censored == -1:
        return "< d₁"
    if censored == 1:
        bound = (
            row["search_high"]
            if name.split("_ci_")[0] in ("epsilon", "epsilon_fast")
            else row["max_distance"]
        )
        return f"> {fmt(bound, integer=True)}"
    return fmt(row.get(name), digits, integer=digits == 0)


def _interval(row: dict[str, Any], name: str, digits: int = 0) -> str:
    """'value (low–high)' with each end's Monte-Carlo error (± e, to two significant figures)
    when it is finite."""

    def end(key: str) -> str:
        error = row.get(f"{key}_mc")
        words = _scale(row, key, digits) if f"{key}_censored" in row else fmt(row[key], digits)
        return words + (f" ± {sig(error)}" if finite(error) else "")

    value = _scale(row, name, digits) if f"{name}_censored" in row else fmt(row[name], digits)
    return f"{value} ({end(name + '_ci_low')} to {end(name + '_ci_high')})"


def _spans(rows: list[dict[str, Any]], name: str, digits: int = 1) -> str:
    """The layers' values of a scale: a span of the resolved ones, and the unresolved ones
    in words."""
    resolved = [r[name] for r in rows if r.get(f"{name}_censored") == 0]
    below = sum(1 for r in rows if r.get(f"{name}_censored") == -1)
    beyond = sum(1 for r in rows if r.get(f"{name}_censored") == 1)
    parts = []
    if resolved:
        parts.append(f"{span(resolved, digits, integer=digits == 0)} years")
    if below:
        parts.append(
            f"< d₁ at {below} of {len(rows)} layers" if resolved else "< d₁ at every layer"
        )
    if beyond:
        parts.append(f"beyond the range at {beyond} of {len(rows)} layers")
    return ", ".join(parts) or "—"


def _regimes(rows: list[dict[str, Any]]) -> str:
    """'identification regime (bootstrap agreement 97–100 %)' for the rows' regimes; an
    unresolved regime has no agreement figure."""
    names = sorted({r["regime"] for r in rows})
    agreement = span(
        (100 * r["regime_agreement"] for r in rows if finite(r["regime_agreement"])), integer=True
    )
    if agreement == "—":
        return f"{' / '.join(names)} regime"
    return f"{' / '.join(names)} regime (bootstrap agreement {agreement} % where resolved)"


def _ball_words(rows: list[dict[str, Any]]) -> str:
    """⟨b⟩ at the half-width, or its bound where the half-width is below d₁."""
    resolved = [r["mean_b"] for r in rows if finite(r["mean_b"])]
    bounds = [r["mean_b_bound"] for r in rows if r.get("mean_b_censored") == -1]
    parts = []
    if resolved:
        parts.append(f"⟨b⟩ = {span(resolved, 3)}")
    if bounds:
        parts.append(f"⟨b⟩ ≤ b(d₁) = {span(bounds, 3)} (half-width below d₁)")
    return "; ".join(parts) or "⟨b⟩ undefined"


def _side_by_side(rows: list[dict[str, Any]]) -> str:
    """Raw and centred cosine, side by side (neither is "the" resolution)."""
    return (
        f"Side by side, the raw cosine gives g(d₁) = {span(r['raw_g_first'] for r in rows)}, "
        f"half-width {_spans(rows, 'raw_half_width')}, (p_S, p_I) = "
        f"({span(r['raw_p_similarity'] for r in rows)}, "
        f"{span(r['raw_p_identification'] for r in rows)}); the centred cosine g(d₁) = "
        f"{span(r['centred_g_first'] for r in rows)}, half-width "
        f"{_spans(rows, 'centred_half_width')}, (p_S, p_I) = "
        f"({span(r['centred_p_similarity'] for r in rows)}, "
        f"{span(r['centred_p_identification'] for r in rows)})."
    )


def _range_words(rows: list[dict[str, Any]]) -> str:
    """Whether the half-width holds beyond the range: the layers whose central sub-ranges give
    another scale, with the sub-ranges' half-widths."""
    moving = [r for r in rows if r.get("scale_depends_on_range") == 1]
    if not moving:
        return (
            f"The central half and quarter of {rows[0]['range']} give the same scales: on these "
            "stimuli they do not depend on the range."
        )
    subs: dict[str, list[float]] = {}
    for r in moving:
        for sub in r["sub_ranges"]:
            name = f"{sub['coordinate_low']:g}–{sub['coordinate_high']:g}"
            subs.setdefault(name, []).append(sub["half_width"])
    words = "; ".join(f"{name}: {span(widths, 1)} years" for name, widths in subs.items())
    return (
        f"The scale grows with the range at {len(moving)} of {len(rows)} layers: no single "
        f"scale over {rows[0]['range']} (the central sub-ranges' half-widths, {words}), so "
        "the half-width is this range's, not the model's resolution."
    )


def _theory_span(rows: list[dict[str, Any]], name: str) -> str:
    """The fitted g's p_S or p_I over the layers: each layer's point where given, else the
    range of its fits within ΔAIC 2 (both ends over the layers)."""
    low = [r[f"{name}_low"] for r in rows if finite(r.get(f"{name}_low"))]
    high = [r[f"{name}_high"] for r in rows if finite(r.get(f"{name}_high"))]
    valley = f"{fmt(min(low), 3)}–{fmt(max(high), 3)}" if low and high else "—"
    if all(finite(r.get(name)) for r in rows):
        return f"{span([r[name] for r in rows], 3)} (over the fits within ΔAIC 2: {valley})"
    return f"{valley} (the fits within ΔAIC 2: flat valleys, no point)"


def readme_paragraph(results: dict[str, Any]) -> str:
    """The README's sentences on what MiniLM gives."""
    rows = per_site(results["resolution"])
    families = sorted({r["family"] for r in rows})
    crossings = [r["crossing"] for r in rows if r["crossing"] is not None]
    first = fmt(rows[0]["first_distance"], integer=True)
    boot = fmt(rows[0]["bootstrap_resamples"], integer=True)
    text = [
        f"On a grid of every year ({rows[0]['stimuli']} years, {rows[0]['range']}, first "
        f"distance d₁ = {first} year), g(0) = 1 falls to g(d₁) = "
        f"{span(r['g_first'] for r in rows)} (a drop of {span(r['amplitude'] for r in rows)}), "
        f"while the same year in another template keeps "
        f"{span(r['g0_across_texts'] for r in rows)}."
    ]
    if crossings:
        text.append(f"g crosses zero near {span(crossings, integer=True)} years.")
    text.append(
        f"Over {rows[0]['range']} the measured g is halfway down at "
        f"{_spans(rows, 'half_width')} (on the {first}-year grid, interpolated between bins; "
        f"{boot} bootstrap resamples). {_range_words(rows)}"
    )
    scale = f"The lowest-AIC fit is {' / '.join(families)}"
    if "two-scale" in families:
        scale += (
            f" ({span((100 * r['fast_share'] for r in rows), integer=True)} % of the fall on a "
            f"fast scale ε_fast {_spans(rows, 'epsilon_fast')}), with a slow scale ε = "
            f"{_spans(rows, 'epsilon', 0)}"
        )
    else:
        scale += f", ε = {_spans(rows, 'epsilon', 0)}"
    text.append(
        scale + f"; Δ = {span(r['delta'] for r in rows)} with a centring offset of "
        f"{span(r['offset'] for r in rows)} (these belong to the model, the {rows[0]['range']} "
        "range and the centring together)."
    )
    text.append(
        f"At the half-width {_ball_words(rows)} (± {span([r['mean_b_grid_step'] for r in rows], 3)} "
        f"for one grid step): the {_regimes(rows)}; the measured (p_S, p_I), "
        f"which needs no fit, is ({span(r['p_similarity'] for r in rows)}, "
        f"{span(r['p_identification'] for r in rows)})."
    )
    text.append(_side_by_side(rows))
    return " ".join(text)


def layer_table(results: dict[str, Any]) -> str:
    """docs/similarity.md's table, one row per layer."""
    rows = per_site(results["resolution"])
    return table(
        [
            "layer",
            "g(d₁) (drop)",
            "half-width (95 %)",
            "family",
            "ε (95 %)",
            "ε_fast (share)",
            "g(0) across texts",
            "Δ",
            "offset",
            "⟨b⟩ (± grid step)",
            "regime (agreement)",
            "depends on range (half-widths of the central half / quarter)",
            "measured (p_S, p_I)",
            "fitted g's p_S (fits within ΔAIC 2)",
            "raw cosine: g(d₁), half-width, (p_S, p_I)",
        ],
        (
            [
                r["layer"],
                f"{fmt(r['g_first'])} ({fmt(r['amplitude'])})",
                _interval(r, "half_width", 1),
                r["family"],
                _interval(r, "epsilon"),
                f"{_scale(r, 'epsilon_fast')} ({fmt(r['fast_share'])})"
                if r["family"] == "two-scale"
                else "—",
                fmt(r["g0_across_texts"]),
                fmt(r["delta"]),
                fmt(r["offset"]),
                f"{fmt(r['mean_b'], 3)} (± {fmt(r['mean_b_grid_step'], 3)})"
                if finite(r["mean_b"])
                else f"≤ {fmt(r['mean_b_bound'], 3)}"
                if r.get("mean_b_censored") == -1
                else "—",
                f"{r['regime']} ({fmt(100 * r['regime_agreement'], integer=True)} %)"
                if finite(r["regime_agreement"])
                else r["regime"],
                _depends(r),
                f"({fmt(r['p_similarity'], 3)}, {fmt(r['p_identification'], 3)})",
                _theory_cell(r),
                f"{fmt(r['raw_g_first'])}, {_scale(r, 'raw_half_width')}, "
                f"({fmt(r['raw_p_similarity'], 3)}, {fmt(r['raw_p_identification'], 3)})",
            ]
            for r in rows
        ),
    )


def _valley_verdict(rows: list[dict[str, Any]]) -> str:
    """Whether the AIC valleys left a point: sharp (narrower than the bootstrap interval and
    than the printed 0.001) or flat, where the range is given instead."""
    wide = sum(1 for r in rows if r.get("p_theory_from_valley") == 1)
    if not wide:
        return (
            ", less than its bootstrap interval and than the printed 0.001, so each layer's "
            "point is given beside that range"
        )
    where = "every layer" if wide == len(rows) else f"{wide} of {len(rows)} layers"
    if not any(_as_wide_as_bootstrap(r) for r in rows):
        return (
            f"; at {where} that is at least the printed 0.001, though inside its bootstrap "
            "interval (a flat valley: a point would be the optimiser's pick), so the range is "
            "given there, not a point"
        )
    return (
        f"; at {where} that is as much as its bootstrap interval or the printed 0.001 (a flat "
        "valley), so the range is given there, not a point"
    )


def _as_wide_as_bootstrap(row: dict[str, Any]) -> bool:
    """Whether a layer's AIC valley moves p_S or p_I as much as its bootstrap interval."""
    return any(
        finite(row.get(f"{name}_ci_low"))
        and row[f"{name}_high"] - row[f"{name}_low"]
        >= row[f"{name}_ci_high"] - row[f"{name}_ci_low"]
        for name in ("p_similarity_theory", "p_identification_theory")
    )


def _theory_cell(row: dict[str, Any]) -> str:
    """'0.738 (0.738–0.748)': the fitted g's p_S beside the range over its AIC valley, or
    the range alone where no point is given."""
    valley = (
        f"{fmt(row.get('p_similarity_theory_low'), 3)}–"
        f"{fmt(row.get('p_similarity_theory_high'), 3)}"
    )
    if finite(row.get("p_similarity_theory")):
        return f"{fmt(row['p_similarity_theory'], 3)} ({valley})"
    return f"{valley} (flat valley: no point)"


def _depends(row: dict[str, Any]) -> str:
    """'yes (2.1 / 1.8)': the layer's range flag with the sub-ranges' half-widths."""
    flag = row.get("scale_depends_on_range")
    words = "yes" if flag == 1 else "no" if flag == 0 else "—"
    widths = " / ".join(fmt(sub["half_width"], 1) for sub in row["sub_ranges"])
    return f"{words} ({widths})" if widths else words


def reading(results: dict[str, Any]) -> str:
    """docs/similarity.md's paragraph under the table."""
    rows = per_site(results["resolution"])
    method = sorted({r["method"] for r in rows})
    first = fmt(rows[0]["first_distance"], integer=True)
    text = [
        f"Between a year and its nearest neighbour ({first} year) the centred cosine loses "
        f"{span(r['amplitude'] for r in rows)} of g(0) = 1; the same year in another template "
        f"keeps {span(r['g0_across_texts'] for r in rows)}, so the text accounts for a small "
        "part of that first drop and the year for the rest.",
        f"Every scale here is measured on the {first}-year grid: the half-width is where the "
        f"measured g crosses halfway, {_spans(rows, 'half_width')}; a scale below d₁ would be "
        "written '< d₁' and one at the fit's search bound as a bound.",
        f"At the half-width {_ball_words(rows)}, so the layers are in the {_regimes(rows)}, "
        f"against the nearest front point b = {span(r['front_b'] for r in rows)}. The measured "
        f"(p_S, p_I) ({span(r['p_similarity'] for r in rows)}, "
        f"{span(r['p_identification'] for r in rows)}) needs no fit; the fitted g predicts "
        f"p_S {_theory_span(rows, 'p_similarity_theory')} and p_I "
        f"{_theory_span(rows, 'p_identification_theory')}: within each layer's AIC valley "
        "the theory's p_S moves by up to "
        f"{fmt(max(r['p_similarity_theory_high'] - r['p_similarity_theory_low'] for r in rows), 3)} "
        f"(the table){_valley_verdict(rows)}. Accuracies: {' / '.join(method)}.",
        _side_by_side(rows),
    ]
    return " ".join(text)


SECTIONS = {
    "resolution-readme": readme_paragraph,
    "resolution-layers": layer_table,
    "resolution-reading": reading,
}

"""Quoted numbers of `similarity` and `resolution` (README.md, docs/similarity.md)."""

from __future__ import annotations

import re
from typing import Any

from _format import fmt, span, table

ANALYSES = ("resolution",)


def _layer(site: str) -> str:
    """'blocks.3.hook_resid_post' → '3' (other sites as they are)."""
    found = re.match(r"blocks\.(\d+)\.", site)
    return found.group(1) if found else site


def _per_site(result: Any) -> list[dict[str, Any]]:
    """One row per site: the chosen fit, its placement and its flat metrics."""
    chosen = {r["site"]: r for r in result.tables["fits"] if r["chosen"]}
    placement = {r["site"]: r for r in result.tables["placement"]}
    rows = []
    for site, fit in chosen.items():
        metrics = {
            k[len(site) + 1 :]: v for k, v in result.metrics.items() if k.startswith(site + ".")
        }
        rows.append({"site": site, "layer": _layer(site), **fit, **placement[site], **metrics})
    return rows


def readme_paragraph(results: dict[str, Any]) -> str:
    """The README's sentence on what MiniLM gives."""
    rows = _per_site(results["resolution"])
    return (
        f"the fitted ε is {span((r['epsilon'] for r in rows), integer=True)} years by layer "
        f"(half-width {span((r['half_width'] for r in rows), integer=True)} years), and the "
        f"measured (p_S, p_I) is ({span(r['p_similarity'] for r in rows)}, "
        f"{span(r['p_identification'] for r in rows)})."
    )


def layer_table(results: dict[str, Any]) -> str:
    """docs/similarity.md's table, one row per layer."""
    rows = _per_site(results["resolution"])
    return table(
        ["layer", "chosen family", "ε (95 % interval)", "half-width", "Δ", "measured (p_S, p_I)"],
        (
            [
                r["layer"],
                r["family"],
                f"{fmt(r['epsilon'], integer=True)} ({fmt(r['epsilon_ci_low'], integer=True)}–"
                f"{fmt(r['epsilon_ci_high'], integer=True)})",
                fmt(r["half_width"], integer=True),
                fmt(r["delta"]),
                f"({fmt(r['p_similarity'], 3)}, {fmt(r['p_identification'], 3)})",
            ]
            for r in rows
        ),
    )


SECTIONS = {
    "resolution-readme": readme_paragraph,
    "resolution-layers": layer_table,
}

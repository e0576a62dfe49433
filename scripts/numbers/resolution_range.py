"""The resolution of MiniLM re-centred on a narrower range of years (docs/similarity.md).

A separate module because it needs its own run: `resolution` on the years 1750–2000 (the
shipped templates), centred on their own mean."""

from __future__ import annotations

from typing import Any

from _format import fmt, span, table
from resolution import per_site

NAME = "resolution-years-1750-2000"


def _run(adapter: Any) -> Any:
    import geomlens as gl
    from geomlens.data.stimuli import years

    return gl.run("resolution", adapter, years(1750, 2000).as_data(), progress=False)


ANALYSES = ("resolution",)
RUNS = {NAME: _run}


def recentred(results: dict[str, Any]) -> str:
    """Side by side: the default range and 1750–2000, per layer."""
    full = {r["layer"]: r for r in per_site(results["resolution"])}
    narrow = {r["layer"]: r for r in per_site(results[NAME])}
    rows = [
        [
            layer,
            f"{full[layer]['family']} / {narrow[layer]['family']}",
            f"{fmt(full[layer]['epsilon'], integer=True)} / "
            f"{fmt(narrow[layer]['epsilon'], integer=True)}",
            f"{fmt(full[layer]['half_width'], 1)} / {fmt(narrow[layer]['half_width'], 1)}",
            f"{fmt(full[layer]['offset'])} / {fmt(narrow[layer]['offset'])}",
            f"{fmt(full[layer]['mean_b'], 3)} / {fmt(narrow[layer]['mean_b'], 3)}",
        ]
        for layer in full
        if layer in narrow
    ]
    return (
        table(
            ["layer", "family", "ε", "half-width", "offset", "⟨b⟩"],
            rows,
        )
        + "\n\n(1500–2000 / 1750–2000.) On the narrower range the slow scale ε is "
        f"{span((r['epsilon'] for r in narrow.values()), integer=True)} years against "
        f"{span((r['epsilon'] for r in full.values()), integer=True)}, the offset "
        f"{span(r['offset'] for r in narrow.values())} against "
        f"{span(r['offset'] for r in full.values())}."
    )


SECTIONS = {"resolution-recentred": recentred}

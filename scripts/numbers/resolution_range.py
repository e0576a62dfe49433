"""The resolution of MiniLM re-centred on a narrower range of years (docs/similarity.md).

A separate module because it needs its own run: `resolution` on every year 1951–2000 (the
shipped templates, the default set's construction), centred on their own mean."""

from __future__ import annotations

from typing import Any

from _format import fmt, span, table
from resolution import _scale, per_site

NAME = "resolution-years-1951-2000"


def _run(adapter: Any) -> Any:
    import geomlens as gl
    from geomlens.data.stimuli import default_years

    return gl.run("resolution", adapter, default_years(1951, 2000).as_data(), progress=False)


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
            f"{_scale(full[layer], 'epsilon', 0)} / {_scale(narrow[layer], 'epsilon', 0)}",
            f"{_scale(full[layer], 'half_width')} / {_scale(narrow[layer], 'half_width')}",
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
        + "\n\n(1901–2000 / 1951–2000, both every year.) On the narrower range the half-width is "
        f"{span((r['half_width'] for r in narrow.values()), 1)} years against "
        f"{span((r['half_width'] for r in full.values()), 1)}, the offset "
        f"{span(r['offset'] for r in narrow.values())} against "
        f"{span(r['offset'] for r in full.values())}."
    )


SECTIONS = {"resolution-recentred": recentred}

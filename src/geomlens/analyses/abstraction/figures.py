"""By-layer figures of the concept analyses (abstraction, ccgp, linearization-effect): one line
per task against the layer, in one colour per task across panels."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from geomlens.models.adapter import layer_of


def layer_position(site: str, fallback: int) -> int:
    """Where a site goes on a by-layer axis (its block index, else its order)."""
    layer = layer_of(site)
    return fallback if layer is None else layer


def task_colour(task: str, tasks: Sequence[str]) -> Any:
    """One colour per task, the same in every panel and condition (up to 20 distinct)."""
    import matplotlib

    ordered = sorted(set(tasks))
    palette = matplotlib.colormaps["tab10" if len(ordered) <= 10 else "tab20"]
    return palette(ordered.index(task) % palette.N)


def plot_by_layer(
    axis: Any,
    rows: list[dict[str, Any]],
    column: str,
    *,
    linestyle: str = "-",
    labelled: bool = True,
    band: tuple[str, str] | None = None,
) -> None:
    """One line per task: ``column`` against the layer of each site (labelled by task name)."""
    from matplotlib.ticker import MaxNLocator

    order = {s: i for i, s in enumerate(dict.fromkeys(r["site"] for r in rows))}
    tasks = [r["task"] for r in rows]
    for task in dict.fromkeys(tasks):
        mine = sorted(
            (r for r in rows if r["task"] == task and r.get(column) is not None),
            key=lambda r: layer_position(r["site"], order[r["site"]]),
        )
        if not mine:
            continue
        x = [layer_position(r["site"], order[r["site"]]) for r in mine]
        colour = task_colour(task, tasks)
        label = task if labelled else None
        axis.plot(
            x, [r[column] for r in mine], linestyle, color=colour, marker="o", ms=3, label=label
        )
        if band is not None:
            # An undefined end (NaN, null in a result read back from JSON) leaves a gap.
            low, high = ([math.nan if r.get(b) is None else r[b] for r in mine] for b in band)
            axis.fill_between(x, low, high, alpha=0.15, color=colour)
    axis.set_xlabel("layer")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))


def legend_with_styles(axis: Any, styles: dict[str, Any]) -> None:  # name: a line style
    """The tasks' colours, then what each line style means, beside the axis."""
    from matplotlib.lines import Line2D

    handles, _ = axis.get_legend_handles_labels()
    handles += [
        Line2D([], [], color="black", linestyle=ls, label=name) for name, ls in styles.items()
    ]
    axis.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))

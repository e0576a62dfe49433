"""Drawing a result: the figure belongs to the analysis that produced it, not to the data.

A :class:`~geomlens.results.Result` is plain data and knows nothing of analyses; this module
looks the analysis class up by the result's name and asks it for its figure. ``gl.plot(result)``
and ``Result.plot`` both come here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from geomlens.atomic_files import atomic_save_figure
from geomlens.results import Result

if TYPE_CHECKING:
    from geomlens.analyses.base import Analysis


def has_plot(analysis: type[Analysis]) -> bool:
    """Whether ``analysis`` draws a figure (overrides :meth:`Analysis.plot`)."""
    from geomlens.analyses.base import Analysis

    # The classmethod object itself: its __func__ is the function every override replaces.
    return getattr(analysis.plot, "__func__", None) is not Analysis.__dict__["plot"].__func__


def plot(result: Result, path: str | os.PathLike[str] | None = None, **kwargs: Any) -> Any:
    """The figure of ``result``, drawn by its analysis; saved atomically when ``path`` is given.

    Raises ``NotImplementedError`` when the analysis has no figure, and the registry's
    ``UnknownNameError`` when the analysis that wrote the result is not installed here.
    """
    from geomlens.analyses.registry import analysis_class

    analysis = analysis_class(result.analysis)
    if not has_plot(analysis):
        raise NotImplementedError(
            f"Analysis {result.analysis!r} draws no figure; read its numbers with "
            "result.metrics, result.tables or result.to_frame()."
        )
    try:
        figure = analysis.plot(result, **kwargs)
    except KeyError as error:
        missing = error.args[0] if error.args else None
        if missing in result.tables or missing in result.metrics:
            raise
        raise ValueError(
            f"This {result.analysis!r} result lacks {missing!r}, which its figure is drawn from "
            f"(it has tables {sorted(result.tables)}); plot a result as the analysis wrote it, "
            "e.g. gl.plot(Result.from_json(path))."
        ) from None
    if path is not None:
        atomic_save_figure(figure, path, dpi=kwargs.get("dpi", 120), bbox_inches="tight")
    return figure


class FigureNotDrawn(RuntimeError):
    """An analysis's ``plot`` returned no figure, or a figure with nothing drawn on it."""


def drew_something(figure: Any) -> bool:
    """Whether ``figure`` has an axes with anything drawn on it (a line, a marker, a patch, an
    image, a text): a blank figure is no figure."""
    for axes in getattr(figure, "axes", None) or []:
        if axes.lines or axes.collections or axes.images or axes.patches or axes.texts:
            return True
    return False


def plot_from_json(analysis: type[Analysis], result: Result) -> Any:
    """The figure ``analysis`` draws from ``result`` read back from its JSON (so a figure shows
    only what a reader of the saved JSON could draw: NaN intervals come back as they were
    written). Raises :class:`FigureNotDrawn` when the figure is missing or blank. The report
    and the contract check ``plot-from-json`` both draw through this."""
    figure = analysis.plot(Result.from_json(result.to_json()))
    if not drew_something(figure):
        import contextlib

        with contextlib.suppress(Exception):
            import matplotlib.pyplot as plt

            plt.close(figure)
        raise FigureNotDrawn(
            f"{analysis.__name__}.plot returned "
            + (
                "a figure with nothing drawn on it"
                if getattr(figure, "axes", None)
                else f"{type(figure).__name__}, not a matplotlib figure with axes"
            )
            + "; it must draw the result's numbers."
        )
    return figure

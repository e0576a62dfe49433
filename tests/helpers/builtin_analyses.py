"""The built-in analyses the reliability tests (faults, determinism) cover, each with data and
small settings there: those of the registry's one list (geomlens.analyses.registry.BUILTINS).
A new built-in gets its settings in those tests."""

from __future__ import annotations

from geomlens.analyses.catalog import builtin_analyses

BUILT_IN = tuple(builtin_analyses())


def uncovered_built_ins() -> list[str]:
    """Analyses registered from geomlens's own modules that the registry's list leaves out."""
    from geomlens.analyses.catalog import analysis_class, list_analyses

    return sorted(
        name
        for name in list_analyses()
        if analysis_class(name).__module__.startswith("geomlens.") and name not in BUILT_IN
    )

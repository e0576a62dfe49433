"""The built-in analyses the reliability tests (faults, determinism) cover, each with data and
small settings there. A new built-in must be added here and given its settings in those tests."""

from __future__ import annotations

BUILT_IN = (
    "abstraction", "activation-stats", "ccgp", "linearization-effect", "resolution",
    "sae-features", "similarity",
)  # fmt: skip


def uncovered_built_ins() -> list[str]:
    """Registered analyses shipped in geomlens itself that ``BUILT_IN`` does not list."""
    from geomlens.registry import analysis_class, list_analyses

    return sorted(
        name
        for name in list_analyses()
        if analysis_class(name).__module__.startswith("geomlens.") and name not in BUILT_IN
    )

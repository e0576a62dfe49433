"""The package's floors, declared once: tests/docs/test_layers.py checks every import against
this table, and the picture in CONTRIBUTING.md is drawn from it (:func:`picture`).

A module belongs to the floor of its longest matching prefix. A floor may import its own floor
and every floor below it, never one above (not inside a function, not for types, not through an
``importlib`` string), and no two files import each other round a loop. Code below a floor that
needs something of the floor above receives it (an argument, a protocol, a hook such as
``results.set_drawer``) rather than importing it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Floor:
    """One floor: the module prefixes on it, as drawn, and what it holds in a few words."""

    modules: tuple[str, ...]
    drawn: str
    holds: tuple[str, ...]


#: From the top down.
FLOORS: tuple[Floor, ...] = (
    Floor(
        ("geomlens", "geomlens.__main__", "geomlens.cli"),
        "cli/",
        (
            "every `geomlens …` command; the shared options and error helpers",
            "(+ the front door: geomlens/__init__.py, the `gl.*` names)",
        ),
    ),
    Floor(
        (
            "geomlens.report",
            "geomlens.checks",
            "geomlens.dynamics",
            "geomlens.scaffold",
            "geomlens.testing",
        ),
        "report/  checks/  dynamics/  scaffold/  testing.py",
        (
            "the report; conformance and the architecture survey; sweeps across checkpoints;",
            "`geomlens new-plugin`; the analysis contract `check_analysis`",
        ),
    ),
    Floor(
        ("geomlens.experiments",),
        "experiments/",
        (
            "the papers' experiments; the checkpoint folders they write",
            "and the steps they keep (what dynamics/ reads)",
        ),
    ),
    Floor(
        ("geomlens.engine",),
        "engine/",
        (
            "the run: one pass feeding every analysis (feed.py), checkpoints,",
            "data-parallel shards, benchmark harness",
        ),
    ),
    Floor(
        ("geomlens.analyses", "geomlens.sae"),
        "analyses/  sae/",
        ("the analyses, their declarations and registry; SAE loading/training",),
    ),
    Floor(
        ("geomlens.models",),
        "models/",
        (
            "the Adapter and its backends (TransformerLens, nnsight, recorded),",
            "loading, architecture tables, config-field spellings",
        ),
    ),
    Floor(
        ("geomlens.inputs", "geomlens.interventions", "geomlens.hooks"),
        "inputs/  interventions/  hooks/",
        (
            "encoding, the batch loop (inputs/batches.py), pooling and positions, the",
            "protocol of an adapter they read; linearisation and resumed passes;",
            "site names, hook points and the non-finite watch",
        ),
    ),
    Floor(
        (
            "geomlens.data",
            "geomlens.theory",
            "geomlens.plain_state",
            "geomlens.results",
            "geomlens.stats",
            "geomlens.version",
            "geomlens.formatting",
            "geomlens.progress",
            "geomlens.run_defaults",
            "geomlens._layers",
        ),
        "data/  theory/  results.py  stats.py  formatting.py  progress.py",
        (
            "datasets and stimuli; the theory (imports nothing",
            "of geomlens but the floor below); Result; statistics; how numbers are",
            "written; progress lines; plain state; the floor table itself",
        ),
    ),
    Floor(
        ("geomlens.atomic_files", "geomlens.lazy", "geomlens.output_folder"),
        "atomic_files.py  lazy.py  output_folder.py",
        (
            "writing a file atomically (results, checkpoints, the report, figures);",
            "names a package lends, imported on first use; the folders geomlens",
            "writes: its manifest, never a user's file",
        ),
    ),
)

#: Folders that import nothing of geomlens outside themselves but the modules named beside them.
SELF_CONTAINED: dict[str, tuple[str, ...]] = {"geomlens.theory": ("geomlens.atomic_files",)}


def floor_of(module: str) -> int:
    """The floor number of a module (0 is the top); ``len(FLOORS)`` when it is on none."""
    best, floor = -1, len(FLOORS)
    for number, item in enumerate(FLOORS):
        for prefix in item.modules:
            matches = module == prefix or (prefix != "geomlens" and module.startswith(prefix + "."))
            if matches and len(prefix) > best:
                best, floor = len(prefix), number
    return floor


def floor_label(number: int) -> str:
    return "/".join(p.removeprefix("geomlens.") for p in FLOORS[number].modules)


def picture() -> str:
    """The floors as drawn in CONTRIBUTING.md (between its ``` fences)."""
    lines: list[str] = []
    for number, item in enumerate(FLOORS):
        last = number == len(FLOORS) - 1
        holds = list(item.holds)
        if len(item.drawn) < 24:
            lines.append(f"  {item.drawn:<24}  {holds.pop(0)}".rstrip())
        else:
            lines.append(f"  {item.drawn}")
        pad = "    " if last else "    │"
        indent = 28 if len(item.drawn) < 24 else 11
        for text in holds:
            lines.append(f"{pad:<{indent}}{text}")
        if not last:
            lines.append("    ▼")
    return "\n".join(lines)

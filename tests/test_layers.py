"""The package's floors, kept: no module imports a floor above its own, and no two files import
each other round a loop.

Every import counts: at module level, inside a function, under ``TYPE_CHECKING``, and a module
named in a string (``importlib.import_module("geomlens.x")``, ``"geomlens.x:Name"``). The floors,
top to bottom (a floor may import its own floor and every floor below it)::

    cli/ + the package's front door (geomlens/__init__.py, __main__.py)
    report/  checks/  experiments/  scaffold/
    engine/
    analyses/  sae/
    hooks/
    data/  theory/  results.py  stats.py   (theory/ imports nothing of geomlens)

Old module paths that users import are kept as compatibility shims (each one replaces itself by
the new module); they are listed below by name, may point anywhere, and no code in the package
may import them.
"""

from __future__ import annotations

import ast
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src"

#: Floors from the top down; a module belongs to the floor of its longest matching prefix.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("geomlens", "geomlens.__main__", "geomlens.cli"),
    (
        "geomlens.report",
        "geomlens.checks",
        "geomlens.experiments",
        "geomlens.scaffold",
        "geomlens.testing",
    ),
    ("geomlens.engine",),
    ("geomlens.analyses", "geomlens.sae"),
    ("geomlens.hooks",),
    (
        "geomlens.data",
        "geomlens.theory",
        "geomlens.plain_state",
        "geomlens.results",
        "geomlens.stats",
        "geomlens.version",
        # How numbers, units and names are written; progress lines (used by every floor).
        "geomlens.formatting",
        "geomlens.progress",
    ),
)

#: Old paths kept for users' imports (issue 16). Each is exempt from the floor rule, and nothing
#: inside geomlens may import it.
COMPATIBILITY_SHIMS = {
    "geomlens.benchmarking": "geomlens.engine.benchmarking",
    "geomlens.checkpoint": "geomlens.engine.checkpoint",
    "geomlens.cli_options": "geomlens.cli.options",
    "geomlens.conformance": "geomlens.checks.conformance",
    "geomlens.defaults": "geomlens.engine.defaults",
    "geomlens.distributed": "geomlens.engine.distributed",
    "geomlens.finite_check": "geomlens.hooks.finite_check",
    "geomlens.plotting": "geomlens.analyses.plotting",
    "geomlens.position_limit": "geomlens.hooks.positions",
    "geomlens.hooks.survey": "geomlens.checks.survey",
    "geomlens.report.cli": "geomlens.cli.report",
    "geomlens.sae.cli": "geomlens.cli.sae",
    "geomlens.scaffold.cli": "geomlens.cli.scaffold",
    "geomlens.theory.cli": "geomlens.cli.theory",
}

#: Of the shims above, those that are packages holding real code too: their own module is exempt,
#: but other code may import them (for the code they hold).
SHIMS_WITH_CODE: set[str] = set()

_MODULE_STRING = re.compile(r"geomlens(\.\w+)+(:\w+)?")
#: Names whose string value looks like a module but is not one (the plugins' entry-point group).
NOT_MODULE_NAMES = {"ENTRY_POINT_GROUP"}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module
    where: str  # file:line


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(root: Path) -> dict[str, Path]:
    return {module_name(root, p): p for p in sorted((root / "geomlens").rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a module of the package."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imports_of(root: Path) -> list[Import]:
    """Every import of one geomlens module by another, wherever it is written."""
    modules = package_modules(root)
    found: list[Import] = []
    for source, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        not_modules = {
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Assign, ast.AnnAssign))
            and any(
                isinstance(target, ast.Name) and target.id in NOT_MODULE_NAMES
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
        }
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = source.split(".") if is_package else source.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    module = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    module = node.module or ""
                # `from geomlens.report import figures` imports the module geomlens.report.figures
                names = [f"{module}.{alias.name}" for alias in node.names]
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in not_modules
                and _MODULE_STRING.fullmatch(node.value)
            ):
                names = [node.value.split(":")[0]]
            for name in names:
                if not name.startswith("geomlens"):
                    continue
                target = _resolve(name, modules)
                if target is not None and target != source:
                    where = f"{path.relative_to(root)}:{node.lineno}"
                    found.append(Import(source, target, where))
    return found


def floor_of(module: str) -> int:
    best, floor = -1, len(FLOORS)
    for number, prefixes in enumerate(FLOORS):
        for prefix in prefixes:
            matches = module == prefix or (prefix != "geomlens" and module.startswith(prefix + "."))
            if matches and len(prefix) > best:
                best, floor = len(prefix), number
    return floor


def _floor_label(number: int) -> str:
    return "/".join(p.removeprefix("geomlens.") for p in FLOORS[number])


def layer_violations(root: Path) -> list[str]:
    """One line per import that breaks the floors (or imports a shim from inside geomlens)."""
    modules = package_modules(root)
    problems = [
        f"{module} is on no floor; add it to FLOORS in tests/test_layers.py"
        for module in modules
        if module not in COMPATIBILITY_SHIMS and floor_of(module) == len(FLOORS)
    ]
    for item in imports_of(root):
        if item.source in COMPATIBILITY_SHIMS:
            continue
        if item.target in COMPATIBILITY_SHIMS and item.target not in SHIMS_WITH_CODE:
            problems.append(
                f"{item.where} imports the compatibility shim {item.target}; import "
                f"{COMPATIBILITY_SHIMS[item.target]} instead"
            )
            continue
        if item.source.startswith("geomlens.theory") and not item.target.startswith(
            "geomlens.theory"
        ):
            problems.append(
                f"{item.where} imports {item.target}: theory/ imports nothing of geomlens"
            )
            continue
        source_floor, target_floor = floor_of(item.source), floor_of(item.target)
        if target_floor < source_floor:  # a smaller number is a higher floor
            problems.append(
                f"{item.where} imports {item.target} (floor {_floor_label(target_floor)}) from "
                f"floor {_floor_label(source_floor)}, below it"
            )
    return problems


def import_loops(root: Path) -> list[list[str]]:
    """Groups of modules that import each other round a loop (strongly connected components)."""
    graph: dict[str, set[str]] = {m: set() for m in package_modules(root)}
    for item in imports_of(root):
        graph[item.source].add(item.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:  # Tarjan's algorithm (the package is small: recursion is fine)
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                loops.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return loops


def test_no_module_imports_a_floor_above_its_own():
    assert layer_violations(SOURCE) == []


def test_no_two_files_import_each_other_round_a_loop():
    assert import_loops(SOURCE) == []


def test_every_compatibility_shim_gives_the_new_module():
    import importlib

    for old, new in COMPATIBILITY_SHIMS.items():
        if old in SHIMS_WITH_CODE:
            continue
        assert importlib.import_module(old) is importlib.import_module(new), old


def _scratch_copy(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    shutil.copytree(SOURCE / "geomlens", root / "geomlens")
    return root


def _append(path: Path, code: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "\n" + code, encoding="utf-8")


@pytest.mark.parametrize(
    "planted",
    [
        "def _reach_up():\n    from geomlens.engine import stream\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from geomlens.engine import feed\n",
        "import importlib\n_ENGINE = importlib.import_module('geomlens.engine')\n",
    ],
    ids=["inside-a-function", "for-types", "importlib-string"],
)
def test_a_planted_upward_import_is_named(tmp_path, planted):
    root = _scratch_copy(tmp_path)  # clean, as test_no_module_imports_a_floor_above_its_own shows
    _append(root / "geomlens" / "hooks" / "base.py", planted)
    problems = layer_violations(root)
    assert len(problems) == 1, problems
    assert problems[0].startswith("geomlens/hooks/base.py:")
    assert "imports geomlens.engine" in problems[0] and "from floor hooks" in problems[0]


def test_theory_importing_geomlens_is_named(tmp_path):
    root = _scratch_copy(tmp_path)
    _append(root / "geomlens" / "theory" / "balls.py", "from geomlens.stats import bootstrap\n")
    (problem,) = layer_violations(root)
    assert problem.startswith("geomlens/theory/balls.py:") and "imports geomlens.stats" in problem


def test_importing_a_shim_from_inside_the_package_is_named(tmp_path):
    root = _scratch_copy(tmp_path)
    _append(
        root / "geomlens" / "engine" / "feed.py",
        "from geomlens.defaults import DEFAULT_BATCH_SIZE\n",
    )
    (problem,) = layer_violations(root)
    assert "compatibility shim geomlens.defaults" in problem
    assert "import geomlens.engine.defaults instead" in problem


def test_a_planted_loop_is_found(tmp_path):
    root = _scratch_copy(tmp_path)
    _append(root / "geomlens" / "stats.py", "def _back():\n    import geomlens.results\n")
    _append(root / "geomlens" / "results.py", "def _forth():\n    import geomlens.stats\n")
    assert ["geomlens.results", "geomlens.stats"] in import_loops(root)

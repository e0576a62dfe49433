"""The package's floors, kept: no module imports a floor above its own, and no two files import
each other round a loop; the picture in CONTRIBUTING.md is the table's.

The floors are declared once, in :mod:`geomlens._layers`. Every import counts: at module level,
inside a function, under ``TYPE_CHECKING``, and a module named in a string
(``importlib.import_module("geomlens.x")``, ``"geomlens.x:Name"``).
"""

from __future__ import annotations

import ast
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.paths import REPO

from geomlens._layers import FLOORS, SELF_CONTAINED, floor_label, floor_of, picture

ROOT = REPO
SOURCE = ROOT / "src"

_MODULE_STRING = re.compile(r"geomlens(\.\w+)+(:\w+)?")
#: Names whose string value looks like a module but is not one (the plugins' entry-point group).
NOT_MODULE_NAMES = {"ENTRY_POINT_GROUP"}
#: Modules whose strings name modules without importing them (the floor table itself).
NAMES_NOT_IMPORTS = {"geomlens._layers"}


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
                source not in NAMES_NOT_IMPORTS
                and isinstance(node, ast.Constant)
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


def layer_violations(root: Path) -> list[str]:
    """One line per import that breaks the floors ."""
    modules = package_modules(root)
    problems = [
        f"{module} is on no floor; add it to FLOORS in src/geomlens/_layers.py"
        for module in modules
        if floor_of(module) == len(FLOORS)
    ]
    for item in imports_of(root):
        inside = next((f for f in SELF_CONTAINED if item.source.startswith(f)), None)
        allowed = (inside, *SELF_CONTAINED[inside]) if inside else ()
        if inside and not item.target.startswith(allowed):
            folder = inside.removeprefix("geomlens.")
            problems.append(
                f"{item.where} imports {item.target}: {folder}/ imports nothing of geomlens "
                f"but {', '.join(SELF_CONTAINED[inside])}"
            )
            continue
        source_floor, target_floor = floor_of(item.source), floor_of(item.target)
        if target_floor < source_floor:  # a smaller number is a higher floor
            problems.append(
                f"{item.where} imports {item.target} (floor {floor_label(target_floor)}) from "
                f"floor {floor_label(source_floor)}, below it"
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
    _append(root / "geomlens" / "models" / "adapter.py", planted)
    problems = layer_violations(root)
    assert len(problems) == 1, problems
    assert problems[0].startswith("geomlens/models/adapter.py:")
    assert "imports geomlens.engine" in problems[0] and "from floor models," in problems[0]


def test_theory_importing_geomlens_is_named(tmp_path):
    root = _scratch_copy(tmp_path)
    _append(root / "geomlens" / "theory" / "balls.py", "from geomlens.stats import bootstrap\n")
    (problem,) = layer_violations(root)
    assert problem.startswith("geomlens/theory/balls.py:") and "imports geomlens.stats" in problem


def test_a_planted_loop_is_found(tmp_path):
    root = _scratch_copy(tmp_path)
    _append(root / "geomlens" / "stats.py", "def _back():\n    import geomlens.results\n")
    _append(root / "geomlens" / "results.py", "def _forth():\n    import geomlens.stats\n")
    assert ["geomlens.results", "geomlens.stats"] in import_loops(root)


def test_no_module_path_only_forwards_to_another():
    """A module that replaces itself in sys.modules or only re-exports is a forwarder."""
    forwarders = []
    for name, path in package_modules(SOURCE).items():
        text = path.read_text(encoding="utf-8")
        if "sys.modules[__name__]" in text:
            forwarders.append(name)
    assert forwarders == []


def test_the_contributing_picture_is_the_floor_table():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("## The layers, in one picture", 1)[1]
    drawn = section.split("```\n", 2)[1].rstrip("\n")
    assert drawn == picture(), (
        "CONTRIBUTING.md's picture differs from src/geomlens/_layers.py; paste this:\n" + picture()
    )

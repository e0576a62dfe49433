"""CONTRIBUTING.md stays true: the files a new built-in analysis must touch are the ones listed
there, and every built-in touches each of them (declared once in the registry, a recipe for the
reliability and contract tests, named in the README)."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

from helpers.recipes import RECIPES

from geomlens.analyses.registry import BUILTINS

ROOT = Path(__file__).resolve().parents[1]
#: The touch points this test checks, as CONTRIBUTING.md lists them.
TOUCH_POINTS = (
    "src/geomlens/analyses/",
    "src/geomlens/analyses/registry.py",
    "tests/helpers/recipes.py",
    "README.md",
)


def listed_touch_points() -> list[str]:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    block = text.split("<!-- touch-points -->")[1].split("<!-- /touch-points -->")[0]
    return re.findall(r"^- `([^`]+)`", block, flags=re.M)


def test_the_listed_touch_points_are_the_checked_ones_and_exist():
    assert listed_touch_points() == list(TOUCH_POINTS)
    assert all((ROOT / path).exists() for path in TOUCH_POINTS)
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    template = re.search(r"Copy `(src/geomlens/analyses/[\w/]+\.py)`", text)
    assert template is not None and (ROOT / template.group(1)).is_file()


def _class_names(path: Path) -> dict[str, str]:
    """``{class name: its name = "…" attribute}`` for the classes a module defines."""
    found = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                if (
                    isinstance(statement, ast.Assign)
                    and [getattr(t, "id", None) for t in statement.targets] == ["name"]
                    and isinstance(statement.value, ast.Constant)
                    and statement.value.value
                ):
                    found[node.name] = statement.value.value
    return found


def test_every_named_analysis_module_is_declared_in_the_registry():
    declared = {builtin.name for builtin in BUILTINS}
    named = {
        name
        for path in (ROOT / "src/geomlens/analyses").rglob("*.py")
        for name in _class_names(path).values()
    }
    assert named == declared, "declare each built-in once, in analyses/registry.py BUILTINS"


def test_every_builtin_touches_every_point():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for builtin in BUILTINS:
        module, _, cls = builtin.target.partition(":")
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None, builtin
        source = Path(spec.origin)
        if source.name == "__init__.py":  # a subpackage: the class is in one of its modules
            names = {k: v for p in source.parent.glob("*.py") for k, v in _class_names(p).items()}
        else:
            names = _class_names(source)
        assert names.get(cls) == builtin.name, builtin
        assert builtin.name in RECIPES, (
            f"add a recipe for {builtin.name} to tests/helpers/recipes.py"
        )
        assert f"`{builtin.name}`" in readme, f"name {builtin.name} in README.md"

"""pyproject.toml says what geomlens needs, honestly: every third-party module src/ imports is a
declared dependency (core or an extra), and every declared floor is one that installs with the
others (each installed dependency's own requirements admit our floors, and our Python floor is
the one the tools check against). Offline: read from the installed packages' metadata."""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import sys
import tomllib
from collections.abc import Iterable, Mapping

import pytest
from helpers.paths import REPO
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
CORE = [Requirement(r) for r in PROJECT["dependencies"]]
EXTRAS = {
    extra: [Requirement(r) for r in requirements]
    for extra, requirements in PROJECT["optional-dependencies"].items()
}
ALL = CORE + [r for requirements in EXTRAS.values() for r in requirements]


def imported_modules(files: Iterable) -> dict[str, set[str]]:
    """Top-level module → the files that import it, for every absolute ``import``/``from``
    anywhere in the files (inside functions too), the standard library and geomlens left out."""
    modules: dict[str, set[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "geomlens":
                    modules.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return modules


def undeclared(
    modules: Mapping[str, set[str]],
    declared: set[str],
    distributions: Mapping[str, list[str]],
) -> dict[str, str]:
    """Module → why, for each module no declared distribution provides."""
    missing = {}
    for module, files in sorted(modules.items()):
        providers = {canonicalize_name(d) for d in distributions.get(module, [])}
        if not providers and canonicalize_name(module) in declared:
            continue  # an extra's module not installed here (devinterp without [devinterp])
        if not providers:
            missing[module] = f"not installed (imported in {sorted(files)})"
        elif not providers & declared:
            missing[module] = f"from {sorted(providers)}, not declared (in {sorted(files)})"
    return missing


def declared_names(requirements: Iterable[Requirement]) -> set[str]:
    return {canonicalize_name(r.name) for r in requirements}


def floor(specifier: SpecifierSet) -> Version | None:
    bounds = [Version(s.version) for s in specifier if s.operator in (">=", "==", "~=")]
    return max(bounds) if bounds else None


def installed(name: str) -> metadata.Distribution | None:
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


SOURCES = sorted((REPO / "src" / "geomlens").rglob("*.py"))


def test_every_third_party_import_in_src_is_a_declared_dependency():
    modules = imported_modules(SOURCES)
    # The reader finds what src/ imports, inside functions too (sae_lens, matplotlib).
    assert {"torch", "safetensors", "huggingface_hub", "tokenizers", "sae_lens"} <= set(modules)
    assert undeclared(modules, declared_names(ALL), metadata.packages_distributions()) == {}


@pytest.mark.parametrize("dropped", ["safetensors", "huggingface-hub", "tokenizers", "torch"])
def test_a_dropped_declaration_is_named(dropped):
    modules = imported_modules(SOURCES)
    declared = declared_names(ALL) - {dropped}
    missing = undeclared(modules, declared, metadata.packages_distributions())
    assert any(dropped in why for why in missing.values()), missing


def test_einops_is_no_longer_declared():
    assert "einops" not in declared_names(ALL)
    assert "einops" not in imported_modules(SOURCES)


def test_every_installed_dependency_satisfies_its_declaration():
    for requirement in ALL:
        dist = installed(requirement.name)
        if dist is None:
            assert requirement not in CORE, f"{requirement} is not installed"
            continue
        assert requirement.specifier.contains(dist.version, prereleases=True), (
            f"installed {requirement.name} {dist.version} does not satisfy {requirement}"
        )


def test_each_floor_is_admitted_by_the_other_dependencies_requirements():
    """transformer-lens 3.9 needs torch >= 2.6: a torch floor below it cannot install beside
    it. For every installed declared distribution, its own requirements on another declared
    distribution must admit our floor for that one."""
    floors = {canonicalize_name(r.name): floor(r.specifier) for r in ALL}
    conflicts = []
    for requirement in ALL:
        dist = installed(requirement.name)
        if dist is None:
            continue
        for line in dist.requires or []:
            theirs = Requirement(line)
            if theirs.marker is not None and not theirs.marker.evaluate({"extra": ""}):
                continue
            ours = floors.get(canonicalize_name(theirs.name))
            if ours is not None and not theirs.specifier.contains(ours, prereleases=True):
                conflicts.append(f"{dist.name} {dist.version} needs {theirs}; our floor {ours}")
    assert conflicts == []


def test_the_python_floor_is_the_one_checked_and_every_dependency_supports_it():
    python_floor = floor(SpecifierSet(PROJECT["requires-python"]))
    assert python_floor == Version("3.11")
    assert sys.version_info[:2] >= (python_floor.major, python_floor.minor)
    assert PYPROJECT["tool"]["mypy"]["python_version"] == "3.11"
    assert PYPROJECT["tool"]["ruff"]["target-version"] == "py311"
    for requirement in CORE:
        dist = installed(requirement.name)
        assert dist is not None
        requires_python = dist.metadata.get("Requires-Python")
        if requires_python:
            assert SpecifierSet(requires_python).contains(python_floor), (
                f"{dist.name} {dist.version} requires Python {requires_python}"
            )


def extra_names(extra: str) -> set[str]:
    """The distributions an extra brings, through the extras of geomlens it names too."""
    names: set[str] = set()
    for requirement in EXTRAS[extra]:
        if canonicalize_name(requirement.name) == "geomlens":
            for inner in requirement.extras:
                names |= extra_names(inner)
        else:
            names.add(canonicalize_name(requirement.name))
    return names


def test_only_the_sae_extra_holds_transformer_lens_at_3():
    """sae-lens pins transformer-lens<4, so it and TransformerLens are extras: an install
    without the sae extra can take TransformerLens 4, and the README's installs (lms; test)
    still bring sae-lens."""
    assert {"sae-lens", "transformer-lens"}.isdisjoint(declared_names(CORE))
    (backend,) = EXTRAS["transformer-lens"]
    assert backend.specifier.contains("3.9.0") and backend.specifier.contains("4.3.0")
    for extra in ("sae", "test", "lms"):
        assert {"sae-lens", "transformer-lens"} <= extra_names(extra), extra
    assert "sae-lens" not in extra_names("test-tools") | extra_names("transformer-lens")
    sae_lens = installed("sae-lens")
    if sae_lens is not None:  # the pin is sae-lens's own, as the sae extra says
        pins = [Requirement(r) for r in sae_lens.requires or []]
        (theirs,) = [r for r in pins if canonicalize_name(r.name) == "transformer-lens"]
        assert not theirs.specifier.contains("4.0.0"), theirs
        (ours,) = [r for r in EXTRAS["sae"] if r.name == "transformer-lens"]
        assert not ours.specifier.contains("4.0.0"), ours

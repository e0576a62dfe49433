"""Regenerate every measured number quoted in README.md and docs/*.md.

A quoted number lives between two markers, so that the text around it stays hand-written and
the number itself always comes from a run::

    <!-- numbers:resolution-epsilon -->
    (generated text)
    <!-- /numbers:resolution-epsilon -->

Each KEY is rendered by a function registered in a module of ``scripts/numbers/`` (one module
per area). A module exposes ``SECTIONS: dict[str, Callable[[dict[str, Result]], str]]``
(KEY → markdown made from the results, by analysis name) and may expose
``ANALYSES: tuple[str, ...]``, the analyses its sections read (default: every built-in), and
``RUNS: dict[str, Callable[[Adapter], Result]]``, extra runs its sections read under their own
name (e.g. an analysis on another stimulus range); these run on the loaded model in either
mode (with ``--from-report`` only when the report lacks them).

The results come from running the analyses the way ``geomlens run NAME`` does (default model,
nnsight backend, each analysis on its own shipped data, default batch size, length and seed),
or from a finished report (``--from-report DIR``, reading ``DIR/results.json``).

    python scripts/regenerate_numbers.py                     # run, then rewrite the regions
    python scripts/regenerate_numbers.py --from-report report
    python scripts/regenerate_numbers.py --check --from-report report   # exit 1 if stale
    python scripts/regenerate_numbers.py --save-results /tmp/numbers.json  # keep the run

Files are written atomically; with ``--check`` nothing is written.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NUMBERS = Path(__file__).resolve().parent / "numbers"

Section = Callable[[dict[str, Any]], str]

# A region: the opening marker, its body (lazily, up to the first closing marker of the same
# key) and the closing marker. Keys are letters, digits, '.', '_' and '-'.
_REGION = re.compile(
    r"(?P<open><!-- numbers:(?P<key>[A-Za-z0-9._-]+) -->)(?P<body>.*?)(?P<close><!-- /numbers:(?P=key) -->)",
    re.DOTALL,
)
_OPEN = re.compile(r"<!-- numbers:([A-Za-z0-9._-]+) -->")
_CLOSE = re.compile(r"<!-- /numbers:([A-Za-z0-9._-]+) -->")


class NumbersError(ValueError):
    """A marker, section or result that the regeneration cannot use (one clear line)."""


# ---------------------------------------------------------------------------------------------
# Sections


@dataclass(frozen=True)
class Registry:
    """Every registered section, and which analyses each module's sections read."""

    sections: dict[str, Section]
    analyses: dict[str, tuple[str, ...] | None]  # KEY -> analyses (None: every built-in)
    runs: dict[str, Callable[[Any], Any]]  # result name -> run(adapter) -> Result
    runs_of: dict[str, tuple[str, ...]]  # KEY -> the runs of its module

    def runs_for(self, keys: Iterable[str]) -> dict[str, Callable[[Any], Any]]:
        """The extra runs the modules of ``keys`` declare."""
        names = {name for key in keys for name in self.runs_of.get(key, ())}
        return {name: run for name, run in self.runs.items() if name in names}


def _import_path(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"geomlens_numbers_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def load_sections(folder: Path = NUMBERS) -> Registry:
    """Import every ``*.py`` of ``folder`` (not starting with ``_``) and collect its SECTIONS.

    ``folder`` is put on ``sys.path`` so that modules can share helpers (``from _format import
    span``)."""
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    sections: dict[str, Section] = {}
    analyses: dict[str, tuple[str, ...] | None] = {}
    runs: dict[str, Callable[[Any], Any]] = {}
    runs_of: dict[str, tuple[str, ...]] = {}
    owner: dict[str, str] = {}
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_"):
            continue
        module = _import_path(path)
        mine = getattr(module, "SECTIONS", None)
        if not isinstance(mine, dict):
            raise NumbersError(f"{path} has no SECTIONS dict (KEY -> function of the results).")
        needs = getattr(module, "ANALYSES", None)
        extra = getattr(module, "RUNS", {})
        for name, run in extra.items():
            if name in runs:
                raise NumbersError(f"run {name!r} is registered twice ({path.name}).")
            runs[name] = run
        for key, render in mine.items():
            if key in sections:
                raise NumbersError(
                    f"numbers key {key!r} is registered by both {owner[key]} and {path.name}; "
                    "give one of them another key."
                )
            if not _OPEN.fullmatch(f"<!-- numbers:{key} -->"):
                raise NumbersError(f"{path.name}: key {key!r} must be letters, digits, . _ -")
            sections[key], analyses[key], owner[key] = render, needs and tuple(needs), path.name
            runs_of[key] = tuple(extra)
    return Registry(sections, analyses, runs, runs_of)


# ---------------------------------------------------------------------------------------------
# Regions


def region_keys(text: str, where: str = "<text>") -> list[str]:
    """The keys of the regions of ``text``, in order; unbalanced markers are an error."""
    keys = [m.group("key") for m in _REGION.finditer(text)]
    opened, closed = _OPEN.findall(text), _CLOSE.findall(text)
    if sorted(opened) != sorted(keys) or sorted(closed) != sorted(keys):
        unmatched = sorted(set(opened).symmetric_difference(closed) or set(opened) - set(keys))
        raise NumbersError(
            f"{where}: numbers markers without their pair ({', '.join(unmatched) or 'nested'}); "
            "each <!-- numbers:KEY --> needs one <!-- /numbers:KEY --> after it."
        )
    return keys


def replace_regions(text: str, render: Callable[[str], str | None], where: str = "<text>") -> str:
    """``text`` with every region's body replaced by ``render(KEY)`` (between newlines);
    a region for which ``render`` returns None is left as it is."""
    region_keys(text, where)

    def body(match: re.Match[str]) -> str:
        generated = render(match.group("key"))
        if generated is None:
            return match.group(0)
        return f"{match.group('open')}\n{generated.strip(chr(10))}\n{match.group('close')}"

    return _REGION.sub(body, text)


def documents(root: Path) -> list[Path]:
    """README.md and docs/*.md under ``root`` (those that exist)."""
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.is_file()]


def keys_in(paths: Iterable[Path]) -> dict[Path, list[str]]:
    return {p: region_keys(p.read_text(encoding="utf-8"), str(p)) for p in paths}


# ---------------------------------------------------------------------------------------------
# Results


def results_from_report(path: Path) -> dict[str, Any]:
    """{analysis: Result} from a report folder's results.json (or that file itself)."""
    from geomlens.results import Result

    file = path / "results.json" if path.is_dir() else path
    if not file.is_file():
        raise NumbersError(
            f"{path} has no results.json; give the folder `geomlens report --out DIR` wrote "
            "(or a results file written by --save-results)."
        )
    data = json.loads(file.read_text(encoding="utf-8"))
    if "results" not in data:
        raise NumbersError(f"{file} is not a report's results.json (no 'results' entry).")
    return {name: Result.from_dict(entry) for name, entry in data["results"].items()}


def save_results(results: dict[str, Any], path: Path, provenance: dict[str, Any]) -> None:
    """Write ``results`` in the shape of a report's results.json (readable by --from-report)."""
    from geomlens.atomic_files import atomic_write_text

    everything = {
        "provenance": provenance,
        "results": {name: result.to_dict() for name, result in results.items()},
        "errors": {},
    }
    atomic_write_text(path, json.dumps(everything, indent=2, default=str) + "\n")


def run_analyses(
    names: Sequence[str],
    *,
    runs: dict[str, Callable[[Any], Any]] | None = None,
    model: str | None = None,
    backend: str = "nnsight",
    device: str | None = None,
    quick: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Run ``names`` as ``geomlens run NAME`` does: each analysis alone, on its shipped data,
    with the CLI's defaults. ``quick``: the report's small quick subsets instead (a check of
    the sections, not numbers to publish). ``runs`` (name → run(adapter)) are run too."""
    import geomlens as gl

    model = model or "all-MiniLM-L6-v2"  # the CLI's default model
    adapter = gl.load(model, backend=backend, device=device)
    results = {name: run(adapter) for name, run in (runs or {}).items()}
    if not names:
        return results
    if quick:
        from geomlens.report.runner import run_analyses as report_runs

        outcomes, _ = report_runs(adapter, list(names), quick=True, progress=progress)
        failed = [f"{o.name}: {o.error}" for o in outcomes if o.error]
        if failed:
            raise NumbersError("analyses failed: " + "; ".join(failed))
        return {**results, **{o.name: o.result for o in outcomes}}
    for name in names:
        analysis = gl.analysis_class(name)()
        # gl.run's defaults (batch size, length, seed 0) are the CLI's.
        results[name] = gl.run(
            analysis, adapter, analysis.default_data(adapter), seed=0, progress=progress
        )
    return results


# ---------------------------------------------------------------------------------------------
# Regeneration


@dataclass(frozen=True)
class Change:
    path: Path
    keys: list[str]  # the regions whose text changed


def regenerate(
    paths: Iterable[Path],
    sections: dict[str, Section],
    results: dict[str, Any],
    *,
    check: bool = False,
    only: Iterable[str] | None = None,
) -> list[Change]:
    """Rewrite the regions of ``paths`` from ``results`` (atomically); with ``check``, write
    nothing; with ``only``, leave the other keys' regions as they are. Returns the files (and
    regions) whose text changed or would change."""
    from geomlens.atomic_files import atomic_write_text

    changes = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        render = functools.partial(_render, sections, results, only, path)
        new = replace_regions(text, render, str(path))
        if new != text:
            old_bodies = {m.group("key"): m.group("body") for m in _REGION.finditer(text)}
            new_bodies = {m.group("key"): m.group("body") for m in _REGION.finditer(new)}
            stale = [k for k in new_bodies if old_bodies.get(k) != new_bodies[k]]
            changes.append(Change(path, stale))
            if not check:
                atomic_write_text(path, new)
    return changes


def _render(
    sections: dict[str, Section],
    results: dict[str, Any],
    only: Iterable[str] | None,
    where: Path,
    key: str,
) -> str | None:
    """One region's new text (None: leave it, it is not among ``only``)."""
    if only is not None and key not in only:
        return None
    if key not in sections:
        raise NumbersError(
            f"{where}: no section renders numbers key {key!r}; register it in a module "
            f"of scripts/numbers/ (known: {', '.join(sorted(sections)) or 'none'})."
        )
    try:
        return sections[key](results)
    except KeyError as error:
        raise NumbersError(
            f"{where}: section {key!r} needs {error} in the results; run that analysis "
            "or give a report that has it."
        ) from error


def needed_analyses(keys: Iterable[str], registry: Registry) -> list[str] | None:
    """The analyses the given keys' sections read (None: every built-in)."""
    needed: list[str] = []
    for key in keys:
        if key not in registry.sections:
            continue  # reported when the region is rendered
        mine = registry.analyses[key]
        if mine is None:
            return None
        needed.extend(a for a in mine if a not in needed)
    return needed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from-report", type=Path, help="A report folder (or results.json).")
    parser.add_argument("--model", default=None, help="Model for the runs (default: MiniLM).")
    parser.add_argument("--backend", default="nnsight")
    parser.add_argument("--device", default=None)
    parser.add_argument("--quick", action="store_true", help="Small quick subsets (a check).")
    parser.add_argument("--check", action="store_true", help="Write nothing; exit 1 if stale.")
    parser.add_argument("--only", action="append", help="Only these KEYs (repeatable).")
    parser.add_argument("--root", type=Path, default=ROOT, help="Repository root.")
    parser.add_argument("--save-results", type=Path, help="Also write the run's results here.")
    args = parser.parse_args(argv)

    try:
        registry = load_sections()
        found = keys_in(documents(args.root))
        keys = [k for ks in found.values() for k in ks if not args.only or k in args.only]
        options = {
            "model": args.model,
            "backend": args.backend,
            "device": args.device,
            "quick": args.quick,
        }
        if args.from_report is not None:
            results = results_from_report(args.from_report)
            missing = {k: v for k, v in registry.runs_for(keys).items() if k not in results}
            if missing:
                print(f"running {', '.join(missing)} (not in the report)", file=sys.stderr)
                results.update(run_analyses([], runs=missing, **options))
        else:
            from geomlens.analyses.registry import report_analyses

            names = needed_analyses(keys, registry)
            results = run_analyses(
                report_analyses() if names is None else names,
                runs=registry.runs_for(keys),
                **options,
            )
        if args.save_results is not None:
            save_results(results, args.save_results, {"model": args.model, "quick": args.quick})
        changes = regenerate(found, registry.sections, results, check=args.check, only=args.only)
    except NumbersError as error:
        print(f"regenerate_numbers: {error}", file=sys.stderr)
        return 2
    for change in changes:
        verb = "stale" if args.check else "rewrote"
        print(f"{verb} {change.path}: {', '.join(change.keys)}")
    if not changes:
        print("every numbers region is up to date")
    return 1 if args.check and changes else 0


if __name__ == "__main__":
    sys.exit(main())

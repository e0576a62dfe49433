"""The engine: many analyses, one forward pass per batch, activations streamed and dropped.

The union of the sites the analyses need is captured per batch and handed to each analysis's
``update``; the engine keeps nothing of a finished batch, so memory depends on the batch size
and the analyses' statistics, never on the number of inputs.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import platform
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from geomlens.analyses.base import Analysis, Batch, RunContext
from geomlens.data.dataset import Dataset, as_dataset
from geomlens.hooks.base import Adapter
from geomlens.hooks.inputs import PaddingSide
from geomlens.registry import analysis_class
from geomlens.results import Result

AnalysisSpec = str | Analysis | type[Analysis]
VERSIONED_PACKAGES = ("geomlens", "torch", "transformers", "transformer-lens", "nnsight", "numpy")


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for package in VERSIONED_PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


def build_analyses(
    specs: AnalysisSpec | Sequence[AnalysisSpec], options: dict[str, Any]
) -> list[Analysis]:
    """Instantiate analyses from names, classes or instances; ``options`` go to every analysis
    whose config has that field (an option no analysis takes is an error)."""
    if isinstance(specs, (str, Analysis, type)):
        specs = [specs]
    if len(specs) == 0:
        raise ValueError(
            "No analysis given; pass a name such as 'activation-stats' (see gl.list_analyses())."
        )
    analyses: list[Analysis] = []
    used: set[str] = set()
    for spec in specs:
        if isinstance(spec, Analysis):
            if options:
                raise ValueError(
                    "Pass options either in the Analysis instance or as keywords, not both."
                )
            analyses.append(spec)
            continue
        cls = analysis_class(spec) if isinstance(spec, str) else spec
        if not (isinstance(cls, type) and issubclass(cls, Analysis)):
            raise TypeError(f"{spec!r} is not an analysis name, Analysis subclass or instance.")
        fields = {f.name for f in dataclasses.fields(cls.Config)}
        mine = {k: v for k, v in options.items() if k in fields}
        used.update(mine)
        analyses.append(cls(**mine))
    unused = sorted(set(options) - used)
    if unused:
        raise ValueError(
            f"Option(s) {', '.join(map(repr, unused))} are not options of "
            f"{', '.join(repr(a.name) for a in analyses)}."
        )
    names = [a.name for a in analyses]
    if len(set(names)) != len(names):
        raise ValueError(
            f"Analysis names repeat in {names}; run differently configured copies separately."
        )
    return analyses


def batch_indices(num_examples: int, batch_size: int) -> Iterable[np.ndarray]:
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
    for start in range(0, num_examples, batch_size):
        yield np.arange(start, min(start + batch_size, num_examples))


def union_sites(analyses: Sequence[Analysis], adapter: Adapter) -> list[str]:
    """Every site any analysis needs, once each, in the model's forward order."""
    wanted = {adapter.resolve_site(s) for a in analyses for s in a.sites(adapter)}
    order = {site: i for i, site in enumerate(adapter.sites())}
    return sorted(wanted, key=lambda s: order.get(s, len(order)))


def stream(
    analyses: Sequence[Analysis],
    adapter: Adapter,
    dataset: Dataset,
    *,
    batch_size: int = 32,
    padding_side: PaddingSide = "right",
    max_length: int | None = None,
    progress: bool | None = None,
    seed: int = 0,
    rows: np.ndarray | None = None,
) -> list[str]:
    """Feed ``rows`` of ``dataset`` (all by default) through the analyses; return the sites.

    This is the data-parallel unit: run it on disjoint rows in several workers, ``merge`` the
    analyses, finalise once.
    """
    missing = {a.name: sorted(set(a.required_columns()) - set(dataset.columns)) for a in analyses}
    missing = {k: v for k, v in missing.items() if v}
    if missing:
        raise ValueError(
            "The data lacks columns the analyses need: "
            + "; ".join(f"{name} needs {cols}" for name, cols in missing.items())
            + f". Columns given: {sorted(dataset.columns) or 'none'}."
        )
    sites = union_sites(analyses, adapter)
    rows = np.arange(len(dataset)) if rows is None else np.asarray(rows)
    context = RunContext(adapter, len(dataset), seed, tuple(dataset.columns))
    for analysis in analyses:
        if analysis.context is None:
            analysis.setup(context)
    chunks = [rows[idx] for idx in batch_indices(len(rows), batch_size)]
    disable = None if progress is None else not progress
    for index in tqdm(chunks, desc="geomlens", unit="batch", disable=disable, leave=False):
        inputs = adapter.encode(dataset, index, padding_side=padding_side, max_length=max_length)
        batch = Batch(adapter.capture(inputs, sites), inputs, dataset.column_batch(index))
        for analysis in analyses:
            analysis.update(batch)
        del batch, inputs  # nothing of a finished batch outlives its iteration
    return sites


def run(
    analyses: AnalysisSpec | Sequence[AnalysisSpec],
    model: Any,
    data: Any = None,
    *,
    batch_size: int = 32,
    padding_side: PaddingSide = "right",
    max_length: int | None = None,
    progress: bool | None = None,
    seed: int = 0,
    **options: Any,
) -> Result | dict[str, Result]:
    """Run one analysis (→ :class:`Result`) or several fused in one pass (→ ``{name: Result}``).

    ``model`` is an Adapter or anything ``gl.attach`` accepts. ``data``: texts, token ids, a
    mapping/DataFrame with a ``text`` column and label columns, a Dataset, or None for recorded
    activations. Keyword ``options`` (``site=…``, ``pooling=…``) go to every analysis that has
    that option.
    """
    from geomlens.hooks.attach import attach

    adapter = model if isinstance(model, Adapter) else attach(model)
    built = build_analyses(analyses, options)
    dataset = as_dataset(data, num_rows=getattr(adapter, "num_rows", None))
    torch.manual_seed(seed)
    started = time.perf_counter()
    sites = stream(
        built,
        adapter,
        dataset,
        batch_size=batch_size,
        padding_side=padding_side,
        max_length=max_length,
        progress=progress,
        seed=seed,
    )
    elapsed = time.perf_counter() - started
    provenance = {
        **adapter.describe(),
        "sites": sites,
        "seed": seed,
        "num_examples": len(dataset),
        "batch_size": batch_size,
        "padding_side": padding_side,
        "max_length": max_length,
        "device": str(adapter.device),
        "fused_with": [a.name for a in built],
        # A result computed under an intervention must say so: the sites edited, in order.
        "interventions": [site for site, _ in adapter.active_edits],
        "versions": library_versions(),
        "forward_seconds": round(elapsed, 4),
    }
    results = {}
    for analysis in built:
        finalize_start = time.perf_counter()
        result = analysis.finalize()
        result.config = analysis.config.to_dict()
        result.provenance = {
            **provenance,
            "analysis_sites": [adapter.resolve_site(s) for s in analysis.sites(adapter)],
            "finalize_seconds": round(time.perf_counter() - finalize_start, 4),
        }
        results[analysis.name] = result
    if isinstance(analyses, (str, Analysis, type)):
        return results[built[0].name]
    return results

"""Which analyses the report runs, on which data, in how few passes.

Every analysis names its own shipped data (``Analysis.default_data``). Analyses whose data is
the same (same texts or token ids, same columns) share one ``gl.run`` call, so the engine
captures the union of their sites in one forward pass per batch. ``--quick`` keeps a small,
still well-formed part of each data set: whole contexts (so a concept keeps both its values
in each kept context), whole trials (each in every rotation of its options), every task,
condition and test, and evenly spaced rows elsewhere (so a coordinate range such as years keeps
its span). The causal-LM section's quick passes keep fewer rows (``QUICK_CAUSAL_LM_ROWS``): a
30-layer model costs several times MiniLM per row.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from geomlens.analyses.base import Analysis
from geomlens.analyses.registry import analysis_class, declaration
from geomlens.data.dataset import Dataset, as_dataset, select_rows
from geomlens.models.adapter import Adapter

#: Rows a ``--quick`` pass keeps at most (before each group's minimum is added back).
QUICK_ROWS = 64
#: Rows every task / condition group keeps in a quick pass, so none disappears.
QUICK_GROUP_MIN_ROWS = 8
#: Columns whose values split the data into groups that a quick pass must all keep (``test``:
#: behavioural similarity's similarity and identification prompts).
GROUP_COLUMNS = ("task", "condition", "test")
#: Columns naming rows that a quick pass keeps or drops together: a context shows both values
#: of a concept, a trial is shown in every rotation of its options (so that a preference for a
#: position or a label cancels).
UNIT_COLUMNS = ("context", "trial")


@dataclass
class ReportPass:
    """Analyses that share one data set and so run fused in one ``gl.run`` call."""

    analyses: list[Analysis]
    dataset: Dataset
    full_rows: int
    fingerprint: str
    columns: list[str] = field(default_factory=list)
    #: The data in words (from the first analysis's ``default_data`` docstring).
    description: str = ""

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.analyses]


@dataclass
class PlanFailure:
    """An analysis that could not even be prepared (its config or data failed)."""

    name: str
    error: str


def dataset_fingerprint(dataset: Dataset) -> str:
    """A digest of a dataset's inputs and columns: equal digests mean the same data."""
    digest = hashlib.sha256()
    inputs = dataset.texts if dataset.texts is not None else dataset.token_ids
    digest.update(repr(inputs if inputs is not None else dataset.num_rows).encode())
    for name in sorted(dataset.columns):
        digest.update(name.encode())
        digest.update(repr(np.asarray(dataset.columns[name]).tolist()).encode())
    return digest.hexdigest()[:16]


def subset(dataset: Dataset, rows: np.ndarray) -> Dataset:
    """The rows ``rows`` of ``dataset`` (inputs, named inputs and every column), in that order."""
    return select_rows(dataset, rows)


def _evenly_spaced(count: int, keep: int) -> np.ndarray:
    return np.unique(np.linspace(0, count - 1, num=max(1, min(keep, count))).round().astype(int))


def _group_rows(dataset: Dataset, members: np.ndarray, budget: int) -> np.ndarray:
    """Up to about ``budget`` of ``members``: whole contexts (or trials) when the data has
    them."""
    unit = next((c for c in UNIT_COLUMNS if c in dataset.columns), None)
    if unit is None:
        return members[_evenly_spaced(len(members), budget)]
    units = np.asarray(dataset.columns[unit])[members]
    order = list(dict.fromkeys(units.tolist()))
    per_unit = len(members) / len(order)
    # At least two contexts (trials), so that cross-context statistics stay defined.
    keep = max(2, math.floor(budget / per_unit))
    chosen = {order[i] for i in _evenly_spaced(len(order), keep)}
    return members[[u in chosen for u in units.tolist()]]


def quick_subset(dataset: Dataset, max_rows: int = QUICK_ROWS) -> Dataset:
    """A small, well-formed part of ``dataset`` for a first look (see the module docstring)."""
    if len(dataset) <= max_rows:
        return dataset
    keys = [
        tuple(
            np.asarray(dataset.columns[c])[i].item() for c in GROUP_COLUMNS if c in dataset.columns
        )
        for i in range(len(dataset))
    ]
    groups: dict[tuple, list[int]] = {}
    for row, key in enumerate(keys):
        groups.setdefault(key, []).append(row)
    budget = max(QUICK_GROUP_MIN_ROWS, max_rows // len(groups))
    kept = [_group_rows(dataset, np.asarray(rows), budget) for rows in groups.values()]
    return subset(dataset, np.sort(np.concatenate(kept)))


def default_data_description(analysis: type[Analysis] | str) -> str:
    """What an analysis (a class or a name) runs on when given no data, in words: its
    declaration's ``default_data``."""
    name = analysis if isinstance(analysis, str) else analysis.name
    return declaration(name).default_data


def build_analysis(
    name: str,
    quick: bool,
    adapter: Adapter | None = None,
    options: dict[str, Any] | None = None,
) -> Analysis:
    """An analysis with its default config and ``options`` (when ``quick``, the cheaper options
    its declaration names: fewer resamples, a smaller SAE).

    A quick run trains a small SAE for sae-features only when no full-size one is cached for
    the model: a full-size SAE already trained (by a full report) is better and costs nothing.
    """
    cls = analysis_class(name)
    cheaper = dict(declaration(name).quick) if quick else {}
    if "training" in cheaper and adapter is not None and _full_size_sae_cached(cls, adapter):
        del cheaper["training"]
    return cls(**{**cheaper, **(options or {})})


#: What the report plans: an analysis name (default config, default data), an analysis built
#: with options (its default data), or an analysis with the data it runs on.
PlannedAnalysis = str | Analysis | tuple[Analysis, Any] | tuple[Analysis, Any, str]


def given_data_description(what: str | None = None) -> str:
    """Words for data handed to an analysis (not its default): ``what`` it is, when known."""
    return what or "Data given with the analysis (not its default data)."


def planned_name(item: PlannedAnalysis) -> str:
    analysis = item[0] if isinstance(item, tuple) else item
    return analysis.name if isinstance(analysis, Analysis) else analysis


def _full_size_sae_cached(cls: type[Analysis], adapter: Adapter) -> bool:
    """Whether the analysis, left at its defaults, would reuse a cached full-size SAE."""
    if getattr(cls.Config, "sae", object()) is not None:  # only analyses that train an SAE
        return False
    from geomlens.sae.config import default_corpus_name
    from geomlens.sae.training import is_cached

    try:
        (site, *_) = cls().sites(adapter)
    except Exception:  # no site to read: the analysis will say so when it runs
        return False
    return is_cached(adapter, site, corpus=default_corpus_name())


def plan_passes(
    adapter: Adapter,
    names: Sequence[PlannedAnalysis],
    *,
    quick: bool = False,
    quick_rows: int = QUICK_ROWS,
) -> tuple[list[ReportPass], list[PlanFailure]]:
    """Group the analyses by their data; one :class:`ReportPass` per distinct data set.

    ``names``: analysis names (built with their default config, run on their default data),
    analyses already built with options, or (analysis, data) pairs, optionally with a third
    item saying in words what the data is (the causal-LM section's).
    An analysis whose construction or data fails is returned as a :class:`PlanFailure` (the
    report shows the error) rather than stopping the others. ``quick``: each pass keeps about
    ``quick_rows`` rows (:func:`quick_subset`).
    """
    passes: dict[str, ReportPass] = {}
    failures: list[PlanFailure] = []
    for item in names:
        name = planned_name(item)
        analysis, data, *described = item if isinstance(item, tuple) else (item, None)
        try:
            if not isinstance(analysis, Analysis):
                analysis = build_analysis(analysis, quick, adapter)
            data_is_default = data is None
            if data_is_default:
                data = analysis.default_data(adapter)
            dataset = as_dataset(data, num_rows=getattr(adapter, "num_rows", None))
        except Exception as error:  # one analysis's bad data must not stop the report
            failures.append(PlanFailure(name, f"{type(error).__name__}: {error}"))
            continue
        fingerprint = dataset_fingerprint(dataset)
        if fingerprint in passes:
            passes[fingerprint].analyses.append(analysis)
            continue
        full_rows = len(dataset)
        if quick:
            dataset = quick_subset(dataset, quick_rows)
        passes[fingerprint] = ReportPass(
            [analysis],
            dataset,
            full_rows,
            fingerprint,
            sorted(dataset.columns),
            default_data_description(type(analysis))
            if data_is_default
            else given_data_description(*described),
        )
    return list(passes.values()), failures

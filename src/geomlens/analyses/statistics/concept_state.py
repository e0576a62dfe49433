"""What abstraction, CCGP and linearization-effect share: concept rows, their state, their scores.

A concept set's rows carry a binary ``concept``, a ``context`` and a ``task`` (see
:mod:`geomlens.data.concepts`). :class:`ConceptState` folds batches into class means per
(site, task, concept, context) — all the abstraction cosine needs — and, when a probe needs
them, the pooled rows themselves. The scoring functions turn a state into per-task table rows;
they are deterministic given the run seed (bootstrap and shuffle draws are seeded per site and
task, so the order in which states were merged does not matter).

Formulas: docs/abstraction.md.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from geomlens.analyses.abstraction.config import ConceptConfig
from geomlens.analyses.base import Analysis, Batch
from geomlens.analyses.statistics.alpha_scores import alpha_draws, summarise_alpha
from geomlens.analyses.statistics.alpha_scores import (
    pairwise_alpha as pairwise_alpha,  # re-exported
)
from geomlens.analyses.statistics.probe_scores import ccgp_scores as ccgp_scores  # re-exported
from geomlens.analyses.statistics.probe_scores import (
    context_splits as context_splits,  # re-exported
)
from geomlens.inputs.encoding import to_device
from geomlens.inputs.pooling import pool_tokens
from geomlens.models.adapter import Adapter
from geomlens.plain_state import state_class

#: Task name given to rows of data without a ``task`` column.
SINGLE_TASK = "all"


def concept_sites(config: ConceptConfig, adapter: Adapter) -> list[str]:
    """The configured sites, or the layer sweep of ``hook_resid_post``."""
    if config.site is None:
        sweep = adapter.residual_sites()
        return sweep or adapter.sites()
    return [config.site] if isinstance(config.site, str) else list(config.site)


def default_concept_data(adapter: Adapter) -> dict[str, list[str]]:
    """The shipped English two-factor sets (gender, number, tense, degree, animacy-by-colour)."""
    from geomlens.data.concepts import english_concepts

    return english_concepts()


def pooled_rows(
    activations: dict[str, torch.Tensor], batch: Batch, site: str, pooling: str
) -> torch.Tensor:
    """``[B, d]`` float64 on the activations' device: one vector per row of the batch at
    ``site`` (nothing is read back to the host)."""
    how = pooling
    if how == "auto":
        how = "span" if batch.inputs.span_mask is not None else "mean"
    vectors = pool_tokens(activations[site], batch.attention_mask, how, batch.inputs.span_mask)
    return vectors.detach().reshape(vectors.shape[0], -1).to(torch.float64)


def batch_labels(batch: Batch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(task, concept, context) of each row, as strings."""
    columns = batch.columns
    missing = [c for c in ("concept", "context") if c not in columns]
    if missing:
        raise ValueError(
            f"Concept analyses need the columns concept and context (and optionally task); "
            f"the data lacks {missing}. See geomlens.data.concepts for the shipped sets."
        )
    tasks = columns.get("task")
    if tasks is None:
        tasks = np.full(len(batch), SINGLE_TASK)
    return tasks.astype(str), columns["concept"].astype(str), columns["context"].astype(str)


Cell = tuple[str, str, str]  # (task, concept, context)


@state_class
class ConceptState:
    """Mergeable, plain-data state of one concept analysis over several sites.

    Per site, the class-mean sums of every (task, concept, context) cell stay where the
    activations are (a float64 ``[cells, d]`` tensor, filled with ``index_add_``) and the cells'
    counts, known from the labels, on the host; when ``keep_rows``, the pooled ``[N, d]`` rows
    per site stay on the device too, with their dataset index and labels on the host (a concept
    set is thousands of rows). Nothing is read back per batch: the tensors come to the host,
    once, the first time the state is read (:attr:`means`, :meth:`class_means`,
    :meth:`pooled`: in the analyses' finalize).
    """

    def __init__(self, keep_rows: bool) -> None:
        self.keep_rows = keep_rows
        #: Each (task, concept, context) cell's row in the sums, in order of first sight.
        self.cells: dict[Cell, int] = {}
        self.sums: dict[str, torch.Tensor] = {}
        self.counts: dict[str, np.ndarray] = {}
        self.rows: dict[str, list[torch.Tensor]] = {}
        self.index: list[np.ndarray] = []
        self.labels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def _cell_ids(self, cells: Sequence[Cell]) -> np.ndarray:
        return np.asarray([self.cells.setdefault(c, len(self.cells)) for c in cells], np.int64)

    def _grown(self, site: str, width: int, device: torch.device) -> torch.Tensor:
        """The sums at ``site`` on ``device``, with a zero row (and count) for every cell not
        seen there yet."""
        sums = self.sums.get(site)
        if sums is None:
            sums = torch.zeros(0, width, dtype=torch.float64, device=device)
        sums = sums.to(device)
        missing = len(self.cells) - len(sums)
        if missing:
            zeros = torch.zeros(missing, sums.shape[1], dtype=sums.dtype, device=device)
            sums = torch.cat([sums, zeros])
        counts = self.counts.get(site, np.zeros(0, np.int64))
        self.counts[site] = np.pad(counts, (0, len(self.cells) - len(counts)))
        return sums

    def _add(self, site: str, ids: np.ndarray, vectors: torch.Tensor, counts: np.ndarray) -> None:
        """Add ``vectors`` [n, d] to the sums of cells ``ids`` at ``site`` on the vectors'
        device, and ``counts`` [n] to their counts on the host."""
        sums = self._grown(site, vectors.shape[1], vectors.device)
        # On the CPU the rows of one cell add in row order (the same sums as adding them one by
        # one); CUDA's atomic adds take them in any order (float64: ~1e-16 relative).
        self.sums[site] = sums.index_add_(0, to_device(ids, sums.device), vectors)
        np.add.at(self.counts[site], ids, counts)

    def update(
        self,
        activations: dict[str, torch.Tensor],
        batch: Batch,
        sites: Sequence[str],
        pooling: str,
    ) -> None:
        tasks, concepts, contexts = batch_labels(batch)
        ids = self._cell_ids(list(zip(tasks.tolist(), concepts.tolist(), contexts.tolist())))
        ones = np.ones(len(ids), np.int64)
        for site in sites:
            vectors = pooled_rows(activations, batch, site, pooling)
            self._add(site, ids, vectors, ones)
            if self.keep_rows:
                self.rows.setdefault(site, []).append(vectors.to(torch.float32))
        if self.keep_rows:
            self.index.append(np.asarray(batch.index))
            self.labels.append((tasks, concepts, contexts))

    def merge(self, other: ConceptState) -> None:
        ids = self._cell_ids(sorted(other.cells, key=other.cells.__getitem__))
        for site, sums in other.sums.items():
            mine = self.sums.get(site)
            device = mine.device if mine is not None else sums.device
            n = len(sums)  # other's cells seen at this site: its first n
            self._add(site, ids[:n], sums.to(device), other.counts[site][:n])
        for site, chunks in other.rows.items():
            self.rows.setdefault(site, []).extend(chunks)
        self.index.extend(other.index)
        self.labels.extend(other.labels)

    def _to_host(self) -> None:
        """The device tensors moved to the CPU, in place (one read per site and kind); the rows
        keep their chunks (the state's values and shape stay as they were)."""
        for site, sums in self.sums.items():
            self.sums[site] = sums.cpu()
        for site, chunks in self.rows.items():
            if any(chunk.device.type != "cpu" for chunk in chunks):
                device = chunks[-1].device
                joined = torch.cat([c.to(device) for c in chunks]).cpu()
                self.rows[site] = list(joined.split([len(c) for c in chunks]))

    @property
    def means(self) -> dict[tuple[str, str, str, str], list[Any]]:
        """``{(site, task, concept, context): [sum vector (numpy), count]}`` of every cell
        seen at each site."""
        self._to_host()
        cells = sorted(self.cells, key=self.cells.__getitem__)
        return {
            (site, *cells[j]): [self.sums[site][j].numpy(), int(count)]
            for site, counts in self.counts.items()
            for j, count in enumerate(counts)
            if count
        }

    @property
    def empty(self) -> bool:
        return not self.sites()

    def sites(self) -> list[str]:
        return [site for site, counts in self.counts.items() if counts.any()]

    def tasks(self) -> list[str]:
        return sorted({task for task, _, _ in self.cells})

    def class_means(self, site: str, task: str) -> tuple[list[str], list[str], np.ndarray]:
        """(concept values, contexts, means ``[2, k, d]``), contexts with both values only."""
        cells = {
            (c, x): s / n for (st, t, c, x), (s, n) in self.means.items() if (st, t) == (site, task)
        }
        concepts = sorted({c for c, _ in cells})
        if len(concepts) != 2:
            raise ValueError(
                f"Task {str(task)!r} has concept values {[str(c) for c in concepts]}; a concept "
                "is binary, so each task "
                "needs exactly two values (give other values their own task)."
            )
        contexts = sorted({x for c, x in cells if all((v, x) in cells for v in concepts)})
        means = np.array([[cells[(c, x)] for x in contexts] for c in concepts])
        return concepts, contexts, means

    def class_means_across_contexts(
        self, site: str, task: str, purpose: str
    ) -> tuple[list[str], list[str], np.ndarray]:
        """:meth:`class_means` of a task seen in at least two contexts that hold both concept
        values, or an error saying why ``purpose`` needs them."""
        concepts, contexts, means = self.class_means(site, task)
        if len(contexts) < 2:
            raise ValueError(
                f"Task {str(task)!r} needs at least two contexts that hold both of its concept "
                f"values ({purpose}); it has {[str(x) for x in contexts] or 'none'}. Add rows in "
                "more contexts."
            )
        return concepts, contexts, means

    def pooled_index(self, task: str) -> np.ndarray:
        """The dataset row numbers of :meth:`pooled`'s rows of ``task``, in the same order."""
        self._to_host()
        index = np.concatenate(self.index)
        order = np.argsort(index, kind="stable")
        tasks = np.concatenate([part[0] for part in self.labels])[order]
        return index[order][tasks == task]

    def pooled(self, site: str, task: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows ``[n, d]``, concept, context) of one task at one site, in dataset order."""
        self._to_host()
        order = np.argsort(np.concatenate(self.index), kind="stable")
        tasks, concepts, contexts = (np.concatenate(part)[order] for part in zip(*self.labels))
        rows = torch.cat(self.rows[site]).numpy()[order]
        chosen = tasks == task
        return rows[chosen].astype(np.float64), concepts[chosen], contexts[chosen]


class ConceptRowsAnalysis(Analysis):
    """An analysis that reads rows of a concept set: the concept columns, and the shipped
    English sets by default."""

    def required_columns(self) -> tuple[str, ...]:
        return ("concept", "context")

    def default_data(self, adapter: Adapter) -> Any:
        """The shipped English two-factor concept sets (gender, number, tense, degree,
        animacy-by-colour), each concept in many contexts."""
        return default_concept_data(adapter)


class ConceptAnalysis(ConceptRowsAnalysis):
    """An analysis over a concept set: the configured sites, the concept columns, the shipped
    English sets by default, and a :class:`ConceptState` (with pooled rows when
    ``keeps_rows``) that every batch is folded into."""

    config: ConceptConfig
    keeps_rows: bool = False

    def __init__(self, config: ConceptConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        self.state = ConceptState(keep_rows=self.keeps_rows)

    def sites(self, adapter: Adapter) -> list[str]:
        return concept_sites(self.config, adapter)

    def update(self, batch: Batch) -> None:
        sites = self.sites(self._run_context().adapter)
        self.state.update(batch.activations, batch, sites, self.config.pooling)

    def merge(self, other: Analysis) -> None:
        self._check_mergeable(other)
        assert isinstance(other, ConceptAnalysis)
        self.state.merge(other.state)

    def checked_seed(self) -> int:
        """The run seed; refuses to finalise a state that saw no rows."""
        if self.state.empty:
            raise ValueError(f"{self.name} saw no data; give rows with concept and context.")
        return self.context.seed if self.context is not None else 0


def task_rng(seed: int, site: str, task: str) -> np.random.Generator:
    """A generator fixed by the run seed, the site and the task (not by merge order)."""
    return np.random.default_rng([seed, zlib.crc32(f"{site}\x00{task}".encode())])


def abstraction_scores(
    means: np.ndarray,
    rng: np.random.Generator,
    *,
    n_bootstrap: int,
    n_shuffles: int,
    confidence: float,
    null: str = "within-context",
) -> dict[str, float]:
    """α, its bootstrap CI over contexts (NaN with fewer than three contexts) and the
    label-shuffle nulls, from class means ``[2, k, d]`` (concept value × context); see
    :mod:`geomlens.analyses.statistics.alpha_scores`."""
    draws = alpha_draws(means, rng, n_bootstrap=n_bootstrap, n_shuffles=n_shuffles)
    return summarise_alpha(draws, confidence=confidence, null=null)


def _defined(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and np.isnan(value))


def site_averages(rows: list[dict[str, Any]], columns: Sequence[str]) -> dict[str, float]:
    """``{"<site>.<column>": mean over the tasks where the column is defined}`` for each
    numeric column (NaN when no task defines it; :func:`site_tasks` names the tasks)."""
    metrics: dict[str, float] = {}
    for site in dict.fromkeys(r["site"] for r in rows):
        mine = [r for r in rows if r["site"] == site]
        for column in columns:
            present = [r[column] for r in mine if column in r]
            if not present:
                continue
            values = [v for v in present if _defined(v)]
            metrics[f"{site}.{column}"] = float(np.mean(values)) if values else float("nan")
    return metrics


def site_tasks(rows: list[dict[str, Any]], columns: Sequence[str]) -> list[dict[str, Any]]:
    """One row per site: which tasks its means average (``tasks``, ``n_tasks``) and, for each
    column some task leaves undefined, the tasks that define it (``<column>_tasks``)."""
    table = []
    for site in dict.fromkeys(r["site"] for r in rows):
        mine = [r for r in rows if r["site"] == site]
        entry: dict[str, Any] = {
            "site": site,
            "tasks": ", ".join(r["task"] for r in mine),
            "n_tasks": float(len(mine)),
        }
        for column in columns:
            defined = [r["task"] for r in mine if _defined(r.get(column))]
            if len(defined) < len(mine):
                entry[f"{column}_tasks"] = ", ".join(defined)
        table.append(entry)
    return table

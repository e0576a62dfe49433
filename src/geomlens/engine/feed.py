"""The engine: many analyses, one forward pass per batch, activations streamed and dropped.

The union of the sites the analyses need is captured per batch and handed to each analysis's
``update``; the engine keeps nothing of a finished batch, so memory depends on the batch size
and the analyses' statistics, never on the number of inputs.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import importlib.metadata
import os
import platform
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from geomlens.analyses.base import Analysis, Batch, RunContext
from geomlens.analyses.registry import analysis_class
from geomlens.data.dataset import Dataset, as_dataset
from geomlens.data.streaming import StreamedData, as_stream, is_streamed
from geomlens.engine.checkpoint import Checkpoint, Progress, RowDigest
from geomlens.engine.distributed import (
    SINGLE_PROCESS,
    Shard,
    broadcast_from_main,
    current_shard,
    gather_to_main,
)
from geomlens.hooks.finite_check import NonFiniteWatch
from geomlens.inputs.batches import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_LENGTH,
    BatchRows,
    batch_indices,
    capture_batch,
    check_run_limits,
    encoded_batches,
)
from geomlens.inputs.encoding import ModelInputs, PaddingSide
from geomlens.interventions.linearize import active_linearizations
from geomlens.models.adapter import Adapter
from geomlens.models.fingerprint import weights_fingerprint
from geomlens.progress import bar as progress_bar
from geomlens.progress import phase, showing_progress
from geomlens.results import Result

AnalysisSpec = str | Analysis | type[Analysis]
VERSIONED_PACKAGES = ("geomlens", "torch", "transformers", "transformer-lens", "nnsight", "numpy")


def library_versions() -> dict[str, str]:
    return dict(_installed_versions())


@functools.cache
def _installed_versions() -> tuple[tuple[str, str], ...]:
    """Read once per process: reading package metadata costs ~0.1 s, which a sweep over many
    checkpoints would pay at every one."""
    versions = {"python": platform.python_version()}
    for package in VERSIONED_PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return tuple(versions.items())


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
        valid = sorted({f.name for a in analyses for f in dataclasses.fields(a.config)})
        nearest = {name: difflib.get_close_matches(name, valid, n=1) for name in unused}
        hints = "".join(f" Did you mean {m[0]!r} for {n!r}?" for n, m in nearest.items() if m)
        raise ValueError(
            f"Option(s) {', '.join(map(repr, unused))} are not options of "
            f"{', '.join(repr(a.name) for a in analyses)}.{hints} Options: {', '.join(valid)}."
        )
    names = [a.name for a in analyses]
    if len(set(names)) != len(names):
        raise ValueError(
            f"Analysis names repeat in {names}; run differently configured copies separately."
        )
    return analyses


def union_sites(analyses: Sequence[Analysis], adapter: Adapter) -> list[str]:
    """Every site any analysis needs, once each, in the model's forward order."""
    wanted = {adapter.resolve_site(s) for a in analyses for s in a.sites(adapter)}
    order = {site: i for i, site in enumerate(adapter.sites())}
    return sorted(wanted, key=lambda s: order.get(s, len(order)))


@dataclass(frozen=True)
class RunSettings:
    """How a run forms and feeds its batches: the five settings ``gl.run`` and ``stream`` take,
    checked once and passed as one value (and recorded as one in a checkpoint and provenance)."""

    batch_size: int = DEFAULT_BATCH_SIZE
    padding_side: PaddingSide = "right"
    max_length: int | None = DEFAULT_MAX_LENGTH
    progress: bool | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        check_run_limits(
            batch_size=self.batch_size, padding_side=self.padding_side, max_length=self.max_length
        )

    def recorded(self) -> dict[str, Any]:
        """What a result's provenance and a checkpoint's arguments record (progress is not)."""
        return {
            "batch_size": self.batch_size,
            "padding_side": self.padding_side,
            "max_length": self.max_length,
            "seed": self.seed,
        }


@dataclass
class FeedSummary:
    """What a pass over the data did: the sites read, and the rows and tokens folded in."""

    sites: list[str]
    rows: int = 0
    #: A device tensor until read (reading it waits for the device: done once, after the loop).
    tokens: int | torch.Tensor = 0
    #: Seconds spent capturing the batches (the forward pass): shared by every analysis of the
    #: pass.
    shared_seconds: float = 0.0
    #: Seconds spent in each analysis's ``update`` (its own share of the pass, including any
    #: extra forward pass it runs itself), by analysis name. Host time: on an asynchronous
    #: device, work still queued is counted where the host next waits for it.
    update_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    #: Seconds spent in each analysis's ``setup`` before the first batch (e.g. sae-features
    #: training or loading its SAE), by analysis name.
    setup_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    #: Rows this rank had already folded in when the run resumed from a checkpoint (0: a fresh
    #: start).
    resumed_rows: int = 0


def _check_columns(analyses: Sequence[Analysis], columns: Sequence[str]) -> None:
    missing = {a.name: sorted(set(a.required_columns()) - set(columns)) for a in analyses}
    missing = {k: v for k, v in missing.items() if v}
    if missing:
        raise ValueError(
            "The data lacks columns the analyses need: "
            + "; ".join(f"{name} needs {cols}" for name, cols in missing.items())
            + f". Columns given: {sorted(columns) or 'none'}."
        )


def _numbered_batches(
    data: Dataset | StreamedData, rows: np.ndarray | None, batch_size: int, shard: Shard
) -> Iterator[tuple[int, Dataset, np.ndarray, np.ndarray]]:
    """``(batch number, dataset, its rows to encode, their global row numbers)`` for the batches
    of this shard. Batch ``b`` is always rows ``[b·B, (b+1)·B)``, whatever the number of ranks."""
    if isinstance(data, Dataset):
        rows = np.arange(len(data)) if rows is None else np.asarray(rows)
        chunks = list(batch_indices(len(rows), batch_size))
        for number in shard.block(len(chunks)):
            yield number, data, rows[chunks[number]], rows[chunks[number]]
        return
    for number, chunk in enumerate(data.chunks(batch_size)):
        if shard.owns_streamed(number):
            local = np.arange(len(chunk))
            yield number, chunk, local, number * batch_size + local


@dataclass
class _Resume:
    """Where a checkpoint left this rank, and the check that the data are the same rows.

    Rows already folded in are read again (not run) and hashed; the digest must equal the
    checkpoint's before the first new batch runs (or at the end, when every batch was saved).
    """

    done: Progress
    resumed_rows: int
    checking: bool
    digest: RowDigest = dataclasses.field(default_factory=RowDigest)
    verified: bool = False

    @classmethod
    def start(
        cls, analyses: Sequence[Analysis], checkpoint: Checkpoint | None, device: torch.device
    ) -> _Resume:
        saved = checkpoint.load(device) if checkpoint is not None else None
        if saved is None:
            return cls(Progress(), 0, checking=checkpoint is not None, verified=True)
        for analysis, state in zip(analyses, saved.states):
            analysis.load_state_dict(state)
        return cls(saved.progress, saved.progress.rows, checking=True)

    def verify(self) -> None:
        if self.verified:
            return
        if self.digest.rows != self.done.rows or self.digest.hexdigest() != self.done.digest:
            raise ValueError(
                f"The data differ from the checkpointed run's: its first {self.done.rows} rows "
                f"(this rank's) are not the rows read now ({self.digest.rows} rows, other "
                "content). Resume with the same data in the same order, or use another "
                "checkpoint directory."
            )
        self.verified = True


@dataclass
class _NumberedBatch:
    """One batch of this shard to run: its number, the rows it holds and their inputs."""

    number: int
    chunk: Dataset
    index: np.ndarray
    inputs: ModelInputs


@dataclass
class _PassTally:
    """What the loop adds up as it runs (the tokens stay a device tensor until the end)."""

    tokens: torch.Tensor
    rows: int
    shared_seconds: float = 0.0
    update_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    since_save: int = 0
    shown_at: float = dataclasses.field(default_factory=time.monotonic)


def _setup_analyses(analyses: Sequence[Analysis], context: RunContext) -> dict[str, float]:
    """Each analysis not set up yet prepares itself; seconds each took, by name."""
    seconds = dict.fromkeys((a.name for a in analyses), 0.0)
    for analysis in analyses:
        if analysis.context is None:
            started = time.perf_counter()
            analysis.setup(context)
            seconds[analysis.name] = time.perf_counter() - started
    return seconds


def _rows_of_shard(
    data: Dataset | StreamedData, rows: np.ndarray | None, batch_size: int, shard: Shard
) -> int | None:
    """How many rows this shard reads (None when a streamed shard's share is unknown)."""
    if isinstance(data, Dataset):
        length = len(data) if rows is None else len(rows)
        block = shard.block(-(-length // batch_size))
        return max(0, min(block.stop * batch_size, length) - block.start * batch_size)
    return data.length if shard.world_size == 1 else None


def _progress_bar(total: int | None, shard: Shard, settings: RunSettings) -> Any:
    return progress_bar(
        total=total,
        desc="geomlens",
        unit="row",
        # None: tqdm decides (shown on a terminal only); one bar per job, on rank 0.
        disable=True
        if not shard.is_main
        else (None if settings.progress is None else not settings.progress),
        leave=False,
    )


def _batches_to_run(
    adapter: Adapter,
    data: Dataset | StreamedData,
    settings: RunSettings,
    rows: np.ndarray | None,
    shard: Shard,
    resume: _Resume,
    bar: Any,
) -> Iterator[_NumberedBatch]:
    """This shard's batches, encoded; those folded in before the checkpoint are read, hashed
    and skipped, and the data are checked against the checkpoint before the first new one."""
    sized = isinstance(data, Dataset)
    numbered = _numbered_batches(data, rows, settings.batch_size, shard)
    for number, chunk, index, global_rows in numbered:
        if number < resume.done.next_batch:  # folded in before the checkpoint
            if resume.checking:
                resume.digest.update(chunk, index)
            bar.update(len(index))
            continue
        resume.verify()
        (inputs,) = encoded_batches(
            adapter,
            [BatchRows(chunk, index, None if sized else global_rows)],
            padding_side=settings.padding_side,
            max_length=settings.max_length,
        )
        yield _NumberedBatch(number, chunk, index, inputs)


def _run_batch(
    analyses: Sequence[Analysis],
    adapter: Adapter,
    sites: Sequence[str],
    batch: _NumberedBatch,
    finite: NonFiniteWatch,
    tally: _PassTally,
) -> None:
    """One forward pass, every analysis updated; nothing of the batch is kept."""
    inputs = batch.inputs
    started = time.perf_counter()
    captured = capture_batch(adapter, inputs, sites)
    fed = Batch(captured.activations, inputs, batch.chunk.column_batch(batch.index))
    finite.update(batch.number, fed.activations, inputs.attention_mask, inputs.index)
    tally.shared_seconds += time.perf_counter() - started
    for analysis in analyses:
        started = time.perf_counter()
        analysis.update(fed)
        tally.update_seconds[analysis.name] += time.perf_counter() - started
    tally.tokens += inputs.attention_mask.sum()
    tally.rows += len(batch.index)
    del fed, inputs, captured  # nothing of a finished batch outlives its iteration


def _show_tokens(bar: Any, tally: _PassTally, done: Progress) -> None:
    """The token count on the progress bar, read from the device at most once a second."""
    if not bar.disable and time.monotonic() - tally.shown_at > 1.0:
        bar.set_postfix(tokens=int(tally.tokens + done.tokens), refresh=False)
        tally.shown_at = time.monotonic()


def _after_batch_checkpoint(
    analyses: Sequence[Analysis],
    checkpoint: Checkpoint,
    batch: _NumberedBatch,
    resume: _Resume,
    finite: NonFiniteWatch,
    tally: _PassTally,
) -> None:
    """Record the batch in the row digest; every ``checkpoint.every`` batches, save."""
    resume.digest.update(batch.chunk, batch.index)
    done = Progress(
        batch.number + 1, resume.digest.rows, resume.done.tokens, resume.digest.hexdigest()
    )
    resume.done = done
    tally.since_save += 1
    if tally.since_save >= checkpoint.every:
        done.tokens += int(tally.tokens)
        tally.tokens.zero_()
        finite.raise_if_any()  # never checkpoint a state holding NaN
        checkpoint.save(analyses, done)
        tally.since_save = 0


def _feed(
    analyses: Sequence[Analysis],
    adapter: Adapter,
    data: Dataset | StreamedData,
    settings: RunSettings,
    *,
    rows: np.ndarray | None = None,
    shard: Shard = SINGLE_PROCESS,
    checkpoint: Checkpoint | None = None,
) -> FeedSummary:
    """The hot loop: one forward pass per batch of this shard, every analysis updated.

    Nothing here reads a device value back to the host per batch (token counts accumulate on
    the device and are read for the progress bar at most once a second), so a GPU run is never
    stalled by the loop itself.
    """
    columns = tuple(data.columns)
    _check_columns(analyses, columns)
    sites = union_sites(analyses, adapter)
    num_examples = len(data) if isinstance(data, Dataset) else data.length
    context = RunContext(adapter, num_examples, settings.seed, columns)
    setup_seconds = _setup_analyses(analyses, context)
    resume = _Resume.start(analyses, checkpoint, adapter.device)
    bar = _progress_bar(_rows_of_shard(data, rows, settings.batch_size, shard), shard, settings)
    tally = _PassTally(
        tokens=torch.zeros((), dtype=torch.long, device=adapter.device),
        rows=resume.done.rows,
        update_seconds=dict.fromkeys((a.name for a in analyses), 0.0),
    )
    finite = NonFiniteWatch()
    with bar:
        for batch in _batches_to_run(adapter, data, settings, rows, shard, resume, bar):
            _run_batch(analyses, adapter, sites, batch, finite, tally)
            bar.update(len(batch.index))
            _show_tokens(bar, tally, resume.done)
            if checkpoint is not None:
                _after_batch_checkpoint(analyses, checkpoint, batch, resume, finite, tally)
    resume.verify()  # everything was in the checkpoint: checked now
    finite.raise_if_any()
    summary = FeedSummary(
        sites,
        rows=tally.rows,
        tokens=tally.tokens + resume.done.tokens,
        shared_seconds=tally.shared_seconds,
        update_seconds=tally.update_seconds,
        setup_seconds=setup_seconds,
        resumed_rows=resume.resumed_rows,
    )
    if checkpoint is not None:
        done = resume.done
        done.tokens, done.complete = int(summary.tokens), True
        checkpoint.save(analyses, done)
    return summary


def stream(
    analyses: Sequence[Analysis],
    adapter: Adapter,
    dataset: Dataset | StreamedData,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    padding_side: PaddingSide = "right",
    max_length: int | None = DEFAULT_MAX_LENGTH,
    progress: bool | None = None,
    seed: int = 0,
    rows: np.ndarray | None = None,
) -> list[str]:
    """Feed ``rows`` of ``dataset`` (all by default) through the analyses; return the sites.

    This is the data-parallel unit: run it on disjoint rows in several workers, ``merge`` the
    analyses, finalise once. ``dataset`` may be streamed (``rows`` then cannot be given).
    """
    if rows is not None and not isinstance(dataset, Dataset):
        raise ValueError("rows= selects rows of a sized Dataset; streamed data has no row index.")
    settings = RunSettings(batch_size, padding_side, max_length, progress, seed)
    summary = _feed(analyses, adapter, dataset, settings, rows=rows)
    return summary.sites


def prepare_data(data: Any, adapter: Adapter) -> Dataset | StreamedData:
    """``data`` as a sized :class:`Dataset` or as :class:`StreamedData` read row by row.

    Recorded activations are in memory already, so streamed labels for them are read whole.
    """
    num_rows = getattr(adapter, "num_rows", None)
    if not is_streamed(data):
        return as_dataset(data, num_rows=num_rows)
    streamed = as_stream(data)
    if num_rows is not None:
        return as_dataset(list(streamed.rows()), num_rows=num_rows)
    return streamed


def analysis_cost(
    summary: FeedSummary, name: str, finalize_seconds: float, fused: int
) -> dict[str, float]:
    """What one analysis of a fused pass cost, in seconds (this rank's pass; provenance keys).

    ``shared_pass_seconds``: encoding and capturing the batches, done once for all ``fused``
    analyses; ``setup_seconds``: this analysis's preparation before the first batch (e.g.
    training or loading an SAE); ``update_seconds``: its own per-batch work (measured,
    including any second forward pass it runs, e.g. linearization-effect's);
    ``finalize_seconds``: its statistics after the pass (bootstraps, shuffles, probes);
    ``cost_seconds``: its own work (setup, updates, finalize) plus an equal share of the shared
    pass.
    """
    setup = summary.setup_seconds.get(name, 0.0)
    own = setup + summary.update_seconds.get(name, 0.0) + finalize_seconds
    return {
        "shared_pass_seconds": round(summary.shared_seconds, 4),
        "setup_seconds": round(setup, 4),
        "update_seconds": round(summary.update_seconds.get(name, 0.0), 4),
        "cost_seconds": round(own + summary.shared_seconds / max(fused, 1), 4),
    }


def _fold_ranks(analyses: Sequence[Analysis], gathered: list[Any]) -> None:
    """Fold the other ranks' states (in rank order) into this rank's analyses."""
    for states in gathered[1:]:
        for analysis, state in zip(analyses, states):
            other = copy.copy(analysis)
            other.load_state_dict(state)
            analysis.merge(other)


def own_default_data(built: list[Analysis], adapter: Adapter) -> Any:
    """The data a single analysis run without data uses: its own shipped data, as
    ``geomlens run NAME`` without ``--data`` does. Several analyses may want different data, so
    they are given theirs explicitly."""
    if len(built) > 1:
        names = ", ".join(analysis.name for analysis in built)
        raise ValueError(
            f"No data given for several analyses ({names}): each has its own default data, so "
            "pass data, or run them one at a time to use each one's own."
        )
    return built[0].default_data(adapter)


def run(
    analyses: AnalysisSpec | Sequence[AnalysisSpec],
    model: Any,
    data: Any = None,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    padding_side: PaddingSide = "right",
    max_length: int | None = DEFAULT_MAX_LENGTH,
    progress: bool | None = None,
    seed: int = 0,
    checkpoint: str | os.PathLike[str] | None = None,
    checkpoint_every: int = 50,
    distributed: bool | None = None,
    **options: Any,
) -> Result | dict[str, Result]:
    """Run one analysis (→ :class:`Result`) or several fused in one pass (→ ``{name: Result}``).

    ``model`` is an Adapter or anything ``gl.attach`` accepts. ``data``: texts, token ids, a
    mapping/DataFrame with a ``text`` column and label columns, a list of row mappings, a
    Dataset, None (recorded activations; for a model, one analysis's own default data, as in
    ``geomlens run NAME``), or any iterable of rows read as it streams (a
    generator, ``geomlens.data.streaming.stream_file(path)``, a ``datasets`` Dataset or
    IterableDataset). Keyword ``options`` (``site=…``, ``pooling=…``) go to every analysis that
    has that option.

    ``checkpoint``: a directory where the analysis states are saved every ``checkpoint_every``
    batches; rerunning with the same arguments resumes there. ``distributed``: inside an
    initialised torch.distributed process group (None: whenever one is), each rank runs a
    disjoint shard, rank 0 folds the states and finalises, and every rank returns the results.
    See docs/scale.md.
    """
    from geomlens.models.attach import attach

    check_seed(seed)
    settings = RunSettings(batch_size, padding_side, max_length, progress, seed)
    adapter = model if isinstance(model, Adapter) else attach(model)
    built = build_analyses(analyses, options)
    if data is None and getattr(adapter, "num_rows", None) is None:
        data = own_default_data(built, adapter)
    dataset = prepare_data(data, adapter)
    shard = _shard(distributed)
    run_arguments = _run_arguments(built, adapter, dataset, settings, shard)
    saver = None
    if checkpoint is not None:
        # The same path may hold other weights by now (a model retrained into its folder).
        run_arguments["model_weights_fingerprint"] = weights_fingerprint(adapter)
        saver = Checkpoint(checkpoint, run_arguments, every=checkpoint_every, shard=shard)
    torch.manual_seed(seed)
    started = time.perf_counter()
    # Progress lines (rank 0 only): what is running, while it runs.
    shown = progress if shard.is_main else False
    names = ", ".join(a.name for a in built)
    with showing_progress(shown), phase(f"reading the data through the model for {names}"):
        summary = _feed(built, adapter, dataset, settings, shard=shard, checkpoint=saver)
    gathered = gather_to_main(
        [[a.state_dict() for a in built], summary.rows, int(summary.tokens)], shard, adapter.device
    )
    elapsed = time.perf_counter() - started
    results: dict[str, Result] | None = None
    if gathered is not None:
        _fold_ranks(built, [states for states, _, _ in gathered])
        pass_record = _PassRecord(
            summary=summary,
            num_examples=sum(rows for _, rows, _ in gathered),
            num_tokens=sum(tokens for _, _, tokens in gathered),
            seconds=elapsed,
            checkpoint=saver,
        )
        provenance = _provenance(
            adapter, dataset, settings, shard, built, run_arguments, pass_record
        )
        results = _finalize(built, adapter, summary, provenance, shown)
    results = broadcast_from_main(results, shard)
    if isinstance(analyses, (str, Analysis, type)):
        return results[built[0].name]
    return results


def check_seed(seed: Any, name: str = "seed") -> None:
    """Refuse a seed that torch and numpy cannot both take (one line, the range)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        # torch takes 64-bit seeds and numpy's generators non-negative ones: both, or neither.
        shown = (
            repr(seed)
            if len(repr(seed)) <= 24
            else f"{repr(seed)[:12]}... ({len(repr(seed))} digits)"
        )
        raise ValueError(f"{name} must be an integer from 0 to 2**63 - 1; got {shown}.")


def _shard(distributed: bool | None) -> Shard:
    """This process's shard: the process group's (None: whenever there is one) or the whole."""
    shard = current_shard() if distributed is not False else SINGLE_PROCESS
    if distributed and shard.world_size == 1:
        raise ValueError(
            "distributed=True needs an initialised torch.distributed process group (start with "
            "torchrun, or call torch.distributed.init_process_group first)."
        )
    return shard


def _run_arguments(
    built: Sequence[Analysis],
    adapter: Adapter,
    dataset: Dataset | StreamedData,
    settings: RunSettings,
    shard: Shard,
) -> dict[str, Any]:
    """What must match for a checkpoint to resume. The data are checked by content instead: a
    digest of the rows already folded in (see RowDigest), whatever object delivers them."""
    arguments = {
        "analyses": {a.name: a.config.to_dict() for a in built},
        "model": adapter.describe(),
        "interventions": [site for site, _ in adapter.active_edits],
        "linearizations": active_linearizations(adapter),
        **settings.recorded(),
        "world_size": shard.world_size,
    }
    if shard.world_size > 1:  # which batches a rank ran depends on how the data were dealt
        arguments["sharding"] = "blocks" if isinstance(dataset, Dataset) else "round-robin"
    return arguments


@dataclass(frozen=True)
class _PassRecord:
    """The pass as every rank ran it, gathered on rank 0."""

    summary: FeedSummary
    num_examples: int
    num_tokens: int
    seconds: float
    checkpoint: Checkpoint | None


def _provenance(
    adapter: Adapter,
    dataset: Dataset | StreamedData,
    settings: RunSettings,
    shard: Shard,
    built: Sequence[Analysis],
    run_arguments: dict[str, Any],
    record: _PassRecord,
) -> dict[str, Any]:
    """What every result of the pass records about how it was made."""
    provenance = {
        **adapter.describe(),
        "sites": record.summary.sites,
        "seed": settings.seed,
        "num_examples": record.num_examples,
        "num_tokens": record.num_tokens,
        "data_source": dataset.describe_source()
        if isinstance(dataset, Dataset)
        else dataset.describe()["source"],
        "batch_size": settings.batch_size,
        "padding_side": settings.padding_side,
        "max_length": settings.max_length,
        "device": str(adapter.device),
        "world_size": shard.world_size,
        "fused_with": [a.name for a in built],
        # A result computed under an intervention must say so: the sites edited, in order.
        "interventions": run_arguments["interventions"],
        # MLP activations linearised during the run (adapter.linearize): layers and mode.
        "linearizations": run_arguments["linearizations"],
        # Whether code shipped with the model's files ran when it was loaded (gl.load).
        "trust_remote_code": bool(getattr(adapter, "trust_remote_code", False)),
        "versions": library_versions(),
        "forward_seconds": round(record.seconds, 4),
    }
    if record.checkpoint is not None:
        provenance["checkpoint"] = str(record.checkpoint.directory)
        # Rows (this rank's) already in the checkpoint when the run started: 0 when fresh.
        provenance["resumed_rows"] = record.summary.resumed_rows
    return provenance


def _finalize(
    built: Sequence[Analysis],
    adapter: Adapter,
    summary: FeedSummary,
    provenance: dict[str, Any],
    shown: bool | None,
) -> dict[str, Result]:
    """Each analysis's result, with its config, the shared provenance and its own cost."""
    results = {}
    for analysis in built:
        finalize_start = time.perf_counter()
        with showing_progress(shown), phase(f"{analysis.name}: computing its results"):
            result = analysis.finalize()
        finalize_seconds = time.perf_counter() - finalize_start
        result.config = analysis.config.to_dict()
        result.provenance = {
            **provenance,
            "analysis_sites": [adapter.resolve_site(s) for s in analysis.sites(adapter)],
            "finalize_seconds": round(finalize_seconds, 4),
            **analysis_cost(summary, analysis.name, finalize_seconds, len(built)),
        }
        results[analysis.name] = result
    return results

"""The analysis contract, executable, one named check per property.

As scikit-learn's ``check_estimator`` does for estimators, this runs an analysis the ways the
engine will and checks what every analysis must give. Each property is a named :class:`Check`
(:data:`CHECKS`, in this order):

- ``merge``: the halves of the data, run apart and merged, give the one pass's result;
- ``merge-three-parts``: three parts merged as ``(a+b)+c`` and as ``a+(b+c)`` give it too;
- ``merge-empty``: merging a fresh instance (set up, never updated), either way round, changes
  nothing;
- ``merge-leaves-other``: ``a.merge(b)`` leaves ``b``'s ``state_dict`` as it was;
- ``merge-checks-config``: ``merge`` refuses (``ValueError``) an instance of another config;
- ``finalize-twice``: ``finalize`` leaves the state as it was and gives one result twice;
- ``state``: ``state_dict`` survives a checkpoint's round trip (``torch.save`` bytes) and a run
  resumed from it gives the one pass's result;
- ``no-batch-tensor-kept``: no activation or input tensor of a batch outlives the batch because
  the analysis holds it (it must reduce what it needs and let the batch go);
- ``no-host-read-per-batch``: the analysis's own ``update`` reads no tensor back to the host
  (``.item()``, ``.cpu()``, ``bool(t)``, …): a GPU would wait for its queue at each;
- ``nan-at-padding-ignored``: NaN written at every padded position of every captured activation
  changes no number;
- ``fault-leaves-model-clean``: an exception inside ``update`` leaves no hook, every parameter
  and buffer bitwise unchanged and every module's train/eval mode as it was;
- ``resume``: a run whose data source fails after some batches, resumed from its checkpoint
  (``gl.run(checkpoint=…)``), gives the one pass's result;
- ``two-processes``: a 2-process gloo run (CPU) gives the one-process result;
- ``deterministic``: two runs give the same result;
- ``json``: the result survives ``to_json`` / ``from_json`` unchanged;
- ``plot-from-json``: the analysis draws a figure (a matplotlib figure with axes) from the JSON
  copy, reading only what survives;
- ``cross-backend``: another backend's adapter of the same model gives the same result;
- ``reading-through-metrics``: the analysis's reading (if it has one) writes numbers only
  through its metrics and declared derived quantities (its module imports none of the bare
  number formatters and writes no number with an f-string format), and its sentences on the
  example's result pass the report's page checker (no share over 100 %, no cosine outside
  [−1, 1], no "undefined", no identifier in prose, …).

A check that cannot run says why (:class:`CheckSkipped`: e.g. no second backend given, or two
processes where ``fork`` does not exist). Three ways in:

- ``check_analysis(analysis, adapter, data)`` runs every check and raises
  :class:`AnalysisContractError` listing every one that failed (a check that raises anything
  is that check's failure; the others still run); it returns the names of the checks passed
  (skipped ones are left out);
- ``analysis_checks(...)`` yields ``(check, subject)`` pairs to run one by one;
- ``parametrize_with_checks(analyses, make_adapter)`` makes one pytest test per analysis and
  check (ids ``<analysis>-<check>``), running each analysis on its ``example``; a skip carries
  its reason.

Give the checks a small data set (a few batches): together they make about twenty passes.
One comparator says whether two results are the same: :func:`first_difference` (and
:func:`assert_same_results`, which raises with it).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import gc
import json
import math
import os
import socket
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.multiprocessing.reductions import StorageWeakRef

from geomlens.analyses.base import Analysis, Batch
from geomlens.analyses.plotting import FigureNotDrawn, has_plot, plot_from_json
from geomlens.data.dataset import Dataset
from geomlens.engine import prepare_data, run, stream
from geomlens.engine.distributed import from_bytes, to_bytes
from geomlens.models.adapter import Adapter, count_torch_hooks
from geomlens.results import Result

__all__ = [
    "CHECKS", "AnalysisContractError", "Check", "CheckSkipped", "Subject", "analysis_checks",
    "assert_same_results", "check_analysis", "example_subject", "first_difference",
    "parametrize_with_checks",
]  # fmt: skip

#: Relative tolerance of "the same result" for merged and resumed runs (sums in another order).
MERGE_TOLERANCE = 1e-6
#: Relative tolerance of "the same result" for two identical runs.
DETERMINISM_TOLERANCE = 1e-9
#: Relative tolerance of "the same result" on two backends (the same weights, other kernels).
BACKEND_TOLERANCE = 1e-4
#: Every way a tensor's values come back to the host (a GPU waits for its queue at each).
HOST_READS = ("cpu", "numpy", "item", "tolist", "__float__", "__int__", "__bool__", "__index__",
              "__array__")  # fmt: skip


class AnalysisContractError(AssertionError):
    """An analysis broke the contract; the message has one line per failed check. From
    :func:`check_analysis`, ``failed`` and ``passed`` name the checks failed and passed."""

    def __init__(
        self, message: str, *, failed: Iterable[str] = (), passed: Iterable[str] = ()
    ) -> None:
        super().__init__(message)
        self.failed = list(failed)
        self.passed = list(passed)


class CheckSkipped(Exception):
    """A check that cannot run here; the message is the reason."""


@dataclass
class Subject:
    """What the checks run: an analysis (fresh instances from :meth:`make`), an adapter, sized
    data, the batch size and seed, and optionally adapters of the same model on other backends
    (``{backend: adapter}``) for ``cross-backend``. The one pass's result is computed once."""

    make: Callable[[], Analysis]
    adapter: Adapter
    dataset: Dataset
    batch_size: int
    seed: int = 0
    other_backends: Mapping[str, Adapter] = field(default_factory=dict)
    #: The rows as given (a list), for the checks that stream them again (``resume``).
    source: list[Any] | None = None

    @property
    def cls(self) -> type[Analysis]:
        return type(self.make())

    @property
    def settings(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "seed": self.seed, "progress": False}

    @property
    def rows(self) -> int:
        return len(self.dataset)

    def halves(self) -> tuple[np.ndarray, np.ndarray]:
        """Two halves that split between batches (each half forms the one pass's batches)."""
        first, second = self.parts(2)
        return first, second

    def parts(self, count: int) -> list[np.ndarray]:
        """``count`` consecutive parts of the rows that split between batches (each part forms
        the one pass's batches); :class:`CheckSkipped` when the data makes too few batches."""
        batches = self.rows // self.batch_size
        ends = [max(i, (i * batches) // count) * self.batch_size for i in range(1, count)]
        if ends and ends[-1] >= self.rows:
            raise CheckSkipped(f"the data makes fewer than {count} batches to split it into")
        bounds = [0, *ends, self.rows]
        return [np.arange(start, end) for start, end in zip(bounds, bounds[1:])]

    def run(self, adapter: Adapter | None = None, data: Any = None, **more: Any) -> Result:
        """One ``gl.run`` of a fresh instance (the global generators seeded as gl.run does)."""
        torch.manual_seed(self.seed)
        result = run(self.make(), adapter or self.adapter, self.dataset if data is None else data,
                     **{**self.settings, **more})  # fmt: skip
        assert isinstance(result, Result)
        return result

    def feed(self, instance: Analysis, selected: np.ndarray | None = None) -> Analysis:
        torch.manual_seed(self.seed)  # as gl.run does before its pass
        stream([instance], self.adapter, self.dataset, rows=selected, **self.settings)
        return instance

    @cached_property
    def whole(self) -> Result:
        """The one pass, through ``gl.run`` (config and provenance as users get them)."""
        return self.run()

    def same(self, check: str, what: str, got: Result, tolerance: float,
             expected: Result | None = None) -> None:  # fmt: skip
        problem = first_difference(got, self.whole if expected is None else expected, tolerance)
        if problem is not None:
            raise AnalysisContractError(f"{check}: {what} differs from one pass: {problem}.")


@dataclass(frozen=True)
class Check:
    """One property of the contract: its name, what it says, and the function checking it (it
    raises :class:`AnalysisContractError` when the property fails, :class:`CheckSkipped` when
    it cannot run)."""

    name: str
    description: str
    function: Callable[[Subject], None]

    def __call__(self, subject: Subject) -> None:
        self.function(subject)

    def __repr__(self) -> str:
        return f"Check({self.name!r})"


def _check_merge(subject: Subject) -> None:
    first, second = subject.halves()
    merged = subject.feed(subject.make(), first)
    merged.merge(subject.feed(subject.make(), second))
    subject.same("merge", "two halves merged", merged.finalize(), MERGE_TOLERANCE)


def _check_state(subject: Subject) -> None:
    first, second = subject.halves()
    saved = subject.feed(subject.make(), first)
    resumed = subject.make()
    assert saved.context is not None  # the pass set it up
    resumed.setup(saved.context)
    resumed.load_state_dict(from_bytes(to_bytes(saved.state_dict()), subject.adapter.device))
    subject.feed(resumed, second)
    subject.same("state", "a run resumed from state_dict", resumed.finalize(), MERGE_TOLERANCE)


def _state_difference(got: Any, expected: Any, where: str = "state") -> str | None:
    """Where two states (``state_dict`` values, compared deep, tensors and arrays by value, NaN
    equal to NaN) differ, or None when they are the same."""
    if isinstance(expected, torch.Tensor) or isinstance(got, torch.Tensor):
        same = (isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor)
                and got.dtype == expected.dtype and got.shape == expected.shape
                and bool(torch.eq(got.cpu(), expected.cpu()).logical_or(
                    got.cpu().isnan() & expected.cpu().isnan()).all()))  # fmt: skip
        return None if same else f"{where} (a tensor)"
    if isinstance(expected, np.ndarray) or isinstance(got, np.ndarray):
        numeric = isinstance(got, np.ndarray) and got.dtype.kind in "fc"
        same = np.array_equal(got, expected, equal_nan=numeric)
        return None if same else f"{where} (an array)"
    if type(got) is not type(expected):
        return f"{where} ({type(expected).__name__} became {type(got).__name__})"
    if isinstance(expected, Mapping):
        if set(got) != set(expected):
            return f"{where} (keys {sorted(map(str, set(got) ^ set(expected)))})"
        found = (_state_difference(got[k], expected[k], f"{where}[{k!r}]") for k in expected)
        return next((problem for problem in found if problem), None)
    if isinstance(expected, (list, tuple)):
        if len(got) != len(expected):
            return f"{where} (length {len(expected)} became {len(got)})"
        found = (_state_difference(a, b, f"{where}[{i}]") for i, (a, b) in
                 enumerate(zip(got, expected)))  # fmt: skip
        return next((problem for problem in found if problem), None)
    if hasattr(expected, "__dict__") and not isinstance(expected, type):
        return _state_difference(vars(got), vars(expected), f"{where}.{type(expected).__name__}")
    if isinstance(expected, float) and math.isnan(expected):
        return None if math.isnan(got) else f"{where} (NaN became {got!r})"
    return None if got == expected else f"{where} ({expected!r} became {got!r})"


def _state_copy(instance: Analysis) -> Any:
    return copy.deepcopy(instance.state_dict())


def _check_finalize_twice(subject: Subject) -> None:
    instance = subject.feed(subject.make())
    before = _state_copy(instance)
    first = instance.finalize()
    problems = []
    changed = _state_difference(instance.state_dict(), before)
    if changed:
        problems.append(f"finalize() changed the state at {changed}")
    try:
        second = instance.finalize()
    except Exception as error:
        problems.append(f"a second finalize() raised {type(error).__name__}: {error}")
    else:
        differs = first_difference(second, first, DETERMINISM_TOLERANCE)
        if differs:
            problems.append(f"a second finalize() gives another result: {differs}")
    if problems:
        raise AnalysisContractError(
            "finalize-twice: " + "; ".join(problems) + " (finalize must read the state, never "
            "change it)."
        )


def _check_merge_leaves_other(subject: Subject) -> None:
    first, second = subject.halves()
    merged = subject.feed(subject.make(), first)
    other = subject.feed(subject.make(), second)
    before = _state_copy(other)
    merged.merge(other)
    changed = _state_difference(other.state_dict(), before)
    if changed:
        raise AnalysisContractError(
            f"merge-leaves-other: merge(other) changed the other instance's state at {changed}; "
            "merge must only read other."
        )


def _check_merge_three_parts(subject: Subject) -> None:
    for grouping in ("(a+b)+c", "a+(b+c)"):
        a, b, c = (subject.feed(subject.make(), part) for part in subject.parts(3))
        if grouping == "(a+b)+c":
            a.merge(b)
            a.merge(c)
        else:
            b.merge(c)
            a.merge(b)
        subject.same("merge-three-parts", f"three parts merged as {grouping}", a.finalize(),
                     MERGE_TOLERANCE)  # fmt: skip


def _check_merge_empty(subject: Subject) -> None:
    for direction in ("full.merge(empty)", "empty.merge(full)"):
        full = subject.feed(subject.make())
        empty = subject.make()
        assert full.context is not None  # the pass set it up
        empty.setup(full.context)
        merged, other = (full, empty) if direction.startswith("full") else (empty, full)
        merged.merge(other)
        subject.same("merge-empty", f"{direction} (empty: set up, never updated)",
                     merged.finalize(), MERGE_TOLERANCE)  # fmt: skip


def _other_values(value: Any, choices: Iterable[Any] | None) -> list[Any]:
    """Other values an option might take, to try in turn."""
    if choices:
        return [choice for choice in choices if choice != value]
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value - 1]
    if isinstance(value, float):
        return [v for v in (value / 2, value * 2, 0.5) if v != value]
    return []


def _other_config(subject: Subject, context: Any) -> tuple[Analysis, str]:
    """An instance, set up, whose config differs in one option, and that option."""
    config = subject.make().config
    for option in dataclasses.fields(config):
        if not option.compare:
            continue
        for value in _other_values(getattr(config, option.name), option.metadata.get("choices")):
            with contextlib.suppress(Exception):  # a value the analysis refuses: the next one
                other = subject.cls(dataclasses.replace(config, **{option.name: value}))
                other.setup(context)
                if other.config != config:
                    return other, f"{option.name}={value!r}"
    raise CheckSkipped("no option of the config takes another value here (no other config)")


def _check_merge_checks_config(subject: Subject) -> None:
    mine = subject.feed(subject.make(), subject.halves()[0])
    other, option = _other_config(subject, mine.context)
    try:
        mine.merge(other)
    except ValueError:
        return
    except Exception as error:
        raise AnalysisContractError(
            f"merge-checks-config: merging an instance with another config ({option}) raised "
            f"{type(error).__name__}: {error}, not ValueError; call self._check_mergeable(other) "
            "first in merge()."
        ) from error
    raise AnalysisContractError(
        f"merge-checks-config: merge() took an instance with another config ({option}); call "
        "self._check_mergeable(other) first in merge()."
    )


def _watched_run(subject: Subject) -> tuple[Analysis, list[StorageWeakRef]]:
    """One ``gl.run`` of a fresh instance, with a weak reference to every tensor of every batch
    (activations and inputs) taken as the batch reaches the analysis."""
    watched = subject.make()
    storages: list[StorageWeakRef] = []
    own_update = watched.update

    def update(batch: Batch) -> None:
        inputs = batch.inputs
        tensors = [*batch.activations.values(), inputs.attention_mask]
        optional = (inputs.input_ids, inputs.position_ids, inputs.span_mask)
        tensors += [t for t in optional if t is not None]
        storages.extend(StorageWeakRef(t.untyped_storage()) for t in tensors)
        own_update(batch)

    watched.update = update  # type: ignore[method-assign]
    torch.manual_seed(subject.seed)
    run(watched, subject.adapter, subject.dataset, **subject.settings)
    del watched.update  # the instance's own method again (this frame's references end here)
    return watched, storages


def _check_no_batch_tensor_kept(subject: Subject) -> None:
    watched, storages = _watched_run(subject)
    gc.collect()
    # Alive while the analysis lives, freed once it is dropped: what the adapter keeps does not
    # count.
    alive = [ref for ref in storages if not ref.expired()]
    del watched
    gc.collect()
    kept = sum(ref.expired() for ref in alive)
    if kept:
        raise AnalysisContractError(
            f"no-batch-tensor-kept: the analysis still holds {kept} tensor(s) of a finished "
            "batch (activations or inputs); reduce what update() needs and keep that instead."
        )


def _own_code(cls: type[Analysis]) -> Callable[[str], bool]:
    """Whether a file is the analysis's own code: its module's folder (a built-in's folder, or
    a plugin's package) and the shared analysis machinery, never the engine or the model's."""
    module = sys.modules[cls.__module__]
    folders = {str(Path(module.__file__ or "").parent)}
    for base in cls.__mro__:
        found = sys.modules.get(base.__module__)
        found_file = getattr(found, "__file__", None)
        if found_file:
            folders.add(str(Path(found_file).parent))
    folders.add(str(Path(__file__).parent / "analyses"))
    return lambda filename: any(filename.startswith(folder + os.sep) for folder in folders)


def _check_no_host_read_per_batch(subject: Subject) -> None:
    cls = subject.cls
    own = _own_code(cls)
    reads: list[str] = []
    in_update = [False]
    originals = {name: getattr(torch.Tensor, name) for name in HOST_READS}

    def counted(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def read(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if in_update[0] and own(sys._getframe(1).f_code.co_filename):
                reads.append(name)
            return original(self, *args, **kwargs)

        return read

    instance = subject.make()
    own_update = instance.update

    def update(batch: Batch) -> None:
        in_update[0] = True
        try:
            own_update(batch)
        finally:
            in_update[0] = False

    instance.update = update  # type: ignore[method-assign]
    try:
        for name, original in originals.items():
            setattr(torch.Tensor, name, counted(name, original))
        torch.manual_seed(subject.seed)
        run(instance, subject.adapter, subject.dataset, **subject.settings)
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
    if reads:
        raise AnalysisContractError(
            f"no-host-read-per-batch: update() read tensors back to the host "
            f"({', '.join(sorted(set(reads)))}); keep the state on the device and read it in "
            "finalize()."
        )


def _poisoned_run(subject: Subject, batch_size: int) -> tuple[Result, int]:
    """A run in which every padded position of every captured activation is NaN, and how many
    activations were poisoned."""
    instance = subject.make()
    own_update = instance.update
    poisoned = [0]

    def update(batch: Batch) -> None:
        mask = batch.inputs.attention_mask
        padding = ~mask.bool()
        if bool(padding.any()):
            activations = {}
            for site, value in batch.activations.items():
                shaped = value.dim() >= 3 and tuple(value.shape[:2]) == tuple(mask.shape)
                if shaped and value.is_floating_point():
                    value = value.masked_fill(padding[..., None], math.nan)
                    poisoned[0] += 1
                activations[site] = value
            batch = dataclasses.replace(batch, activations=activations)
        own_update(batch)

    instance.update = update  # type: ignore[method-assign]
    torch.manual_seed(subject.seed)
    result = run(instance, subject.adapter, subject.dataset,
                 **{**subject.settings, "batch_size": batch_size})  # fmt: skip
    assert isinstance(result, Result)
    return result, poisoned[0]


def _check_nan_at_padding_ignored(subject: Subject) -> None:
    result, poisoned = _poisoned_run(subject, subject.batch_size)
    if poisoned:
        expected = subject.whole
    else:  # batches of texts of one length: one batch of every row has padding
        result, poisoned = _poisoned_run(subject, subject.rows)
        expected = subject.run(batch_size=subject.rows)
    if not poisoned:
        raise CheckSkipped("no batch of the data has a padded position (texts of one length)")
    subject.same("nan-at-padding-ignored", "a run with NaN at every padded position", result,
                 MERGE_TOLERANCE, expected)  # fmt: skip


def _modules(adapter: Adapter) -> list[torch.nn.Module]:
    found = [getattr(adapter, "model", None), getattr(adapter, "user_model", None)]
    return [m for m in dict.fromkeys(found) if isinstance(m, torch.nn.Module)]


def _snapshot(adapter: Adapter) -> dict[str, Any]:
    modules = _modules(adapter)
    return {
        "state": {(i, k): v.detach().clone() for i, m in enumerate(modules)
                  for k, v in m.state_dict().items()},
        "modes": {(i, n): s.training for i, m in enumerate(modules) for n, s in m.named_modules()},
        "hooks": [count_torch_hooks(m) for m in modules],
        "grad": torch.is_grad_enabled(),
    }  # fmt: skip


class _Injected(RuntimeError):
    pass


def _check_fault_leaves_model_clean(subject: Subject) -> None:
    instance = subject.make()
    own_update = instance.update
    seen = [0]

    def update(batch: Batch) -> None:
        own_update(batch)  # a half-updated state too
        seen[0] += 1
        if seen[0] == 2:
            raise _Injected("injected failure in update")

    instance.update = update  # type: ignore[method-assign]
    before = _snapshot(subject.adapter)
    with contextlib.suppress(_Injected):
        run(instance, subject.adapter, subject.dataset, **subject.settings)
    after = _snapshot(subject.adapter)
    problems = []
    if subject.adapter.hook_count() != 0 or after["hooks"] != before["hooks"]:
        problems.append("hooks were left on the model")
    if after["modes"] != before["modes"]:
        problems.append("a module's train/eval mode changed")
    if after["grad"] != before["grad"]:
        problems.append("torch's grad mode changed")
    changed = [k for k, v in before["state"].items() if not torch.equal(after["state"][k], v)]
    if changed:
        problems.append(f"{len(changed)} parameter(s) or buffer(s) changed, e.g. {changed[0][1]}")
    if problems:
        raise AnalysisContractError(
            "fault-leaves-model-clean: after an exception inside update(), " + "; ".join(problems)
        )


class _SourceFailed(RuntimeError):
    pass


def _rows_then_failure(subject: Subject, at: int) -> Iterator[Any]:
    for number, row in enumerate(_plain_rows(subject)):
        if number == at:
            raise _SourceFailed(f"stopped at row {number}")
        yield row


def _plain_rows(subject: Subject) -> list[Any]:
    rows = subject.source
    if rows is None:
        raise CheckSkipped("the data is not rows that can be streamed again (give a list of rows)")
    return list(rows)


def _check_resume(subject: Subject) -> None:
    batches = subject.rows // subject.batch_size
    if batches < 2:
        raise CheckSkipped("the data makes fewer than two batches: nothing to resume")
    fail_at = (batches // 2) * subject.batch_size + 1
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = Path(folder) / "checkpoint"
        with contextlib.suppress(_SourceFailed):
            subject.run(data=_rows_then_failure(subject, fail_at), checkpoint=checkpoint,
                        checkpoint_every=1)  # fmt: skip
        resumed = subject.run(data=iter(_plain_rows(subject)), checkpoint=checkpoint,
                              checkpoint_every=1)  # fmt: skip
    subject.same("resume", "a run resumed from its checkpoint", resumed, MERGE_TOLERANCE)


#: The subject each forked rank of ``two-processes`` runs (fork copies it; nothing is pickled).
_FORKED: dict[str, Any] = {}


def _rank(rank: int, world_size: int, port: int, out: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        subject: Subject = _FORKED["subject"]
        result = subject.run()
        if rank == 0:
            result.to_json(Path(out) / "result.json")
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _check_two_processes(subject: Subject) -> None:
    import torch.multiprocessing as mp

    if "fork" not in mp.get_all_start_methods():
        raise CheckSkipped("two processes are started by fork, which this platform lacks")
    if subject.adapter.device.type != "cpu":
        raise CheckSkipped("two processes share one CPU gloo group; the adapter is not on CPU")
    with tempfile.TemporaryDirectory() as folder:
        _FORKED["subject"] = subject
        try:
            mp.start_processes(_rank, args=(2, _free_port(), folder), nprocs=2,
                               start_method="fork")  # fmt: skip
        finally:
            _FORKED.clear()
        got = Result.from_json(Path(folder) / "result.json")
    subject.same("two-processes", "a 2-process run", got, MERGE_TOLERANCE)


def _check_deterministic(subject: Subject) -> None:
    subject.same("deterministic", "a second run", subject.run(), DETERMINISM_TOLERANCE)


def _through_json(result: Result) -> Result:
    try:
        text = result.to_json()
        loaded = Result.from_json(text)
    except Exception as error:
        raise AnalysisContractError(
            f"json: the result does not survive to_json/from_json ({error})."
        ) from error
    if json.loads(loaded.to_json()) != json.loads(text):
        raise AnalysisContractError(
            "json: the result read back from JSON differs from the one written."
        )
    return loaded


def _check_json(subject: Subject) -> None:
    _through_json(subject.whole)


def _check_plot_from_json(subject: Subject) -> None:
    cls = subject.cls
    if not has_plot(cls):
        raise AnalysisContractError(
            f"plot-from-json: {cls.__name__} draws no figure; override the classmethod "
            "plot(result) to draw one from result.metrics, .tables, .config and .provenance."
        )
    loaded = _through_json(subject.whole)
    try:
        figure = plot_from_json(cls, loaded)
    except FigureNotDrawn as error:
        raise AnalysisContractError(f"plot-from-json: {error}") from error
    except Exception as error:  # any failure to draw from the JSON copy breaks the contract
        raise AnalysisContractError(
            f"plot-from-json: drawing the result read back from JSON failed "
            f"({type(error).__name__}: {error}); plot may read only result.metrics, .tables, "
            ".config, .provenance."
        ) from error
    with contextlib.suppress(Exception):
        import matplotlib.pyplot as plt

        plt.close(figure)


def _check_cross_backend(subject: Subject) -> None:
    if not subject.other_backends:
        raise CheckSkipped("no adapter of the same model on another backend was given")
    for backend, adapter in subject.other_backends.items():
        subject.same("cross-backend", f"the run on {backend}", subject.run(adapter),
                     BACKEND_TOLERANCE)  # fmt: skip


#: The bare number formatters a reading may not import: it writes numbers through metrics.
BARE_FORMATTERS = frozenset({"number", "percent", "quantity"})


def bare_numbers(source: str) -> list[str]:
    """Where a reading's module ``source`` writes a number around its metrics: an import of a
    bare formatter (:data:`BARE_FORMATTERS`) or an f-string with a format (``{x:.3f}``)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            names = {alias.name for alias in node.names} & BARE_FORMATTERS
            found += [f"line {node.lineno}: imports {name}" for name in sorted(names)]
        elif isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            found.append(f"line {node.lineno}: an f-string formats a number itself")
    return found


def _check_reading_through_metrics(subject: Subject) -> None:
    import inspect

    from geomlens.report.page_check import check_text

    reading = getattr(subject.cls, "reading", None)
    if not callable(reading):
        raise CheckSkipped("the analysis has no reading (the report lists its metrics)")
    module = inspect.getmodule(reading)
    where = getattr(module, "__name__", "its module")
    try:
        source = inspect.getsource(module) if module is not None else ""
    except (OSError, TypeError):
        source = ""
    bare = bare_numbers(source) if source else []
    if bare:
        raise AnalysisContractError(
            f"reading-through-metrics: {where} writes numbers around its metrics' guards "
            f"({'; '.join(bare)}); write each through metric_value / metric_interval, or a "
            "derived quantity with its own MetricSpec through derived_value "
            "(geomlens.analyses.words.reading_words)."
        )
    text = reading(_through_json(subject.whole))
    paragraphs = [text] if isinstance(text, str) else list(text)
    found = [str(problem) for paragraph in paragraphs for problem in check_text(paragraph)]
    if found:
        raise AnalysisContractError(
            f"reading-through-metrics: the reading of the example's result says what no reader "
            f"should meet: {'; '.join(found[:3])}"
            + (f" (and {len(found) - 3} more)" if len(found) > 3 else "")
        )


#: Every check, in the order they run.
CHECKS: tuple[Check, ...] = (
    Check("merge", "two halves merged give one pass", _check_merge),
    Check("merge-three-parts", "(a+b)+c and a+(b+c) give one pass", _check_merge_three_parts),
    Check("merge-empty", "merging a fresh instance changes nothing", _check_merge_empty),
    Check("merge-leaves-other", "merge leaves the other state as it was",
          _check_merge_leaves_other),
    Check("merge-checks-config", "merge refuses another config", _check_merge_checks_config),
    Check("finalize-twice", "finalize twice: one result, the state as it was",
          _check_finalize_twice),
    Check("state", "state_dict round-trips and resumes", _check_state),
    Check("no-batch-tensor-kept", "no batch tensor outlives its batch", _check_no_batch_tensor_kept),
    Check("no-host-read-per-batch", "update reads nothing back to the host",
          _check_no_host_read_per_batch),
    Check("nan-at-padding-ignored", "NaN at padded positions changes nothing",
          _check_nan_at_padding_ignored),
    Check("fault-leaves-model-clean", "a fault in update leaves the model as it was",
          _check_fault_leaves_model_clean),
    Check("resume", "an interrupted run resumes from its checkpoint", _check_resume),
    Check("two-processes", "two processes give one process's result", _check_two_processes),
    Check("deterministic", "two runs give one result", _check_deterministic),
    Check("json", "the result round-trips through JSON", _check_json),
    Check("plot-from-json", "a figure is drawn from the JSON copy", _check_plot_from_json),
    Check("cross-backend", "another backend gives the same result", _check_cross_backend),
    Check("reading-through-metrics", "the reading writes numbers only through metrics",
          _check_reading_through_metrics),
)  # fmt: skip


def _maker(
    analysis: Analysis | type[Analysis], options: Mapping[str, Any]
) -> Callable[[], Analysis]:
    """Fresh instances with the same config."""
    if isinstance(analysis, Analysis):
        if options:
            raise ValueError("Give options with an analysis class, not with an instance.")
        cls, config = type(analysis), analysis.config
        return lambda: cls(dataclasses.replace(config))
    if isinstance(analysis, type) and issubclass(analysis, Analysis):
        return lambda: analysis(**options)
    raise TypeError(
        f"check_analysis takes an Analysis subclass or instance; got {type(analysis).__name__}."
    )


def make_subject(
    make: Callable[[], Analysis],
    adapter: Adapter,
    data: Any,
    batch_size: int | None,
    seed: int = 0,
    other_backends: Mapping[str, Adapter] | None = None,
) -> Subject:
    """A :class:`Subject` of the instances ``make`` makes (data prepared and sized);
    ``batch_size`` defaults to a quarter of the rows, so that each half is whole batches."""
    source = list(data) if isinstance(data, (list, tuple)) else None
    dataset = prepare_data(data, adapter)
    if not isinstance(dataset, Dataset):
        raise ValueError("check_analysis needs sized data (a list, a mapping, a Dataset).")
    rows = len(dataset)
    if rows < 4:
        raise ValueError(f"check_analysis needs at least 4 rows of data; got {rows}.")
    batch_size = batch_size or -(-rows // 4)
    if max(1, (rows // batch_size) // 2) * batch_size >= rows:
        raise ValueError(
            f"batch_size={batch_size} leaves no second half of {rows} rows; use a smaller one."
        )
    return Subject(make, adapter, dataset, batch_size, seed, dict(other_backends or {}), source)


def analysis_checks(
    analysis: Analysis | type[Analysis],
    adapter: Adapter,
    data: Any,
    *,
    batch_size: int | None = None,
    seed: int = 0,
    other_backends: Mapping[str, Adapter] | None = None,
    **options: Any,
) -> Iterator[tuple[Check, Subject]]:
    """Each named check with the subject it runs on (one subject, so the one pass runs once):
    ``analysis`` is an instance, whose config is used, or a class with ``options``."""
    subject = make_subject(_maker(analysis, options), adapter, data, batch_size, seed,
                           other_backends)  # fmt: skip
    for check in CHECKS:
        yield check, subject


def check_analysis(
    analysis: Analysis | type[Analysis], adapter: Adapter, data: Any, **settings: Any
) -> list[str]:
    """Check ``analysis`` against every check of the contract on ``adapter`` and ``data``
    (``settings``: those of :func:`analysis_checks`, ``batch_size``, ``seed``,
    ``other_backends`` and the analysis's options); return the names of the checks passed (a
    skipped check is left out). Raises :class:`AnalysisContractError` naming every check that
    failed, with what it raised when a check raised something else; every check runs."""
    failures: dict[str, str] = {}
    passed: list[str] = []
    cls: type | None = None
    for check, subject in analysis_checks(analysis, adapter, data, **settings):
        cls = cls or subject.cls
        try:
            check(subject)
        except CheckSkipped:
            continue
        except AnalysisContractError as error:
            failures[check.name] = str(error)
        except Exception as error:  # any exception is this check's failure; the rest still run
            failures[check.name] = f"{check.name}: raised {type(error).__name__}: {error}"
        else:
            passed.append(check.name)
    if failures:
        name = cls.__name__ if cls is not None else "The analysis"
        lines = [f"{name} breaks the analysis contract:", *(f"- {f}" for f in failures.values())]
        lines.append(f"Passed: {', '.join(passed) or 'none'}.")
        raise AnalysisContractError("\n".join(lines), failed=failures, passed=passed)
    return passed


def example_subject(
    analysis: type[Analysis],
    adapter: Adapter,
    other_backends: Mapping[str, Adapter] | None = None,
) -> Subject:
    """The subject of ``analysis``'s own example (its ``example`` attribute), made once per
    analysis and adapters (so the checks of one analysis share its one pass)."""
    key = (analysis, id(adapter), tuple(id(a) for a in (other_backends or {}).values()))
    if key not in _EXAMPLE_SUBJECTS:
        _EXAMPLE_SUBJECTS[key] = _example_subject(analysis, adapter, other_backends)
    return _EXAMPLE_SUBJECTS[key]


#: Example subjects made so far (see :func:`example_subject`).
_EXAMPLE_SUBJECTS: dict[tuple[Any, ...], Subject] = {}


def _example_subject(
    analysis: type[Analysis],
    adapter: Adapter,
    other_backends: Mapping[str, Adapter] | None = None,
) -> Subject:
    example = analysis.example
    if example is None:
        raise CheckSkipped(f"{analysis.__name__} has no example (set its example attribute)")
    make = _maker(analysis, example.analysis_options())
    return make_subject(make, adapter, example.rows(), example.batch_size, 0, other_backends)


def parametrize_with_checks(
    analyses: Iterable[type[Analysis] | str],
    checks: Iterable[str] | None = None,
) -> Any:
    """A ``pytest.mark.parametrize`` over every (analysis, check) pair, with ids
    ``<analysis>-<check>``; the test takes ``analysis`` (the class) and ``check`` (a
    :class:`Check`). Run one with :func:`run_check`, which skips with the check's reason::

        @parametrize_with_checks([MyAnalysis])
        def test_contract(analysis, check, adapter):
            run_check(analysis, check, adapter)
    """
    import pytest

    from geomlens.analyses.registry import analysis_class

    wanted = set(checks) if checks is not None else None
    classes = [analysis_class(a) if isinstance(a, str) else a for a in analyses]
    params = [
        pytest.param(cls, check, id=f"{cls.name or cls.__name__}-{check.name}")
        for cls in classes
        for check in CHECKS
        if wanted is None or check.name in wanted
    ]
    return pytest.mark.parametrize(("analysis", "check"), params)


def run_check(
    analysis: type[Analysis],
    check: Check,
    adapter: Adapter,
    other_backends: Mapping[str, Adapter] | None = None,
) -> None:
    """Run one ``check`` on ``analysis``'s example under pytest: a skip carries its reason, and
    a failure the example declares (``Example.known_failures``) is an expected failure."""
    import pytest

    known = analysis.example.known_failures.get(check.name) if analysis.example else None
    try:
        check(example_subject(analysis, adapter, other_backends))
    except CheckSkipped as reason:
        pytest.skip(f"{check.name}: {reason}")
    except AnalysisContractError as error:
        if known is None:
            raise
        pytest.xfail(f"{check.name}: {known} ({error})")


def assert_same_results(got: Any, expected: Any, tolerance: float = MERGE_TOLERANCE) -> None:
    """Raise ``AssertionError`` naming the first difference of two results (or of two
    ``{name: Result}`` mappings); see :func:`first_difference`."""
    if isinstance(expected, Mapping):
        assert set(got) == set(expected), (sorted(got), sorted(expected))
        for name in expected:
            assert_same_results(got[name], expected[name], tolerance)
        return
    problem = first_difference(got, expected, tolerance)
    assert problem is None, problem


def first_difference(
    got: Result, expected: Result, tolerance: float = MERGE_TOLERANCE
) -> str | None:
    """Where two results differ (metrics within ``tolerance`` relative to their size, tables
    cell by cell), or None when they agree. Compared as JSON reads them (NaN as null)."""
    a, b = json.loads(got.to_json()), json.loads(expected.to_json())
    if set(a["metrics"]) != set(b["metrics"]):
        missing = sorted(set(b["metrics"]) ^ set(a["metrics"]))
        return f"metrics {missing} are in one result only"
    for name, value in b["metrics"].items():
        if not _close(a["metrics"][name], value, tolerance):
            return f"metric {name} is {a['metrics'][name]!r}, not {value!r}"
    if set(a["tables"]) != set(b["tables"]):
        return f"tables {sorted(set(a['tables']) ^ set(b['tables']))} are in one result only"
    for table, rows in b["tables"].items():
        if len(a["tables"][table]) != len(rows):
            return f"table {table} has {len(a['tables'][table])} rows, not {len(rows)}"
        for number, (got_row, row) in enumerate(zip(a["tables"][table], rows)):
            for key in set(row) | set(got_row):
                if not _close(got_row.get(key), row.get(key), tolerance):
                    return (
                        f"table {table} row {number} {key} is {got_row.get(key)!r}, not "
                        f"{row.get(key)!r}"
                    )
    return None


def _close(a: Any, b: Any, tolerance: float) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if a == b:
            return True
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return abs(a - b) <= tolerance * max(1.0, abs(a), abs(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, tolerance) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(_close(a[k], b[k], tolerance) for k in a)
    return a == b

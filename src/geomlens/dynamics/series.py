"""A series of checkpoints of one model: where each one's weights are, at which step.

``gl.series(source)`` reads a folder of ``checkpoint-N`` / ``step-N`` / ``epoch-N`` /
``global_step-N`` sub-folders (the step from ``trainer_state.json`` when there is one), a folder
written by a geomlens experiment (its ``run.json`` declares the setup the exact theory needs), a
folder of ``seed-K`` sub-folders each holding such a series, an explicit list of folders or of
torch modules in memory, or a hub repository with revisions (``gl.load(..., revision=)``).
Every check that needs no forward pass is made here, before a sweep writes anything: a folder
without recognisable checkpoints, a checkpoint whose weights cannot be read, architectures or
tokenizers that change along the series.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, overload

import numpy as np
import torch

from geomlens.experiments.checkpoint_steps import thin_indices
from geomlens.experiments.run_folder import RUN_FILE

#: Sub-folder names that hold one checkpoint each, with the number they carry.
CHECKPOINT_FOLDER = re.compile(r"^(checkpoint|step|epoch|global_step)[-_]?(\d+)$")
SEED_FOLDER = re.compile(r"^seed[-_]?(\d+)$")
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "model*.bin")
TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "tokenizer.model",
    "spiece.model",
)
#: config.json fields that must agree along a series (one architecture at several steps).
ARCHITECTURE_FIELDS = (
    "model_type",
    "architectures",
    "hidden_size",
    "n_embd",
    "d_model",
    "num_hidden_layers",
    "n_layer",
    "num_attention_heads",
    "n_head",
    "intermediate_size",
    "vocab_size",
)


def pythia_steps() -> list[int]:
    """The 154 revisions of every Pythia model (``step0`` … ``step143000``)."""
    return [0, *(2**i for i in range(10)), *range(1000, 143_001, 1000)]


def stanford_crfm_steps() -> list[int]:
    """The 609 revisions of the Stanford CRFM GPT-2 runs (``checkpoint-0`` … ``-400000``)."""
    return [
        *range(0, 100, 10),
        *range(100, 2000, 50),
        *range(2000, 20_000, 100),
        *range(20_000, 400_001, 1000),
    ]


#: Named revision tables: name → (steps, revision label of a step).
REVISION_TABLES: dict[str, tuple[Any, str]] = {
    "pythia": (pythia_steps, "step{step}"),
    "stanford-crfm": (stanford_crfm_steps, "checkpoint-{step}"),
}


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a series.

    ``kind`` says where the weights are: ``folder`` (a Hugging Face folder), ``experiment``
    (a geomlens experiment's checkpoint folder), ``hub`` (``source`` at ``revision``) or
    ``module`` (a torch module in memory). ``time`` is the training time the series records
    (Σ learning rate for the experiments), ``seed`` the run's seed when the series has several.
    ``training`` is the training record at the checkpoint where the run kept one (a Trainer's
    ``trainer_state.json``, an experiment's ``run.json``): ``train_loss``, ``learning_rate``,
    ``tokens_seen`` and ``lr_sum`` (Σ learning rate over the steps so far), each when known.
    """

    label: str
    step: int
    kind: str
    source: str | None = None
    revision: str | None = None
    time: float | None = None
    seed: int | None = None
    module: Any = field(default=None, compare=False, repr=False)
    training: Mapping[str, float] | None = field(default=None, compare=False, repr=False)

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {"label": self.label, "step": self.step, "kind": self.kind}
        for name in ("source", "revision", "time", "seed"):
            value = getattr(self, name)
            if value is not None:
                info[name] = value
        if self.training:
            info["training"] = dict(self.training)
        return info


class Series(Sequence[Checkpoint]):
    """Checkpoints ordered by (seed, step); :meth:`load` attaches one through ``gl.load`` or
    ``gl.attach``. Thin it with :meth:`select` (``"log:40"``, ``"every:K"``)."""

    def __init__(
        self,
        checkpoints: Sequence[Checkpoint],
        *,
        source: str,
        backend: str | None = None,
        experiments: Mapping[int | None, dict[str, Any]] | None = None,
        load_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not checkpoints:
            raise ValueError(f"The series {source} has no checkpoints.")
        labels = [c.label for c in checkpoints]
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        if repeated:
            raise ValueError(
                f"The series {source} repeats checkpoint labels: {', '.join(repeated)}."
            )
        _check_distinct_steps(checkpoints, source)
        self.checkpoints = tuple(
            sorted(checkpoints, key=lambda c: (c.seed if c.seed is not None else -1, c.step))
        )
        self.source = source
        self.backend = backend
        self.experiments = dict(experiments or {})
        self.load_options = dict(load_options or {})
        self._tokenizer_seen: tuple[str, str] | None = None
        self._contents: dict[str, str | None] = {}

    # -- sequence -----------------------------------------------------------------------------
    @overload
    def __getitem__(self, index: int) -> Checkpoint: ...

    @overload
    def __getitem__(self, index: slice) -> Series: ...

    def __getitem__(self, index: int | slice) -> Checkpoint | Series:
        if isinstance(index, slice):
            return self._with(self.checkpoints[index])
        return self.checkpoints[index]

    def __len__(self) -> int:
        return len(self.checkpoints)

    def __iter__(self) -> Iterator[Checkpoint]:
        return iter(self.checkpoints)

    def __repr__(self) -> str:
        steps = [c.step for c in self.checkpoints]
        return (
            f"Series({self.source!r}, {len(self)} checkpoints, steps {min(steps)}–{max(steps)}"
            + (f", seeds {self.seeds}" if len(self.seeds) > 1 else "")
            + ")"
        )

    def _with(self, checkpoints: Sequence[Checkpoint]) -> Series:
        made = Series(
            checkpoints,
            source=self.source,
            backend=self.backend,
            experiments=self.experiments,
            load_options=self.load_options,
        )
        made._contents = self._contents  # the same weights under the same labels
        return made

    # -- thinning -----------------------------------------------------------------------------
    @property
    def seeds(self) -> list[int | None]:
        return list(dict.fromkeys(c.seed for c in self.checkpoints))

    def select(self, spec: str) -> Series:
        """Keep N checkpoints of each seed's run spread evenly in log(1 + step) (``"log:N"``:
        all of them when a run has N or fewer) or every K-th (``"every:K"``); the first and last
        are always kept (see :func:`geomlens.experiments.checkpoint_steps.thin_indices`)."""
        kept: list[Checkpoint] = []
        for seed in self.seeds:
            run = [c for c in self.checkpoints if c.seed == seed]
            kept.extend(run[i] for i in thin_indices([c.step for c in run], spec))
        return self._with(kept)

    def every(self, k: int) -> Series:
        """Every ``k``-th checkpoint (the first and last always)."""
        return self.select(f"every:{k}")

    # -- what a sweep needs -------------------------------------------------------------------
    def experiment(self, checkpoint: Checkpoint | None = None) -> dict[str, Any] | None:
        """The run.json record of the experiment behind ``checkpoint`` (the first seed's when
        None), or None for a series no geomlens experiment wrote."""
        seed = checkpoint.seed if checkpoint is not None else self.checkpoints[0].seed
        return self.experiments.get(seed)

    def default_data(self) -> dict[str, Any] | None:
        """The data an experiment declares in its run.json (None otherwise); several seeds must
        declare the same data (a sweep measures every checkpoint on one data set)."""
        record = self.experiment()
        if record is None or "data" not in record:
            return None
        declared = {json.dumps(r.get("data"), sort_keys=True) for r in self.experiments.values()}
        if len(declared) > 1:
            raise ValueError(
                f"The runs of {self.source} declare different data in their run.json; sweep each "
                "run on its own, or give data= for all of them."
            )
        data = dict(record["data"])
        data["inputs"] = {
            name: np.asarray(values, dtype=np.float64) for name, values in data["inputs"].items()
        }
        return data

    def default_options(self) -> dict[str, Any]:
        """Analysis options an experiment declares (e.g. the toy network's similarity)."""
        record = self.experiment()
        return dict(record.get("options", {})) if record is not None else {}

    def default_sites(self) -> list[str] | None:
        record = self.experiment()
        return None if record is None else record.get("sites")

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {"source": self.source, "backend": self.backend}
        if self.step_unit != "step":
            info["step_unit"] = self.step_unit
        info["checkpoints"] = [c.describe() for c in self.checkpoints]
        return info

    @property
    def step_unit(self) -> str:
        """What a checkpoint's ``step`` counts: ``"epoch"`` when every run of the series says
        so (the toy network's run.json, ``epoch-N`` folders), else ``"step"``."""
        declared = {r.get("time") for r in self.experiments.values()}
        if self.experiments and declared == {"epoch"} and len(self.experiments) == len(self.seeds):
            return "epoch"
        if all(c.label.rpartition("/")[2].startswith("epoch") for c in self.checkpoints):
            return "epoch"
        return "step"

    def with_lr_sum(self) -> Series:
        """The series with ``time`` = Σ learning rate where a Trainer's record gives it (for
        ``time='lr-sum'``); a checkpoint that records its time already keeps it."""
        return self._with(
            [
                replace(c, time=c.training["lr_sum"])
                if c.time is None and c.training and "lr_sum" in c.training
                else c
                for c in self.checkpoints
            ]
        )

    def weights_digest(self, checkpoint: Checkpoint) -> str:
        """What identifies a checkpoint's weights: the hub commit of a revision (resolved
        offline from the cache when possible), else a SHA-256 of the weight files' bytes or of
        the module's tensors."""
        if checkpoint.kind == "module":
            return module_digest(checkpoint.module)
        if checkpoint.kind == "hub":
            assert checkpoint.source is not None
            return "commit:" + resolve_revision(checkpoint.source, checkpoint.revision)
        content = self.content_digest(checkpoint)
        assert content is not None
        return content

    def content_digest(self, checkpoint: Checkpoint) -> str | None:
        """A digest of the weights' content (computed once per checkpoint): the SHA-256 of the
        weight files or of the module's tensors; for a hub revision, of the SHA-256 of its
        weight files as the hub lists them (nothing is downloaded), None when the hub cannot
        be reached."""
        if checkpoint.label not in self._contents:
            if checkpoint.kind == "module":
                found: str | None = module_digest(checkpoint.module)
            elif checkpoint.kind == "hub":
                assert checkpoint.source is not None
                found = hub_files_digest(checkpoint.source, checkpoint.revision)
            else:
                assert checkpoint.source is not None
                found = "sha256:" + files_digest(weight_files(Path(checkpoint.source)))
            self._contents[checkpoint.label] = found
        return self._contents[checkpoint.label]

    def duplicates(self) -> dict[str, str]:
        """Checkpoints whose weights equal an earlier one's: label → the first label (in
        (seed, step) order) with the same :meth:`content_digest`. The hub serves such
        duplicates (branches that hold the final weights); a sweep flags them in the table
        (``duplicate_of``) and does not count them as independent points."""
        first: dict[str, str] = {}
        found: dict[str, str] = {}
        for checkpoint in self.checkpoints:
            digest = self.content_digest(checkpoint)
            if digest is None:
                continue
            if digest in first:
                found[checkpoint.label] = first[digest]
            else:
                first[digest] = checkpoint.label
        return found

    def load(self, checkpoint: Checkpoint) -> Any:
        """An Adapter on ``checkpoint``'s weights (``gl.load`` for a folder or a revision,
        ``gl.attach`` for a module). A tokenizer that differs from the one of the checkpoints
        loaded before is refused, naming both."""
        from geomlens.models.attach import attach, load

        options = dict(self.load_options)
        if checkpoint.kind == "module":
            adapter = attach(
                checkpoint.module,
                backend=self.backend,
                model_id=f"{self.source}@{checkpoint.label}",
            )
        elif checkpoint.kind == "experiment":
            from geomlens.experiments.registry import load_experiment_network

            record = self.experiment(checkpoint)
            assert record is not None and checkpoint.source is not None
            module = load_experiment_network(record, checkpoint.source)
            adapter = attach(module, backend=self.backend, model_id=checkpoint.source)
        else:
            assert checkpoint.source is not None
            try:
                with _quiet_loading():
                    adapter = load(
                        checkpoint.source,
                        backend=self.backend or "nnsight",
                        revision=checkpoint.revision,
                        **options,
                    )
            except (OSError, ValueError, RuntimeError) as error:
                first = (
                    str(error).strip().splitlines()[0]
                    if str(error).strip()
                    else type(error).__name__
                )
                raise ValueError(
                    f"Checkpoint {checkpoint.label} ({checkpoint.source}) does not load: {first}"
                ) from error
        self._check_tokenizer(checkpoint, getattr(adapter, "tokenizer", None))
        return adapter

    def _check_tokenizer(self, checkpoint: Checkpoint, tokenizer: Any) -> None:
        if tokenizer is None:
            return
        digest = tokenizer_digest(tokenizer)
        if self._tokenizer_seen is None:
            self._tokenizer_seen = (checkpoint.label, digest)
        elif self._tokenizer_seen[1] != digest:
            raise ValueError(
                f"The tokenizer changes along the series: checkpoint {checkpoint.label} has "
                f"another vocabulary than {self._tokenizer_seen[0]}; a sweep compares one model "
                "at several steps, with one tokenizer."
            )


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """No "Loading weights" bar per checkpoint: the sweep's own bar counts checkpoints."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


# --- building a series ------------------------------------------------------------------------


def series(
    source: Any,
    *,
    steps: Sequence[int] | None = None,
    revisions: Sequence[str] | str | None = None,
    select: str | None = None,
    every: int | None = None,
    backend: str | None = None,
    seeds: Sequence[int] | None = None,
    **load_options: Any,
) -> Series:
    """The checkpoints of one model, ordered by step (and seed).

    ``source``:

    - a folder of ``checkpoint-N`` / ``step-N`` / ``epoch-N`` / ``global_step-N`` sub-folders
      (Hugging Face folders; a ``trainer_state.json`` inside gives the step), a folder a
      geomlens experiment wrote (``run.json``), or a folder of ``seed-K`` sub-folders of either;
    - a list of folders (``steps=`` gives their steps; otherwise each name's number, or the
      position) or a ``{step: folder}`` mapping;
    - a list of torch modules in memory, or a ``{step: module}`` mapping;
    - a list of series (several seeds of one schedule; ``seeds=`` numbers them);
    - a hub repository name with ``revisions=``: a list of revision names or a table name,
      ``"pythia"`` (``step0`` … ``step143000``) or ``"stanford-crfm"``; each is loaded with
      ``gl.load(name, revision=...)`` and its resolved commit identifies the weights.

    ``select="log:40"`` / ``every=K`` thin the series; ``backend`` and any ``gl.load`` option
    (``device``, ``dtype``, ``device_map``) apply to every checkpoint.
    """
    if select is not None and every is not None:
        raise ValueError("Give select= or every=, not both.")
    if isinstance(source, Sequence) and source and all(isinstance(s, Series) for s in source):
        built = seeds_of(list(source), seeds)
    else:
        built = _build(source, steps, revisions, backend, load_options)
    if select is not None:
        built = built.select(select)
    if every is not None:
        built = built.every(every)
    return built


def _build(
    source: Any,
    steps: Sequence[int] | None,
    revisions: Sequence[str] | str | None,
    backend: str | None,
    load_options: dict[str, Any],
) -> Series:
    if isinstance(source, Series):
        return source
    if isinstance(source, torch.nn.Module):
        source = [source]
    if isinstance(source, Mapping):
        if steps is not None:
            raise ValueError("A {step: checkpoint} mapping carries its steps; drop steps=.")
        steps = [_as_step(step) for step in source]
        source = list(source.values())
    if isinstance(source, (str, os.PathLike)):
        path = Path(source).expanduser()
        if revisions is not None:
            if path.exists():
                raise ValueError(
                    f"revisions= names hub revisions, but {source} is a local path; give the "
                    "hub repository name, or the folder alone."
                )
            return _hub_series(str(source), revisions, steps, backend, load_options)
        if not path.exists():
            raise ValueError(
                f"No series at {source}: no such folder (a hub repository needs revisions=, "
                "e.g. revisions='pythia')."
            )
        if steps is not None:
            raise ValueError("steps= goes with a list of folders or modules, not with a folder.")
        return _folder_series(path, backend, load_options)
    if isinstance(source, Sequence) and not isinstance(source, (str, bytes)):
        items = list(source)
        if not items:
            raise ValueError("The series is an empty list: give folders or torch modules.")
        if steps is not None and len(steps) != len(items):
            raise ValueError(f"steps= has {len(steps)} steps for {len(items)} checkpoints.")
        if all(isinstance(item, torch.nn.Module) for item in items):
            numbers = list(steps) if steps is not None else list(range(len(items)))
            checkpoints = [
                Checkpoint(f"step-{n}", _as_step(n), "module", module=m)
                for n, m in zip(numbers, items)
            ]
            return Series(checkpoints, source="modules", backend=backend, load_options=load_options)
        if all(isinstance(item, (str, os.PathLike)) for item in items):
            return _list_series([Path(i).expanduser() for i in items], steps, backend, load_options)
        raise TypeError(
            "A series list holds folders (str or Path) or torch modules, all of one kind; got "
            f"{sorted({type(i).__name__ for i in items})}."
        )
    raise TypeError(
        f"Cannot make a series from a {type(source).__name__}: give a folder, a list of folders "
        "or modules, a {step: folder} mapping, or a hub repository with revisions=."
    )


def seeds_of(runs: Sequence[Series], seeds: Sequence[int] | None = None) -> Series:
    """One series of several runs of the same schedule (PolyPythias' seeds, an experiment's
    ``--seeds``): run ``k`` becomes seed ``seeds[k]`` (default ``k``), its labels
    ``seed-K/<label>``. A sweep then adds an interval across seeds at each step."""
    numbers = list(seeds) if seeds is not None else list(range(len(runs)))
    if len(numbers) != len(runs) or len(set(numbers)) != len(numbers):
        raise ValueError(f"Give one distinct seed per run; got {numbers} for {len(runs)} runs.")
    checkpoints: list[Checkpoint] = []
    experiments: dict[int | None, dict[str, Any]] = {}
    for seed, run in zip(numbers, runs):
        if len(run.seeds) > 1:
            raise ValueError(f"{run.source} already holds several seeds; combine single runs.")
        checkpoints.extend(replace(c, seed=seed, label=f"seed-{seed}/{c.label}") for c in run)
        record = run.experiment()
        if record is not None:
            experiments[seed] = record
    first = runs[0]
    return Series(
        checkpoints,
        source=" + ".join(run.source for run in runs),
        backend=first.backend,
        experiments=experiments,
        load_options=first.load_options,
    )


def _as_step(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"A step is an integer >= 0; got {value!r}.")
    return int(value)


def _check_distinct_steps(checkpoints: Sequence[Checkpoint], source: str) -> None:
    """One checkpoint per step in each seed's run: two spellings of one step (checkpoint-10
    and step-10, checkpoint-010) would be measured and counted twice."""
    seen: dict[tuple[int | None, int], str] = {}
    for checkpoint in checkpoints:
        key = (checkpoint.seed, checkpoint.step)
        if key in seen:
            raise ValueError(
                f"The series {source} holds step {checkpoint.step} twice ({seen[key]} and "
                f"{checkpoint.label}); keep one checkpoint per step (move the other away)."
            )
        seen[key] = checkpoint.label


#: What a checkpoint label from run.json may be: one plain folder name inside the run.
SAFE_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=-]*$")


def _checked_label(value: Any, where: Path) -> str:
    """A label of run.json is a name, never a path: no separator, no '..', not absolute."""
    if not isinstance(value, str) or not SAFE_LABEL.match(value) or value in (".", ".."):
        raise ValueError(
            f"{where} names a checkpoint {value!r}, which is not a plain folder name inside the "
            "run (no '/', '\\', '..' or absolute path); rerun the experiment into an empty "
            "folder."
        )
    return value


def _checked_number(value: Any, what: str, where: Path, label: str, *, integer: bool) -> Any:
    """A step (an integer >= 0) or a time (a finite number >= 0) of run.json, or refused."""
    kinds = (int,) if integer else (int, float)
    if (
        isinstance(value, bool)
        or not isinstance(value, kinds)
        or not np.isfinite(value)
        or value < 0
    ):
        kind = "an integer" if integer else "a finite number"
        raise ValueError(
            f"{where}: checkpoint {label} has {what} {value!r}, not {kind} >= 0; rerun the "
            "experiment into an empty folder."
        )
    return int(value) if integer else float(value)


def _folder_series(path: Path, backend: str | None, load_options: dict[str, Any]) -> Series:
    if not path.is_dir():
        raise ValueError(f"--series {path} is a file; give the folder that holds the checkpoints.")
    children = sorted(p for p in path.iterdir() if not p.name.startswith("."))
    if not children:
        raise ValueError(f"--series {path} is empty: no checkpoints to sweep.")
    if (path / RUN_FILE).is_file():
        found, record = _experiment_checkpoints(path, seed=None)
        return Series(
            found, source=str(path), backend=backend, experiments={None: record},
            load_options=load_options,
        )  # fmt: skip
    for child in children:
        if SEED_FOLDER.match(child.name):
            _check_not_dangling(child, "Seed folder")
    seeds = {
        int(m.group(1)): p for p in children if p.is_dir() and (m := SEED_FOLDER.match(p.name))
    }
    if seeds:
        checkpoints: list[Checkpoint] = []
        experiments: dict[int | None, dict[str, Any]] = {}
        for seed, folder in sorted(seeds.items()):
            if (folder / RUN_FILE).is_file():
                found, record = _experiment_checkpoints(folder, seed=seed)
                experiments[seed] = record
            else:
                found = [replace(c, seed=seed) for c in _hf_checkpoints(folder)]
            checkpoints.extend(replace(c, label=f"seed-{seed}/{c.label}") for c in found)
        _check_consistent(checkpoints, str(path))
        return Series(
            checkpoints, source=str(path), backend=backend, experiments=experiments,
            load_options=load_options,
        )  # fmt: skip
    checkpoints = _hf_checkpoints(path)
    _check_consistent(checkpoints, str(path))
    return Series(checkpoints, source=str(path), backend=backend, load_options=load_options)


def _experiment_checkpoints(
    folder: Path, seed: int | None
) -> tuple[list[Checkpoint], dict[str, Any]]:
    try:
        record = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
        entries = record["checkpoints"]
        record["experiment"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"{folder / RUN_FILE} is not a geomlens experiment record ({error}); rerun the "
            "experiment into an empty folder."
        ) from None
    where = folder / RUN_FILE
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError(f"{where}: 'checkpoints' is not a list of records; rerun the experiment.")
    checkpoints = []
    for entry in entries:
        label = _checked_label(entry.get("label"), where)
        step = _checked_number(entry.get("step"), "step", where, label, integer=True)
        time = entry.get("lr_sum", entry.get("time"))
        if time is not None:
            time = _checked_number(time, "Σ lr", where, label, integer=False)
        location = folder / label
        _check_weights(location, label)
        checkpoints.append(
            Checkpoint(
                label,
                step,
                "experiment",
                source=str(location),
                time=time,
                seed=seed,
                training=_experiment_training(entry, record),
            )  # fmt: skip
        )
    return checkpoints, record


def _hf_checkpoints(path: Path) -> list[Checkpoint]:
    found = []
    for child in sorted(path.iterdir()):
        match = CHECKPOINT_FOLDER.match(child.name)
        if match:
            _check_not_dangling(child, "Checkpoint")
        if child.is_dir() and match:
            found.append((child, int(match.group(2))))
    if not found:
        names = ", ".join(sorted(p.name for p in path.iterdir())[:6])
        raise ValueError(
            f"--series {path} holds no recognisable checkpoints (sub-folders named checkpoint-N, "
            f"step-N, epoch-N or global_step-N, or a run.json); it has: {names}."
        )
    checkpoints = []
    for folder, number in found:
        step = _trainer_step(folder, number)
        _check_weights(folder, folder.name)
        checkpoints.append(
            Checkpoint(
                folder.name,
                step,
                "folder",
                source=str(folder),
                training=trainer_record(folder, step),
            )  # fmt: skip
        )
    return checkpoints


def _list_series(
    folders: list[Path],
    steps: Sequence[int] | None,
    backend: str | None,
    load_options: dict[str, Any],
) -> Series:
    checkpoints = []
    for position, folder in enumerate(folders):
        if not folder.is_dir():
            raise ValueError(f"Checkpoint folder {folder} does not exist.")
        match = CHECKPOINT_FOLDER.match(folder.name)
        if steps is not None:
            step = _as_step(steps[position])
        else:
            step = _trainer_step(folder, int(match.group(2)) if match else position)
        _check_weights(folder, folder.name)
        label = folder.name if match else f"step-{step}"
        checkpoints.append(
            Checkpoint(
                label, step, "folder", source=str(folder), training=trainer_record(folder, step)
            )
        )
    _check_consistent(checkpoints, "the list of folders")
    return Series(checkpoints, source="folders", backend=backend, load_options=load_options)


def _hub_series(
    repository: str,
    revisions: Sequence[str] | str,
    steps: Sequence[int] | None,
    backend: str | None,
    load_options: dict[str, Any],
) -> Series:
    if isinstance(revisions, str):
        if revisions not in REVISION_TABLES:
            raise ValueError(
                f"Unknown revision table {revisions!r}; use {', '.join(REVISION_TABLES)} or a "
                "list of revision names."
            )
        make_steps, pattern = REVISION_TABLES[revisions]
        table_steps = make_steps()
        names = [pattern.format(step=s) for s in table_steps]
        steps = table_steps
    else:
        names = list(revisions)
        if not names:
            raise ValueError("revisions= is an empty list.")
        if steps is None:
            steps = [_number_in(name, position) for position, name in enumerate(names)]
        elif len(steps) != len(names):
            raise ValueError(f"steps= has {len(steps)} steps for {len(names)} revisions.")
    checkpoints = [
        Checkpoint(name, _as_step(step), "hub", source=repository, revision=name)
        for name, step in zip(names, steps)
    ]
    return Series(checkpoints, source=repository, backend=backend, load_options=load_options)


def _number_in(name: str, default: int) -> int:
    numbers = re.findall(r"\d+", name)
    return int(numbers[-1]) if numbers else default


def _check_not_dangling(child: Path, what: str) -> None:
    """A link the series would read through must lead somewhere (else it was left out)."""
    if child.is_symlink() and not child.exists():
        raise ValueError(
            f"{what} {child.name} ({child}) is a link to {os.readlink(child)}, which does not "
            "exist; restore it or remove the link."
        )


def _trainer_step(folder: Path, default: int) -> int:
    """The step in ``trainer_state.json`` (``global_step``), else ``default`` (the folder
    name's number); a file that holds no usable step is refused, naming it."""
    state = folder / "trainer_state.json"
    if not (state.is_file() or state.is_symlink()):
        return default
    try:
        recorded = json.loads(state.read_text(encoding="utf-8"))
    except PermissionError:
        raise ValueError(f"{state} is unreadable (permission denied).") from None
    except (OSError, ValueError) as error:
        raise ValueError(
            f"{state} is not a JSON trainer state ({error}); fix or remove it (the folder "
            "name's number is the step without it)."
        ) from None
    step = recorded.get("global_step") if isinstance(recorded, dict) else None
    if isinstance(step, float) and np.isfinite(step) and step.is_integer():
        step = int(step)
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(
            f"{state} has global_step {step!r}, not an integer >= 0; fix or remove it (the "
            "folder name's number is the step without it)."
        )
    return step


#: trainer_state.json's log_history keys → the training record's names.
TRAINER_KEYS = {"loss": "train_loss", "learning_rate": "learning_rate",
                "num_input_tokens_seen": "tokens_seen"}  # fmt: skip


def trainer_record(folder: Path, step: int) -> dict[str, float] | None:
    """The training record at ``step`` from ``folder/trainer_state.json``'s ``log_history``:
    the loss, learning rate and tokens seen of the last entry at or before ``step`` that logs
    each, and ``lr_sum`` = Σ learning rate over steps 1..``step`` (exact when every step is
    logged; between logged steps the rate is interpolated linearly, before the first one it is
    the first one's). None without a readable log."""
    try:
        state = json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))
        history = [e for e in state["log_history"] if isinstance(e, dict) and "step" in e]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    history = [e for e in history if int(e["step"]) <= step]
    record: dict[str, float] = {}
    for key, name in TRAINER_KEYS.items():
        logged = [e[key] for e in history if _finite(e.get(key))]
        if logged:
            record[name] = float(logged[-1])
    rates = {int(e["step"]): float(e["learning_rate"]) for e in history
             if _finite(e.get("learning_rate"))}  # fmt: skip
    if step == 0:
        record["lr_sum"] = 0.0  # no step taken yet
    elif rates:
        known = sorted(rates)
        every = np.interp(np.arange(1, step + 1), known, [rates[k] for k in known])
        record["lr_sum"] = float(np.sum(every))
    return record or None


def _experiment_training(
    entry: Mapping[str, Any], record: Mapping[str, Any]
) -> dict[str, float] | None:
    """The training record of an experiment's checkpoint from run.json (loss, Σ lr, the rate)."""
    config = record.get("config")
    sources: dict[str, Any] = {
        "train_loss": entry.get("loss"),
        "lr_sum": entry.get("lr_sum"),
        "learning_rate": config.get("learning_rate") if isinstance(config, dict) else None,
    }
    found = {name: float(value) for name, value in sources.items() if _finite(value)}
    return found or None


def _finite(value: Any) -> bool:
    """A number that JSON writes (not a bool, NaN or infinite)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)


def weight_files(folder: Path) -> list[Path]:
    files = sorted({f for pattern in WEIGHT_PATTERNS for f in folder.glob(pattern)})
    return [f for f in files if f.is_file()]


def _check_weights(folder: Path, label: str) -> None:
    """A checkpoint's weight files exist and their headers read (no tensor is loaded)."""
    if not folder.is_dir():
        raise ValueError(f"Checkpoint {label}: its folder {folder} does not exist.")
    if not os.access(folder, os.R_OK | os.X_OK):
        raise ValueError(
            f"Checkpoint {label}: its folder {folder} is unreadable (permission denied); make it "
            "readable (chmod u+rx) or remove the checkpoint."
        )
    files = weight_files(folder)
    if not files:
        raise ValueError(
            f"Checkpoint {label} ({folder}) has no weights (model.safetensors or "
            "pytorch_model.bin)."
        )
    from safetensors import safe_open

    for file in files:
        try:
            with open(file, "rb") as handle:
                handle.read(1)
        except PermissionError:
            raise ValueError(
                f"Checkpoint {label}: its weights {file} are unreadable (permission denied); "
                "make them readable (chmod u+r) or remove the checkpoint."
            ) from None
        if file.suffix != ".safetensors":
            continue
        try:
            with safe_open(str(file), framework="pt") as handle:
                handle.keys()
        except Exception as error:  # safetensors raises its own error types
            raise ValueError(
                f"Checkpoint {label}: its weights {file.name} do not load ({error})."
            ) from None


def _check_consistent(checkpoints: Sequence[Checkpoint], where: str) -> None:
    """One architecture and one tokenizer along the series (from the files, before loading)."""
    architectures: dict[str, list[str]] = {}
    tokenizers: dict[str, list[str]] = {}
    for checkpoint in checkpoints:
        if checkpoint.source is None or checkpoint.kind != "folder":
            continue
        folder = Path(checkpoint.source)
        config = folder / "config.json"
        if config.is_file():
            try:
                fields = json.loads(config.read_text(encoding="utf-8"))
            except ValueError as error:
                raise ValueError(
                    f"Checkpoint {checkpoint.label}: its config.json is not JSON ({error})."
                ) from None
            key = json.dumps({k: fields.get(k) for k in ARCHITECTURE_FIELDS}, sort_keys=True)
            architectures.setdefault(key, []).append(checkpoint.label)
        vocabulary = vocabulary_digest(folder)
        if vocabulary is not None:
            tokenizers.setdefault(vocabulary, []).append(checkpoint.label)
    if len(architectures) > 1:
        groups = " vs ".join(_first_of(labels) for labels in architectures.values())
        raise ValueError(
            f"The series {where} mixes architectures (config.json differs: {groups}); a sweep "
            "compares one model at several steps."
        )
    if len(tokenizers) > 1:
        groups = " vs ".join(_first_of(labels) for labels in tokenizers.values())
        raise ValueError(
            f"The tokenizer changes along the series {where} ({groups}); a sweep compares one "
            "model at several steps, with one tokenizer."
        )


def _first_of(labels: list[str]) -> str:
    return labels[0] + (f" and {len(labels) - 1} more" if len(labels) > 1 else "")


# --- digests ----------------------------------------------------------------------------------


def files_digest(files: Sequence[Path]) -> str:
    """SHA-256 over the names and bytes of ``files``."""
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode() + b"\0")
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def vocabulary_digest(folder: Path) -> str | None:
    """A digest of the vocabulary in a folder's tokenizer files (None without any): of
    tokenizer.json its model and added tokens only, since the padding and truncation settings
    saved beside them change with how the tokenizer was last called, not what it encodes."""
    digest = hashlib.sha256()
    found = False
    for name in TOKENIZER_FILES:
        path = folder / name
        if not path.is_file():
            continue
        found = True
        content = path.read_bytes()
        if name == "tokenizer.json":
            try:
                parsed = json.loads(content)
                content = json.dumps(
                    [parsed.get("model"), parsed.get("added_tokens")], sort_keys=True
                ).encode()
            except ValueError:
                pass
        digest.update(name.encode() + b"\0" + content)
    return digest.hexdigest() if found else None


def module_digest(module: torch.nn.Module) -> str:
    """SHA-256 over a module's state dict: names, shapes, dtypes and bytes."""
    digest = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        values = tensor.detach().cpu().contiguous()
        digest.update(f"{name}{tuple(values.shape)}{values.dtype}".encode())
        digest.update(values.reshape(-1).view(torch.uint8).numpy().tobytes())
    return "sha256:" + digest.hexdigest()


def tokenizer_digest(tokenizer: Any) -> str:
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    text = json.dumps(sorted(vocab.items()), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def hub_files_digest(repository: str, revision: str | None) -> str | None:
    """A digest of the SHA-256 the hub lists for ``repository@revision``'s weight files
    (their LFS digests; nothing downloaded); None when the hub cannot be reached or lists no
    weight file with a digest."""
    from fnmatch import fnmatch

    from huggingface_hub import HfApi

    try:
        listing = list(HfApi().list_repo_tree(repository, revision=revision, recursive=True))
    except Exception:  # offline, unknown revision, no permission: no content digest
        return None
    pairs = []
    for entry in listing:
        name = getattr(entry, "path", "")
        lfs = getattr(entry, "lfs", None)
        sha = getattr(lfs, "sha256", None) if lfs is not None else None
        if sha is None and isinstance(lfs, Mapping):
            sha = lfs.get("sha256")
        if sha and any(fnmatch(Path(name).name, pattern) for pattern in WEIGHT_PATTERNS):
            pairs.append(f"{name}\0{sha}")
    if not pairs:
        return None
    return "hub-sha256:" + hashlib.sha256("\n".join(sorted(pairs)).encode()).hexdigest()


def resolve_revision(repository: str, revision: str | None) -> str:
    """The commit a hub revision points to: from the local cache when it knows the name (no
    network), else from the hub."""
    from huggingface_hub import HfApi, constants

    cache = Path(constants.HF_HUB_CACHE) / ("models--" + repository.replace("/", "--"))
    name = revision or "main"
    if re.fullmatch(r"[0-9a-f]{40}", name):
        return name
    ref = cache / "refs" / name
    if ref.is_file():
        return ref.read_text(encoding="utf-8").strip()
    try:
        info = HfApi().model_info(repository, revision=name)
    except Exception as error:  # offline, unknown name, no network: one line, nothing written
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(
            f"Cannot resolve {repository}@{name}: it is not in the local cache and the hub "
            f"does not answer ({first}). Download the revisions first (online), or sweep a "
            "local folder."
        ) from None
    if info.sha is None:
        raise ValueError(f"The hub does not resolve {repository}@{name} to a commit.")
    return str(info.sha)

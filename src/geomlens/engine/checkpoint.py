"""Checkpoint and resume: analysis states saved every K batches, with the run's arguments.

A checkpoint directory holds one file per rank (``state-rank{r}-of-{K}.pt``), replaced
atomically, with: the run's arguments (analyses and their configs, model, batch size, padding,
max length, seed, number of ranks, data source), the next batch to run, a digest of the rows
already folded in, the random-number generator states and every analysis's state. A rerun with
the same arguments loads it, reads past the rows already seen (checking that they are the same
rows), and continues; a rerun with different arguments is refused with the difference named.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from geomlens.analyses.base import Analysis
from geomlens.atomic_files import atomic_write_bytes, nearest_existing
from geomlens.data.dataset import Dataset
from geomlens.engine.distributed import SINGLE_PROCESS, Shard
from geomlens.plain_state import UnsafeStateError, read_file, to_bytes

#: 2: concept and SAE states hold device sums; a format-1 state does not fit them.
CHECKPOINT_FORMAT = 2


class RowDigest:
    """A running SHA-256 of the rows folded in, so a resumed run can tell it reads the same data."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.rows = 0

    def update(self, dataset: Dataset, index: np.ndarray) -> None:
        if dataset.texts is not None:
            inputs: list[Any] = [dataset.texts[i] for i in index]
        elif dataset.token_ids is not None:
            inputs = [list(dataset.token_ids[i]) for i in index]
        else:
            inputs = [int(i) for i in index]  # recorded activations: the rows are the data
        labels = {name: values[index].tolist() for name, values in sorted(dataset.columns.items())}
        self._hash.update(json.dumps([inputs, labels], default=str).encode())
        self.rows += len(index)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


@dataclass
class Progress:
    """How far a rank got: every batch of its shard numbered below ``next_batch`` is folded in."""

    next_batch: int = 0
    rows: int = 0
    tokens: int = 0
    digest: str = RowDigest().hexdigest()
    complete: bool = False


@dataclass
class Saved:
    """A loaded checkpoint: progress, analysis states (in the run's analysis order), RNG states."""

    progress: Progress
    states: list[dict[str, Any]]
    rng: dict[str, Any] = field(default_factory=dict)


def plain_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` as JSON would give them back, so a saved and a fresh copy compare equal."""
    return json.loads(json.dumps(arguments, default=str, sort_keys=True))


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def argument_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """``name: checkpoint has X, this run has Y`` for every argument that differs."""
    old, new = _flatten(saved), _flatten(current)
    missing = object()
    return [
        f"{key}: the checkpoint has {old.get(key, '(absent)')!r}, this run has "
        f"{new.get(key, '(absent)')!r}"
        for key in sorted(set(old) | set(new))
        if old.get(key, missing) != new.get(key, missing)
    ]


def _rng_states() -> dict[str, Any]:
    states: dict[str, Any] = {"torch": torch.get_rng_state(), "numpy": np.random.get_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _restore_rng(states: dict[str, Any]) -> None:
    if "torch" in states:
        torch.set_rng_state(states["torch"].cpu())
    if "numpy" in states:
        np.random.set_state(states["numpy"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in states["cuda"]])


def check_writable_folder(folder: Path, what: str) -> None:
    """Refuse, before any work is done, a folder that cannot be created or written: one that is
    a file, lies under a file, or under a folder this process cannot write."""
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{what} path {folder} exists and is not a directory; give a folder.")
    ancestor = nearest_existing(folder)
    if not ancestor.is_dir():
        raise ValueError(
            f"{what} path {folder} cannot be created: {ancestor} is a file, not a folder. Give a "
            "folder path."
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ValueError(
            f"{what} path {folder} cannot be written: {ancestor} is not writable by you. Choose "
            "a folder you can write to."
        )


class Checkpoint:
    """The checkpoint of one rank of one run, in ``directory``; saved every ``every`` batches."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        arguments: dict[str, Any],
        *,
        every: int = 50,
        shard: Shard = SINGLE_PROCESS,
    ) -> None:
        if every < 1:
            raise ValueError(f"checkpoint_every must be at least 1 batch, got {every}.")
        self.directory = Path(directory)
        self.arguments = plain_arguments(arguments)
        self.every = every
        self.world_size = shard.world_size
        self.path = self.directory / f"state-rank{shard.rank}-of-{shard.world_size}.pt"
        check_writable_folder(self.directory, "Checkpoint")

    def load(self, device: torch.device | str) -> Saved | None:
        """The saved state, or None when there is none yet. Refuses a checkpoint of a run with
        different arguments, naming every difference."""
        if not self.path.exists():
            mine = f"-of-{self.world_size}.pt"
            others = sorted(
                p.name
                for p in self.directory.glob("state-rank*-of-*.pt")
                if not p.name.endswith(mine)
            )
            if others:
                raise ValueError(
                    f"Checkpoint {self.directory} was written by a run with another number of "
                    f"ranks ({', '.join(others)}); resume with that many processes or use another "
                    "checkpoint directory."
                )
            return None
        try:
            payload = read_file(self.path, device)
        except UnsafeStateError as error:
            raise UnsafeStateError(
                f"Refused checkpoint {error} Delete it or give another checkpoint directory."
            ) from None
        self._check_layout(payload)
        differences = argument_differences(payload["arguments"], self.arguments)
        if differences:
            raise ValueError(
                f"Checkpoint {self.directory} belongs to a run with other arguments — "
                + "; ".join(differences)
                + ". Rerun with the checkpoint's arguments to resume, or give another "
                "checkpoint directory to start afresh."
            )
        _restore_rng(payload["rng"])
        return Saved(Progress(**payload["progress"]), payload["states"], payload["rng"])

    def _check_layout(self, payload: Any) -> None:
        """A checkpoint of this format: a dict with every field, of the types saved."""
        fields = {"arguments": dict, "progress": dict, "rng": dict, "states": list}
        written = payload.get("format") if isinstance(payload, dict) else None
        if isinstance(written, int) and written != CHECKPOINT_FORMAT:
            raise UnsafeStateError(
                f"Refused checkpoint {self.path}: it was written in checkpoint format {written} "
                f"by another geomlens version; this one reads format {CHECKPOINT_FORMAT}. Rerun "
                "from the start in another checkpoint directory (or delete this one)."
            )
        wrong = (
            not isinstance(payload, dict)
            or payload.get("format") != CHECKPOINT_FORMAT
            or any(not isinstance(payload.get(k), t) for k, t in fields.items())
            or set(payload["progress"]) - set(Progress.__dataclass_fields__)
            or len(payload["states"]) != len(payload["arguments"].get("analyses", {}))
        )
        if wrong:
            raise UnsafeStateError(
                f"Refused checkpoint {self.path}: it is not a geomlens checkpoint of format "
                f"{CHECKPOINT_FORMAT} (format, arguments, progress, rng and states). Delete it "
                "or give another checkpoint directory."
            )

    def save(self, analyses: Sequence[Analysis], progress: Progress) -> None:
        """Write every analysis's state and ``progress`` atomically (readers never see half)."""
        payload = {
            "format": CHECKPOINT_FORMAT,
            "arguments": self.arguments,
            "progress": progress.__dict__,
            "rng": _rng_states(),
            "states": [analysis.state_dict() for analysis in analyses],
        }
        atomic_write_bytes(self.path, to_bytes(payload))

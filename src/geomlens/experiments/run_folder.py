"""The folder a training experiment writes: one sub-folder of weights per checkpoint and a
``run.json`` describing the run (what ``geomlens sweep --series`` and the theory overlays read).

One writer for every experiment, so that they refuse the same folders, replace an earlier run
the same way and write each file whole or not at all. The folder follows the report folder's
rules (:mod:`geomlens.report.folder`): every file is recorded with its hash in the folder's
manifest before it is moved into place, a rerun deletes only the files so proven (an
interrupted run's included), and a folder holding anything else of the user's is refused,
naming it, before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save

from geomlens.output_folder import (
    check_owned_folder,
    proven,
    read_manifest,
    remove_owned,
    write_owned,
)

RUN_FILE = "run.json"
WEIGHTS_FILE = "model.safetensors"
#: What the folder's manifest says wrote it.
OWNER = "experiment"


def check_run_folder(folder: Path, experiment: str) -> None:
    """Refuse, before any work, a ``folder`` that is neither new, empty, nor an earlier run of
    ``experiment`` written by geomlens (an interrupted one included)."""
    check_owned_folder(folder, f"{experiment} run", OWNER)
    record = folder / RUN_FILE
    if proven(folder, RUN_FILE, read_manifest(folder)):
        try:
            earlier = json.loads(record.read_text(encoding="utf-8")).get("experiment")
        except (OSError, ValueError, AttributeError):
            earlier = None
        if earlier != experiment:
            raise ValueError(
                f"--out {folder} holds an earlier {earlier} run, not an {experiment} one; give "
                "an empty or new folder"
            )


def prepare_run_folder(folder: Path, experiment: str) -> None:
    """Make ``folder`` ready for a run of ``experiment``: create it, or delete the files of an
    earlier (or interrupted) run of it that geomlens wrote; anything else in the way is
    refused, nothing touched."""
    check_run_folder(folder, experiment)
    if folder.is_dir():
        remove_owned(folder)
    folder.mkdir(parents=True, exist_ok=True)


def save_checkpoint(folder: Path, label: str, state: dict[str, torch.Tensor]) -> None:
    """Write ``state`` (copied, contiguous) as ``folder/label/model.safetensors``, whole or not
    at all (a killed run leaves no half-written checkpoint for a sweep to read)."""
    tensors = {k: v.detach().clone().contiguous() for k, v in state.items()}
    write_owned(folder, f"{label}/{WEIGHTS_FILE}", save(tensors), OWNER)


def write_run_record(folder: Path, record: dict[str, Any]) -> None:
    """``folder/run.json``, written last (a folder with it holds a finished run)."""
    write_owned(folder, RUN_FILE, json.dumps(record, indent=1) + "\n", OWNER)

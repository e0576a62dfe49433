"""The folder a training experiment writes: one sub-folder of weights per checkpoint and a
``run.json`` describing the run (what ``geomlens sweep --series`` and the theory overlays read).

One writer for every experiment, so that they refuse the same folders, replace an earlier run
the same way and write each file whole or not at all.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save

from geomlens.atomic_files import atomic_write_bytes, atomic_write_text

RUN_FILE = "run.json"
WEIGHTS_FILE = "model.safetensors"


def prepare_run_folder(folder: Path, experiment: str, checkpoint_prefix: str) -> None:
    """Make ``folder`` ready for a run of ``experiment``: create it, or empty an earlier run of
    the same experiment (its ``checkpoint_prefix``-N folders and its run.json); anything else
    in the way is refused, nothing touched."""
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {folder} is a file; give a folder for the checkpoints")
    if folder.is_dir() and any(folder.iterdir()):
        try:
            earlier = json.loads((folder / RUN_FILE).read_text(encoding="utf-8")).get("experiment")
        except (OSError, ValueError, AttributeError):
            earlier = None
        if earlier != experiment:
            raise ValueError(
                f"--out {folder} is not empty and holds no earlier {experiment} run; give an "
                "empty or new folder"
            )
        for child in folder.iterdir():
            if child.is_dir() and child.name.startswith(checkpoint_prefix):
                shutil.rmtree(child)
        (folder / RUN_FILE).unlink()
    folder.mkdir(parents=True, exist_ok=True)


def save_checkpoint(folder: Path, label: str, state: dict[str, torch.Tensor]) -> None:
    """Write ``state`` (copied, contiguous) as ``folder/label/model.safetensors``, whole or not
    at all (a killed run leaves no half-written checkpoint for a sweep to read)."""
    tensors = {k: v.detach().clone().contiguous() for k, v in state.items()}
    atomic_write_bytes(folder / label / WEIGHTS_FILE, save(tensors))


def write_run_record(folder: Path, record: dict[str, Any]) -> None:
    """``folder/run.json``, written last (a folder with it holds a finished run)."""
    atomic_write_text(folder / RUN_FILE, json.dumps(record, indent=1) + "\n")

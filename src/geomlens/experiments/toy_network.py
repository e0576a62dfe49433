"""The toy ReLU network of the generalisation–identification paper, trained with checkpoints.

``theory.toy.train_toy`` trains ``W ∈ R^{m×l}`` on similarity trials over ``l`` one-hot stimuli
(the paper's configuration by default); here ``W`` is saved after every epoch as the weight of
a torch module, :class:`ToyEmbedding`, whose output on a one-hot stimulus is its embedding
``h_i = W e_i`` (site ``module:embed``). The network's similarity is ``ReLU(⟨h_i, h_j⟩)``, so the
sweep's (p_S, p_I) are computed from the embeddings exactly as the paper does and placed against
the front of its linear-decay proposition (``theory.resolution.linear_decay_front``).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file
from torch import nn

from geomlens.engine.feed import check_seed
from geomlens.experiments.checkpoint_steps import check_saved_steps, spec_steps
from geomlens.experiments.run_folder import (
    WEIGHTS_FILE,
    prepare_run_folder,
    save_checkpoint,
    write_run_record,
)
from geomlens.theory.toy import ToyConfig, stimulus_distances, train_toy

EXPERIMENT = "toy-network"
SITE = "module:embed"


class ToyEmbedding(nn.Module):
    """``forward(x) = x Wᵀ``: one-hot stimuli ``[N, l]`` to their embeddings ``[N, m]``."""

    def __init__(self, stimuli: int, hidden: int) -> None:
        super().__init__()
        self.embed = nn.Linear(stimuli, hidden, bias=False, dtype=torch.float64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.embed(x)


def train(
    config: ToyConfig | None = None,
    out: str | Path = "toy-run",
    *,
    checkpoints: str = "every:1",
) -> dict[str, Any]:
    """Train the toy network and write ``out/epoch-N/model.safetensors`` at the epochs that
    ``checkpoints`` keeps (``every:K`` / ``log:N``), then ``out/run.json``."""
    config = config or ToyConfig()
    folder = Path(out)
    check_seed(config.seed, "seed (--seed)")
    check_saved_steps(checkpoints, config.epochs, "epochs")
    kept = set(spec_steps(checkpoints, config.epochs))
    prepare_run_folder(folder, EXPERIMENT)
    saved: list[dict[str, Any]] = []

    def save(epoch: int, weights: np.ndarray) -> None:
        if epoch not in kept:
            return
        label = f"epoch-{epoch}"
        tensor = torch.from_numpy(weights.astype(np.float64))
        save_checkpoint(folder, label, {"embed.weight": tensor})
        saved.append(
            {
                "label": label,
                "step": epoch,
                "epoch": epoch,
                "optimizer_steps": epoch * config.steps_per_epoch,
            }
        )

    train_toy(config, on_epoch=save)
    distances = stimulus_distances(config.stimuli, config.geometry)
    record = {
        "experiment": EXPERIMENT,
        "format": 1,
        "config": asdict(config),
        "model": {"stimuli": config.stimuli, "hidden": config.hidden},
        "theory": {"kind": "toy-front", "geometry": config.geometry, "n": 2},
        "time": "epoch",
        "sites": [SITE],
        # The network's similarity ReLU(⟨h_i, h_j⟩) gives the same Luce choices as the cosine
        # for the resolution analysis up to the embeddings' norms; measured: the two (p_S, p_I)
        # agree to ~0.001 along the paper's run.
        "options": {"similarity": "cosine"},
        "data": {
            "inputs": {"x": np.eye(config.stimuli).tolist()},
            "coordinate": _coordinates(config).tolist(),
            "metric": ["circular:1" if config.geometry == "circle" else "absolute"]
            * config.stimuli,
        },
        "distances": distances.tolist(),
        "checkpoints": saved,
    }
    write_run_record(folder, record)
    return record


def _coordinates(config: ToyConfig) -> np.ndarray:
    if config.geometry == "circle":
        return np.arange(config.stimuli) / config.stimuli
    return np.linspace(0.0, 1.0, config.stimuli)


def load_network(folder: str | Path, record: dict[str, Any]) -> ToyEmbedding:
    shape = record["model"]
    network = ToyEmbedding(int(shape["stimuli"]), int(shape["hidden"]))
    network.load_state_dict(load_file(str(Path(folder) / WEIGHTS_FILE)))
    return network.eval()

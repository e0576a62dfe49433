"""The training experiments whose checkpoint folders ``gl.series`` can load: each one's
``run.json`` names it, and its module rebuilds the network of one checkpoint folder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def _loaders() -> dict[str, Callable[[str, dict[str, Any]], torch.nn.Module]]:
    from geomlens.experiments import abstraction_dynamics, toy_network

    return {
        abstraction_dynamics.EXPERIMENT: abstraction_dynamics.load_network,
        toy_network.EXPERIMENT: toy_network.load_network,
    }


def load_experiment_network(record: dict[str, Any], folder: str) -> torch.nn.Module:
    """The torch module saved in ``folder`` by the experiment ``record`` (its run.json)
    describes; only geomlens's own experiments are known (no code is imported by name)."""
    loaders = _loaders()
    name = record.get("experiment")
    if name not in loaders:
        raise ValueError(
            f"Unknown experiment {name!r} in run.json; geomlens knows {', '.join(loaders)}."
        )
    try:
        return loaders[name](folder, record)
    except (OSError, RuntimeError, ValueError, KeyError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"Checkpoint {folder} does not load: {first}") from error

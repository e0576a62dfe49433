"""The minimal two-factor network of the abstraction-dynamics paper, trained with checkpoints.

Four classes (s, c) ∈ {±1}² (``theory.abstraction.CLASS_ORDER``) whose input and target class
means have 2FS kernels with prescribed mode eigenvalues (``theory.abstraction_sim.two_factor_data``).
A linear network of ``depth`` hidden layers (``depth = 1``: the two-layer network), a torch
module whose layers are the sites ``module:layers.0`` … ``module:layers.{depth-1}``, is trained
by plain gradient descent on the loss ``½‖Z R − Y‖² + ‖R‖²/(2γ)`` with the ridge readout R
solved exactly before every step (variable projection, as the theory assumes); every layer
starts as √κ times a matrix with orthonormal rows, the start the closed forms solve. Gradient
descent with learning rate η discretises the gradient flow, whose time is ``t = Σ η`` over the
steps taken: that is the time at which ``theory.abstraction.alpha_trajectory`` is exact.

:func:`train` writes ``DIR/step-N/model.safetensors`` at the chosen steps and, last,
``DIR/run.json``: the kernels Σx and Σy, γ, κ, the depth, the learning-rate schedule, Σ η per
checkpoint, the four class-mean inputs with their labels (the data a sweep reads) and the
sites. ``gl.series(DIR)`` reads such a folder, and ``gl.sweep`` overlays the exact α(t).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
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
from geomlens.theory import abstraction
from geomlens.theory.abstraction_sim import initial_weights, two_factor_data

EXPERIMENT = "abstraction-dynamics"
#: Class labels in ``CLASS_ORDER``: the concept s and the context c it is seen in.
CONCEPTS = tuple("s+" if s > 0 else "s-" for s, _ in abstraction.CLASS_ORDER)
CONTEXTS = tuple("c+" if c > 0 else "c-" for _, c in abstraction.CLASS_ORDER)
#: The largest κ taken: √κ scales every layer, and κ ≫ 1 leaves the theory's regime long before
#: float64 overflows (κ = 1e300 made the network's values infinite).
MAX_INIT_SCALE = 1e6


class TrainingDivergedError(ValueError):
    """The weights became NaN or infinite during training (the learning rate is too large)."""


@dataclass(frozen=True)
class AbstractionDynamicsConfig:
    """Setup of one training run; the defaults are the first configuration of the theory's
    simulation tests (a rich start, κ = 10⁻³, whose α peaks near 0.96 and settles at 0.65)."""

    depth: int = 1
    init_scale: float = 1e-3
    gamma: float = 2.0
    learning_rate: float = 0.01
    steps: int = 3000
    checkpoints: str = "every:10"
    input_modes: tuple[float, float, float, float] = (1.0, 2.0, 1.0, 0.5)
    target_modes: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 0.2)
    input_dim: int = 6
    target_dim: int = 5
    hidden_dim: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 1:
            raise ValueError(f"depth must be an integer >= 1; got {self.depth!r}")
        for name in ("init_scale", "gamma", "learning_rate"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be > 0; got {value!r}")
        if self.init_scale > MAX_INIT_SCALE:
            raise ValueError(
                f"init_scale (--init-scale) must be at most {MAX_INIT_SCALE:g}: κ is the squared "
                f"scale of the start, and a larger one overflows the network's float64 values "
                f"(the theory is about small starts, 1e-3 by default); got {self.init_scale!r}"
            )
        for name in ("input_modes", "target_modes"):
            modes = getattr(self, name)
            if len(modes) != 4 or not all(np.isfinite(v) and v >= 0 for v in modes):
                flag = "--" + name.replace("_", "-")
                raise ValueError(f"{flag} takes four finite numbers >= 0, G,S,C,SC; got {modes}")
        check_seed(self.seed, "seed (--seed)")
        if self.steps < 0:
            raise ValueError(f"steps must be >= 0; got {self.steps}")
        check_saved_steps(self.checkpoints, self.steps)
        if self.input_dim < 4 or self.target_dim < 4:
            raise ValueError("input_dim and target_dim must be >= 4 (four modes each)")
        if self.hidden_dim is not None and self.hidden_dim < self.input_dim:
            raise ValueError(
                f"hidden_dim must be >= input_dim ({self.input_dim}) for the aligned start"
            )
        spec_steps(self.checkpoints, self.steps)  # refuses a bad selection before training


class TwoFactorLinearNet(nn.Module):
    """``depth`` bias-free linear layers in float64; ``forward(x)`` returns the last hidden
    representation ``Z_L = x W_1 ⋯ W_L`` (the readout is solved, not learned)."""

    def __init__(self, input_dim: int, hidden_dim: int, depth: int) -> None:
        super().__init__()
        widths = [input_dim] + [hidden_dim] * depth
        self.layers = nn.ModuleList(
            nn.Linear(widths[i], widths[i + 1], bias=False, dtype=torch.float64)
            for i in range(depth)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def layer_sites(depth: int) -> list[str]:
    """The module sites of the hidden layers, first to last."""
    return [f"module:layers.{layer}" for layer in range(depth)]


def ridge_readout(
    representation: torch.Tensor, targets: torch.Tensor, gamma: float
) -> torch.Tensor:
    """``R = argmin ½‖Z R − Y‖² + ‖R‖²/(2γ) = Zᵀ (Z Zᵀ + I/γ)⁻¹ Y``."""
    system = (
        representation @ representation.T
        + torch.eye(representation.shape[0], dtype=representation.dtype) / gamma
    )
    return representation.T @ torch.linalg.solve(system, targets)


#: Seeds of the frames the input and target class means are drawn in: the data are the task,
#: the same for every run (the run's seed draws the start), so that several seeds of one setup
#: are measured on one data set.
DATA_SEEDS = (1, 2)


def class_data(config: AbstractionDynamicsConfig) -> tuple[np.ndarray, np.ndarray]:
    """Input and target class means ``[4, d]`` (rows in ``CLASS_ORDER``) with the configured
    2FS spectra, each in a fixed random frame (``DATA_SEEDS``)."""
    inputs = two_factor_data(config.input_modes, config.input_dim, seed=DATA_SEEDS[0])
    targets = two_factor_data(config.target_modes, config.target_dim, seed=DATA_SEEDS[1])
    return inputs, targets


def build_network(config: AbstractionDynamicsConfig) -> TwoFactorLinearNet:
    """The network at its aligned start (every ``W_ℓ W_ℓᵀ = κ I``)."""
    hidden = config.hidden_dim or config.input_dim
    network = TwoFactorLinearNet(config.input_dim, hidden, config.depth)
    weights = initial_weights(
        config.input_dim, hidden, config.depth, config.init_scale, "aligned", config.seed
    )
    with torch.no_grad():
        for layer, weight in zip(network.layers, weights):
            assert isinstance(layer, nn.Linear)
            layer.weight.copy_(torch.from_numpy(weight.T))
    return network


def train(
    config: AbstractionDynamicsConfig, out: str | Path, *, progress: bool = False
) -> dict[str, Any]:
    """Train the network and write its checkpoints and ``run.json`` into ``out``; return the
    run record. ``out`` must be empty or absent, or hold an earlier run of this experiment
    (which is replaced). Weights that become NaN or infinite stop the run
    (:class:`TrainingDivergedError`, naming the step) before they are saved."""
    folder = Path(out)
    inputs, targets = class_data(config)
    saved = set(spec_steps(config.checkpoints, config.steps))
    prepare_run_folder(folder, EXPERIMENT)
    network = build_network(config)
    x, y = torch.from_numpy(inputs), torch.from_numpy(targets)
    checkpoints: list[dict[str, Any]] = []
    lr_sum = 0.0
    from tqdm.auto import tqdm

    for step in tqdm(range(config.steps + 1), disable=not progress, desc="training", unit="step"):
        _check_finite(network, x, step, config)
        if step in saved:
            label = f"step-{step}"
            save_checkpoint(folder, label, network.state_dict())
            checkpoints.append({"label": label, "step": step, "lr_sum": lr_sum})
        if step == config.steps:
            break
        _gradient_step(network, x, y, config)
        lr_sum += config.learning_rate
    record = run_record(config, inputs, targets, checkpoints)
    write_run_record(folder, record)
    return record


def _gradient_step(
    network: TwoFactorLinearNet, x: torch.Tensor, y: torch.Tensor, config: AbstractionDynamicsConfig
) -> None:
    """One step of gradient descent on the loss with the ridge readout solved exactly."""
    hidden = network(x)
    with torch.no_grad():
        readout = ridge_readout(hidden, y, config.gamma)
    loss = 0.5 * ((hidden @ readout - y) ** 2).sum() + (readout**2).sum() / (2 * config.gamma)
    network.zero_grad()
    loss.backward()
    with torch.no_grad():
        for parameter in network.parameters():
            assert parameter.grad is not None
            parameter.sub_(config.learning_rate * parameter.grad)


def _check_finite(
    network: TwoFactorLinearNet, x: torch.Tensor, step: int, config: AbstractionDynamicsConfig
) -> None:
    """Stop, naming the step, once the weights or the representation are no longer finite."""
    with torch.no_grad():
        finite = all(bool(torch.isfinite(p).all()) for p in network.parameters())
        finite = finite and bool(torch.isfinite(network(x)).all())
    if not finite:
        raise TrainingDivergedError(
            f"training diverged at step {step}: the weights became NaN or infinite (learning "
            f"rate {config.learning_rate:g}, init scale {config.init_scale:g}); nothing of that "
            "step was saved: lower --lr and rerun into the same --out."
        )


def run_record(
    config: AbstractionDynamicsConfig,
    inputs: np.ndarray,
    targets: np.ndarray,
    checkpoints: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """What ``run.json`` holds: the setup the theory needs, the data, the checkpoints."""
    hidden = config.hidden_dim or config.input_dim
    return {
        "experiment": EXPERIMENT,
        "format": 1,
        "config": asdict(config),
        "model": {"input_dim": config.input_dim, "hidden_dim": hidden, "depth": config.depth},
        "theory": {
            "kind": "abstraction-exact",
            "sigma_x": (inputs @ inputs.T).tolist(),
            "sigma_y": (targets @ targets.T).tolist(),
            "gamma": config.gamma,
            "kappa": config.init_scale,
            "depth": config.depth,
        },
        "schedule": {"kind": "constant", "learning_rate": config.learning_rate},
        "time": "lr_sum",
        "sites": layer_sites(config.depth),
        "data": {
            "inputs": {"x": inputs.tolist()},
            "concept": list(CONCEPTS),
            "context": list(CONTEXTS),
        },
        "checkpoints": list(checkpoints),
    }


def load_network(folder: str | Path, record: dict[str, Any]) -> TwoFactorLinearNet:
    """The network of one checkpoint folder of a run described by ``record`` (its run.json)."""
    shape = record["model"]
    network = TwoFactorLinearNet(
        int(shape["input_dim"]), int(shape["hidden_dim"]), int(shape["depth"])
    )
    network.load_state_dict(load_file(str(Path(folder) / WEIGHTS_FILE)))
    return network.eval()

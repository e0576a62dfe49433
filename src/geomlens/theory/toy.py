"""The paper's minimal ReLU network, whose learned similarity develops a finite resolution.

docs/theory.md#resolution-toy-network. l one-hot stimuli on a circle or a segment (or under any distance matrix),
embedded by W ∈ R^{m×l}. The learned similarity is g(x_i, x_j) = ReLU(⟨W x_i, W x_j⟩) + 1e-10
and choices follow the Luce rule. Training minimises λ_sim · (similarity NLL on trials of a
probe and n candidates, n = 2 by default: the paper's 3-item trials) + λ_rec · MSE(ReLU(WᵀW x),
x), optionally with weight decay, as the paper's released code allows.
After every epoch the exact expected (p_S, p_I) of the learned similarity matrix
(:func:`geomlens.theory.finite_sets.evaluate`) and its distance profile g(d) are recorded, to
be compared with Proposition 1's front (:func:`~geomlens.theory.resolution.linear_decay_front`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from numpy.typing import ArrayLike

from geomlens.theory.finite_sets import evaluate

__all__ = [
    "ToyConfig",
    "ToyResult",
    "learned_similarity",
    "similarity_profile",
    "stimulus_distances",
    "train_toy",
]

# Keeps the Luce rule defined when every ReLU similarity of a trial is 0 (the paper's choice).
SIMILARITY_FLOOR = 1e-10


@dataclass(frozen=True)
class ToyConfig:
    """Hyper-parameters of the toy network; the defaults are the paper's (docs/theory.md#resolution-toy-network).

    ``steps_per_epoch`` = 15 is the paper's 2000 trials per epoch in batches of 128.
    ``candidates`` is n, the candidates of a similarity trial (each trial draws n + 1 distinct
    stimuli); ``weight_decay`` is Adam's L2 penalty on W (torch.optim.Adam's weight_decay).
    """

    stimuli: int = 50
    hidden: int = 10
    geometry: Literal["circle", "segment"] = "circle"
    lambda_sim: float = 1.0
    lambda_rec: float = 0.0
    learning_rate: float = 7e-3
    batch_size: int = 128
    steps_per_epoch: int = 15
    epochs: int = 500
    init_scale: float = 2.0
    seed: int = 0
    candidates: int = 2
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        if self.geometry not in ("circle", "segment"):
            raise ValueError(f"geometry must be 'circle' or 'segment'; got {self.geometry!r}")
        for name in ("stimuli", "hidden", "batch_size", "steps_per_epoch", "epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1; got {getattr(self, name)}")
        if self.stimuli < 3:
            raise ValueError(f"stimuli must be >= 3 (3-item trials); got {self.stimuli}")
        if self.candidates < 2 or self.candidates + 1 > self.stimuli:
            raise ValueError(
                f"candidates must be >= 2 and at most stimuli - 1 = {self.stimuli - 1} (a trial "
                f"draws candidates + 1 distinct stimuli); got {self.candidates}"
            )
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0; got {self.weight_decay}")
        if self.lambda_sim < 0 or self.lambda_rec < 0 or self.lambda_sim + self.lambda_rec == 0:
            raise ValueError(
                "lambda_sim and lambda_rec must be >= 0 and not both 0; "
                f"got {self.lambda_sim}, {self.lambda_rec}"
            )
        if self.learning_rate <= 0 or self.init_scale <= 0:
            raise ValueError("learning_rate and init_scale must be > 0")


@dataclass(frozen=True)
class ToyResult:
    """Trajectories of a training run; index 0 of the per-epoch arrays is the initialisation.

    Attributes:
        config: the run's configuration.
        distances: (l, l) stimulus distances.
        p_s, p_i: exact expected accuracies (n = 2) of the learned similarity, per epoch.
        profile_distances: the distinct stimulus distances d.
        profiles: (epochs + 1, len(d)) normalised similarity profile g(d), per epoch.
        profile_mass: ∫ g dν of the normalised profile per epoch (the width of g: b for a
            ball of measure b with g = 1, b/2 for linear decay of support b).
        loss: mean training loss of each epoch.
        weights: the final W, (m, l).
    """

    config: ToyConfig
    distances: np.ndarray
    p_s: np.ndarray
    p_i: np.ndarray
    profile_distances: np.ndarray
    profiles: np.ndarray
    profile_mass: np.ndarray
    loss: np.ndarray
    weights: np.ndarray


def stimulus_distances(stimuli: int, geometry: Literal["circle", "segment"]) -> np.ndarray:
    """Distances of ``stimuli`` evenly spaced points, as in the paper's code.

    Circle of circumference 1: points i/l, geodesic distance. Segment [0, 1]: points i/(l − 1).
    Distances are rounded to 12 decimals so that equal distances tie exactly.
    """
    if geometry == "circle":
        gap = np.abs(np.subtract.outer(np.arange(stimuli), np.arange(stimuli)))
        d = np.minimum(gap, stimuli - gap) / stimuli
    elif geometry == "segment":
        t = np.linspace(0.0, 1.0, stimuli)
        d = np.abs(np.subtract.outer(t, t))
    else:
        raise ValueError(f"geometry must be 'circle' or 'segment'; got {geometry!r}")
    return np.round(d, 12)


def _checked_distances(distances: ArrayLike, stimuli: int) -> np.ndarray:
    d = np.asarray(distances, dtype=float)
    if d.shape != (stimuli, stimuli):
        raise ValueError(
            f"distances must be a ({stimuli}, {stimuli}) matrix for config.stimuli = {stimuli}; "
            f"got shape {d.shape}"
        )
    if not np.all(np.isfinite(d)) or np.any(d < 0) or np.any(np.diag(d) != 0):
        raise ValueError("distances must be finite, >= 0, with a zero diagonal")
    if not np.allclose(d, d.T):
        raise ValueError("distances must be symmetric (d(x, y) = d(y, x))")
    # Equal distances must tie exactly for "closest" (see stimulus_distances).
    return np.round(d, 12)


def learned_similarity(weights: np.ndarray | torch.Tensor) -> np.ndarray:
    """The network's similarity matrix g(x_i, x_j) = ReLU(⟨w_i, w_j⟩) + 1e-10 (docs/theory.md#resolution-toy-network)."""
    w = torch.as_tensor(weights).detach().to(torch.float64)
    return (torch.relu(w.T @ w) + SIMILARITY_FLOOR).numpy()


def similarity_profile(
    similarity: np.ndarray, distances: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The normalised profile g(d): mean of g(x_p, x_j) / g(x_p, x_p) over pairs at distance d.

    Normalising each probe's row by its own g(x_p, x_p) leaves its Luce choices unchanged and
    makes g(0) = 1. Returns the distinct distances and the profile at each.
    """
    levels, level_of = np.unique(distances, return_inverse=True)
    normalised = similarity / np.diag(similarity)[:, None]
    total = np.bincount(level_of.ravel(), weights=normalised.ravel(), minlength=len(levels))
    count = np.bincount(level_of.ravel(), minlength=len(levels))
    return levels, total / count


def _distinct_draws(
    trials: int, stimuli: int, count: int, generator: torch.Generator
) -> torch.Tensor:
    """Uniform draws of ``count`` distinct stimuli per trial: candidates first, probe last."""
    columns: list[torch.Tensor] = []
    for k in range(count):
        draw = torch.randint(stimuli - k, (trials,), generator=generator)
        if columns:
            # Skip the values already taken, smallest first, so each draw is uniform over
            # the rest.
            taken = torch.sort(torch.stack(columns, dim=1), dim=1).values
            for j in range(taken.shape[1]):
                draw = draw + (draw >= taken[:, j])
        columns.append(draw)
    return torch.stack(columns, dim=1)


def _similarity_nll(sim: torch.Tensor, dist: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
    candidates, probe = batch[:, :-1], batch[:, -1:]
    distance, similarity = dist[candidates, probe], sim[candidates, probe]
    closest = distance == distance.min(dim=1, keepdim=True).values
    correct = (similarity * closest).sum(dim=1)
    # A trial whose candidates all tie has every answer correct: its NLL is 0 with no
    # gradient, so drop it.
    untied = closest.sum(dim=1) < candidates.shape[1]
    nll = -torch.log(correct / similarity.sum(dim=1))
    return nll[untied].mean() if untied.any() else nll.sum() * 0.0


def _reconstruction_mse(gram: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
    # ReLU(WᵀW e_i) is row i of the symmetric ReLU(WᵀW). The MSE over the batch's one-hot
    # items weights each stimulus's squared error by its count (indexing rows instead makes
    # a backward pass ~50x slower on CPU).
    stimuli = gram.shape[0]
    counts = torch.bincount(batch.reshape(-1), minlength=stimuli).to(gram.dtype)
    error = (torch.relu(gram) - torch.eye(stimuli, dtype=gram.dtype)) ** 2
    return (counts[:, None] * error).sum() / (batch.numel() * stimuli)


def train_toy(
    config: ToyConfig | None = None,
    *,
    distances: ArrayLike | None = None,
    on_epoch: Callable[[int, np.ndarray], None] | None = None,
) -> ToyResult:
    """Train the toy network and record its (p_S, p_I) and similarity profile every epoch.

    Each step draws ``batch_size`` trials of n + 1 distinct stimuli (n = ``candidates`` and a
    probe), as the paper's code does. Seeded and CPU-only: the same config gives the same
    result.

    Args:
        config: hyper-parameters (the paper's by default).
        distances: any stimulus metric as an (l, l) matrix (symmetric, zero diagonal,
            non-negative); it replaces ``geometry``, and l must equal ``config.stimuli``.
        on_epoch: called with (epoch, a copy of W) at the start (epoch 0) and after every
            epoch, e.g. to save checkpoints.
    """
    config = config or ToyConfig()
    generator = torch.Generator().manual_seed(config.seed)
    if distances is None:
        distances = stimulus_distances(config.stimuli, config.geometry)
    else:
        distances = _checked_distances(distances, config.stimuli)
    dist = torch.as_tensor(distances, dtype=torch.float32)
    w = torch.empty(config.hidden, config.stimuli)
    w.uniform_(0.0, config.init_scale, generator=generator)
    w.requires_grad_(True)
    optimiser = torch.optim.Adam([w], lr=config.learning_rate, weight_decay=config.weight_decay)
    history = [_record(w, distances)]
    if on_epoch is not None:
        on_epoch(0, w.detach().numpy().copy())
    losses = []
    for _ in range(config.epochs):
        losses.append(_train_epoch(w, optimiser, dist, config, generator))
        history.append(_record(w, distances))
        if on_epoch is not None:
            on_epoch(len(losses), w.detach().numpy().copy())

    p_s, p_i, profiles = (np.array(column) for column in zip(*history))
    levels = np.unique(distances)
    level_share = np.array([np.mean(distances == d) for d in levels])
    return ToyResult(
        config=config,
        distances=distances,
        p_s=p_s,
        p_i=p_i,
        profile_distances=levels,
        profiles=profiles,
        profile_mass=profiles @ level_share,
        loss=np.array(losses),
        weights=w.detach().numpy().copy(),
    )


def _record(weights: torch.Tensor, distances: np.ndarray) -> tuple[float, float, np.ndarray]:
    """What every epoch records: the exact (p_S, p_I) of the learned similarity and its
    profile g(d)."""
    similarity = learned_similarity(weights)
    p_s, p_i = evaluate(distances, similarity, n=2, method="exact")
    return p_s, p_i, similarity_profile(similarity, distances)[1]


def _train_epoch(
    w: torch.Tensor,
    optimiser: torch.optim.Optimizer,
    dist: torch.Tensor,
    config: ToyConfig,
    generator: torch.Generator,
) -> float:
    """One epoch of ``config.steps_per_epoch`` steps on fresh trials of n + 1 distinct
    stimuli (the weighted similarity NLL plus reconstruction MSE); its mean loss."""
    epoch_loss = 0.0
    for _ in range(config.steps_per_epoch):
        batch = _distinct_draws(config.batch_size, config.stimuli, config.candidates + 1, generator)
        gram = w.T @ w
        loss = torch.zeros(())
        if config.lambda_sim > 0:
            sim = torch.relu(gram) + SIMILARITY_FLOOR
            loss = loss + config.lambda_sim * _similarity_nll(sim, dist, batch)
        if config.lambda_rec > 0:
            loss = loss + config.lambda_rec * _reconstruction_mse(gram, batch)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        epoch_loss += loss.item()
    return epoch_loss / config.steps_per_epoch

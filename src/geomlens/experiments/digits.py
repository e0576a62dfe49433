"""The seed paper's CNN trade-off experiment, offline: handwritten digits instead of birds.

The paper fine-tunes a ResNet on bird images with ``L = (1 − λ) L_identification + λ L_similarity``
and finds that raising λ moves the network along the generalisation–identification front:
better similarity judgements, worse identification. Here the images are scikit-learn's bundled
8×8 handwritten digits (1,797 images, no download) and the class distance is ``|a − b|``:

- ``L_identification``: cross-entropy of a linear read-out of the embedding (which digit?);
- ``L_similarity``: the negative log Luce probability of the correct answer in similarity
  trials: a probe image and two candidate images; the correct candidate is the one whose digit
  is closer to the probe's (ties in distance are skipped); the similarity trained is
  ``g = exp((cos(h_x, h_p) − 1) / τ)`` of the embeddings ``h``, τ = 0.1 (``g = 1`` for identical
  embeddings, always positive). A ReLU-cosine similarity, the toy network's choice, was tried
  first: from this CNN's initialisation (all embeddings at cosine ≈ 0.9) it collapses to a
  constant similarity (loss log 2, p_S = p_I = 1/2), so it cannot show the trade-off.

Each trained network is then measured on held-out images through geomlens (the ``module:embed``
site) with :func:`geomlens.experiments.tradeoff.tradeoff_point`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from geomlens.experiments.tradeoff import TradeoffPoint, embed_with, tradeoff_point

#: The site the experiment reads: the CNN's embedding layer.
EMBED_SITE = "module:embed"
#: τ of the trained similarity exp((cos − 1) / τ).
SIMILARITY_TEMPERATURE = 0.1


def digit_distance(a: Any, b: Any) -> float:
    """The class distance of the digits task: ``|a − b|``."""
    return abs(float(a) - float(b))


class DigitsCNN(nn.Module):
    """A small CNN for 1×8×8 digits: two conv layers, an embedding, a 10-way read-out."""

    def __init__(self, width: int = 16, embedding: int = 32, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.pool = nn.AvgPool2d(2)
        self.flatten = nn.Flatten()
        self.embed = nn.Linear(2 * width * 16, embedding)
        self.classify = nn.Linear(embedding, classes)

    def embedding(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.relu1(self.conv1(pixel_values))
        x = self.pool(self.relu2(self.conv2(x)))
        return self.embed(self.flatten(x))

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.classify(self.embedding(pixel_values))


@dataclass(frozen=True)
class DigitsSplit:
    """Train and test images ``[N, 1, 8, 8]`` (scaled to [0, 1]) with their digit labels."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray


def load_digits_split(test_fraction: float = 0.3, seed: int = 0) -> DigitsSplit:
    """scikit-learn's bundled digits, split into train / test stratified by digit."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]
    split = train_test_split(
        images,
        digits.target,
        test_size=test_fraction,
        random_state=seed,
        stratify=digits.target,
    )
    return DigitsSplit(*split[::2], *split[1::2])


def similarity_loss(
    embeddings: torch.Tensor, labels: torch.Tensor, generator: torch.Generator
) -> torch.Tensor:
    """Mean −log D_correct over 2-candidate similarity trials drawn from one batch.

    Each image is a probe once; its two candidates are random images of the batch, and the
    candidate whose digit is closer to the probe's is correct (trials with equal distances are
    dropped, as they have no correct answer).
    """
    size = embeddings.shape[0]
    candidates = torch.randint(0, size, (size, 2), generator=generator)
    distance = (labels[candidates] - labels[:, None]).abs()
    decided = distance[:, 0] != distance[:, 1]
    unit = nn.functional.normalize(embeddings, dim=1)
    log_g = ((unit[candidates] * unit[:, None]).sum(-1) - 1.0) / SIMILARITY_TEMPERATURE
    correct = (distance[:, 1] < distance[:, 0]).long()
    log_choice = log_g - torch.logsumexp(log_g, dim=1, keepdim=True)
    chosen = log_choice.gather(1, correct[:, None])[:, 0]
    return -(chosen[decided]).mean()


def train_digits_cnn(
    similarity_weight: float,
    split: DigitsSplit,
    *,
    epochs: int = 30,
    batch_size: int = 128,
    learning_rate: float = 3e-3,
    seed: int = 0,
    width: int = 16,
    progress: bool = False,
) -> DigitsCNN:
    """Train a :class:`DigitsCNN` with ``L = (1 − λ) L_identification + λ L_similarity``."""
    if not 0.0 <= similarity_weight <= 1.0:
        raise ValueError(f"The similarity weight λ must lie in [0, 1]; got {similarity_weight}.")
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = DigitsCNN(width=width)
    optimiser = torch.optim.Adam(model.parameters(), lr=learning_rate)
    images = torch.as_tensor(split.train_images)
    labels = torch.as_tensor(split.train_labels, dtype=torch.long)
    model.train()
    for _ in tqdm(range(epochs), desc=f"λ={similarity_weight:g}", disable=not progress):
        order = torch.randperm(len(images), generator=generator)
        for start in range(0, len(images), batch_size):
            rows = order[start : start + batch_size]
            embeddings = model.embedding(images[rows])
            identification = nn.functional.cross_entropy(model.classify(embeddings), labels[rows])
            similarity = similarity_loss(embeddings, labels[rows], generator)
            loss = (1 - similarity_weight) * identification + similarity_weight * similarity
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    return model.eval()


def digits_tradeoff(
    similarity_weights: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 0.9, 1.0),
    *,
    epochs: int = 30,
    seed: int = 0,
    width: int = 16,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Train one CNN per λ and place each on the front: a row per λ with p_S, p_I, the
    distance to the universal front, its nearest ball measure b and regime, and test accuracy."""
    split = load_digits_split(seed=seed)
    rows = []
    for weight in similarity_weights:
        model = train_digits_cnn(
            weight, split, epochs=epochs, seed=seed, width=width, progress=progress
        )
        point = measure_digits_model(model, split)
        with torch.no_grad():
            logits = model(torch.as_tensor(split.test_images))
        accuracy = float((logits.argmax(1).numpy() == split.test_labels).mean())
        rows.append({"lambda": float(weight), **point.to_dict(), "test_accuracy": accuracy})
    return rows


def measure_digits_model(model: nn.Module, split: DigitsSplit) -> TradeoffPoint:
    """A trained digits CNN's (p_S, p_I) on the held-out images, read at ``module:embed``."""
    embeddings = embed_with(model, split.test_images, EMBED_SITE, model_id="digits-cnn")
    return tradeoff_point(embeddings, split.test_labels, digit_distance)

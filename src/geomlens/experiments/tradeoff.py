"""Where a trained network sits in the generalisation–identification plane, from its embeddings.

The stimuli are the classes of a labelled image set, with a distance between classes (for
digits ``|a − b|``; for birds a phylogenetic distance). A network's learned similarity between
two images is ``g = max(0, cos(h_x, h_y))`` of their embeddings (non-negative, as the Luce choice
rule needs; ``g = 1`` for identical embeddings). The class-level similarity ``G[p, x]`` is the mean
``g`` between images of class ``p`` and images of class ``x`` (distinct images only), and
:func:`geomlens.theory.finite_sets.evaluate` turns ``G`` and the class distances into the expected
accuracies of the two tests (docs/vision.md):

- similarity (generalisation): probe class ``p`` and two candidate classes; the correct answer is
  the candidate closer to ``p``; ``p_S`` is the expected Luce probability of choosing it;
- identification: the probe's own class against a distractor class; ``p_I``.

The point is then placed against the universal front of Theorem 1 (distance, nearest ``b``,
regime).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from geomlens.theory import finite_sets, resolution

ClassDistance = Callable[[Any, Any], float]


@dataclass(frozen=True)
class TradeoffPoint:
    """A network's measured (p_S, p_I) and its position relative to the universal front."""

    p_s: float
    p_i: float
    front_distance: float
    front_b: float
    regime: str
    classes: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def class_similarity(embeddings: Any, labels: Any, classes: Sequence[Any]) -> np.ndarray:
    """``G[p, x]``: mean ``max(0, cos)`` between embeddings of class ``p`` and of class ``x``.

    Pairs of an image with itself are left out, so the diagonal is how alike *different* images
    of one class look (identification is of classes, not of single images).
    """
    h = torch.as_tensor(np.asarray(embeddings), dtype=torch.float64)
    h = h.reshape(h.shape[0], -1)
    labels = np.asarray(labels)
    if h.shape[0] != labels.shape[0]:
        raise ValueError(
            f"{h.shape[0]} embeddings but {labels.shape[0]} labels; give one label per embedding."
        )
    unit = torch.nn.functional.normalize(h, dim=1)
    g = (unit @ unit.T).clamp(min=0.0)
    g.fill_diagonal_(0.0)
    members = torch.as_tensor(np.stack([labels == c for c in classes]), dtype=torch.float64)
    counts = members.sum(dim=1)
    if bool((counts < 2).any()):
        sparse = [c for c, n in zip(classes, counts.tolist()) if n < 2]
        raise ValueError(f"Classes {sparse} have fewer than two examples; each needs two or more.")
    totals = members @ g @ members.T
    pairs = counts[:, None] * counts[None, :] - torch.diag(counts)
    return (totals / pairs).numpy()


def tradeoff_point(
    embeddings: Any,
    labels: Any,
    class_distance: ClassDistance,
    *,
    classes: Sequence[Any] | None = None,
) -> TradeoffPoint:
    """Empirical (p_S, p_I) of one network from its embeddings of labelled images.

    ``class_distance(a, b)`` is the distance between two class labels (``abs(a - b)`` for
    digits). Classes are weighted by how often they occur in ``labels``.
    """
    labels = np.asarray(labels)
    classes = list(np.unique(labels)) if classes is None else list(classes)
    distances = np.array([[float(class_distance(p, x)) for x in classes] for p in classes])
    weights = np.array([(labels == c).sum() for c in classes], dtype=float)
    similarity = class_similarity(embeddings, labels, classes)
    p_s, p_i = finite_sets.evaluate(distances, similarity, n=2, weights=weights)
    position = resolution.nearest_on_front(p_s, p_i, resolution.pareto_front(2001))
    return TradeoffPoint(
        p_s=float(p_s),
        p_i=float(p_i),
        front_distance=float(position.distance),
        front_b=float(position.b),
        regime=str(resolution.regime(float(position.b))),
        classes=len(classes),
    )


def embed_with(
    model: Any,
    inputs: Any,
    site: str,
    *,
    batch_size: int = 256,
    model_id: str | None = None,
) -> np.ndarray:
    """Embeddings ``[N, D]`` of ``inputs`` at ``site`` of any torch model, read through geomlens.

    ``model`` is anything ``gl.attach`` takes (a torch module, an nnsight model, an adapter);
    ``inputs`` is an array ``[N, ...]`` handed to the model's first input, or a mapping of named
    model inputs; ``site`` a canonical name or ``module:PATH``. One row per example (the site's
    output flattened).
    """
    from geomlens.data.dataset import Dataset
    from geomlens.inputs.batches import captured_batches, dataset_batches
    from geomlens.models.attach import attach

    adapter = attach(model, model_id=model_id) if not _is_adapter(model) else model
    named = dict(inputs) if isinstance(inputs, dict) else {"pixel_values": inputs}
    dataset = Dataset(inputs=named)
    rows = []
    for batch in captured_batches(adapter, dataset_batches(dataset, batch_size), [site]):
        activation = batch.activations[site]
        rows.append(activation.reshape(activation.shape[0], -1).float().cpu().numpy())
    return np.concatenate(rows)


def _is_adapter(model: Any) -> bool:
    from geomlens.models.adapter import Adapter

    return isinstance(model, Adapter)


def measure_tradeoff(
    model: Any,
    inputs: Any,
    labels: Any,
    class_distance: ClassDistance,
    *,
    site: str,
    batch_size: int = 256,
) -> TradeoffPoint:
    """(p_S, p_I) of your own model at ``site`` on labelled inputs, with your class distance.

    Example: ``measure_tradeoff(resnet, pixel_values, species, phylo_distance,
    site="module:avgpool")``.
    """
    embeddings = embed_with(model, inputs, site, batch_size=batch_size)
    return tradeoff_point(embeddings, labels, class_distance)

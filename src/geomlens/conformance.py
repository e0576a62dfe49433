"""Conformance checks a user can run on their own model (``geomlens check MODEL``).

Every canonical site must resolve and return ``[B, T, d]`` with one width per site kind, and a
padded batch (left and right) must give the same activations at real tokens as one-by-one runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geomlens.data.dataset import Dataset
from geomlens.hooks.base import Adapter

DEFAULT_PROMPTS = (
    "The quick brown fox jumps over the lazy dog.",
    "It happened in the year 1630.",
    "Geometry of representations.",
)


@dataclass
class Check:
    name: str
    passed: bool
    detail: str


def _max_padding_error(adapter: Adapter, dataset: Dataset, sites: list[str], side: str) -> float:
    """Worst relative disagreement, |batched − alone| / max|alone| per site (float32 sums of
    large activations reorder differently with padding, so an absolute bound would depend on
    the model's scale)."""
    index = np.arange(len(dataset))
    batched_inputs = adapter.encode(dataset, index, padding_side=side)
    batched = adapter.capture(batched_inputs, sites)
    worst = 0.0
    for row in index:
        single_inputs = adapter.encode(dataset, np.array([row]))
        single = adapter.capture(single_inputs, sites)
        mask = batched_inputs.attention_mask[row].bool()
        for site in sites:
            together = batched[site][row][mask.to(batched[site].device)]
            alone = single[site][0]
            scale = alone.float().abs().max().clamp(min=1.0)
            worst = max(worst, ((together.float() - alone.float()).abs().max() / scale).item())
    return worst


def check_adapter(
    adapter: Adapter, prompts: tuple[str, ...] = DEFAULT_PROMPTS, rtol: float = 1e-5
) -> list[Check]:
    """Run the conformance checks; each returns pass/fail with a sentence saying why."""
    if getattr(adapter, "backend", None) == "recorded":
        # Recorded arrays have no model to run prompts through (not a question of labels).
        raise ValueError(
            "Conformance checks run prompts through a model; recorded activations have none. "
            "Check the model that produced them (geomlens check MODEL)."
        )
    checks: list[Check] = []
    sites = adapter.sites()
    checks.append(
        Check("sites", bool(sites), f"{len(sites)} canonical sites: {', '.join(sites[:4])}, …")
    )
    dataset = (
        Dataset(texts=list(prompts))
        if adapter.tokenizer is not None
        else Dataset(token_ids=[[1, 2, 3, 4, 5], [6, 7, 8], [9, 10, 11, 12]])
    )
    inputs = adapter.encode(dataset, np.arange(len(dataset)))
    activations = adapter.capture(inputs, sites)
    bad_shapes = [
        f"{site} {tuple(act.shape)}"
        for site, act in activations.items()
        if act.dim() < 3 or tuple(act.shape[:2]) != tuple(inputs.attention_mask.shape)
    ]
    widths: dict[str, set[int]] = {}
    for site, act in activations.items():
        kind = site.split(".", 2)[-1] if site.startswith("blocks.") else site
        widths.setdefault(kind, set()).add(int(act.shape[-1]))
    mixed = {kind: sorted(w) for kind, w in widths.items() if len(w) > 1}
    checks.append(
        Check(
            "shapes",
            not bad_shapes and not mixed,
            "every site gives [batch, tokens, width], one width per site kind"
            if not bad_shapes and not mixed
            else f"bad shapes {bad_shapes}; mixed widths {mixed}",
        )
    )
    for side in ("right", "left"):
        error = _max_padding_error(adapter, dataset, sites, side)
        checks.append(
            Check(
                f"{side}-padding",
                error <= rtol,
                f"max |batched − one-by-one| / max|one-by-one| = {error:.1e} (tolerance {rtol:.0e})",
            )
        )
    checks.append(
        Check(
            "no hooks left", adapter.hook_count() == 0, f"{adapter.hook_count()} hooks on the model"
        )
    )
    return checks


def all_passed(checks: list[Check]) -> bool:
    return all(c.passed for c in checks)


__all__ = ["Check", "all_passed", "check_adapter"]

"""Local linearisation of any activation module named by a ``module:PATH`` site.

``adapter.linearize(layers, ...)`` finds the MLP activation of transformer blocks; a CNN's or a
vision tower's nonlinearities have no block index, so :func:`linearize_modules` takes module
sites instead (``module:layer1.0.relu1``) and replaces each module's output φ(x) by

- ``"identity"``: x, or
- ``"tangent"``: φ(x₀) + φ'(x₀)(x − x₀), x₀ the per-unit mean input over calibration data
  (every element of the module's input but the batch axis, averaged over examples and, for
  token models, over real tokens).

The module must be elementwise (ReLU, GELU, SiLU, …: output shaped like its input). The
replacement is an adapter edit at the module's site (so every backend path that applies edits
applies it, and the site reads the linearised value); the module's input comes from a torch
pre-hook on the adapter's model (the weight-sharing twin of a plain module), removed in a
``finally``. Active linearisations are recorded in every result's provenance beside the
layer-based ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from geomlens.hooks.sites import is_module_site, module_path
from geomlens.inputs.adapter_protocol import ModelAdapter
from geomlens.inputs.batches import capture_batch, dataset_batches, encoded_batches
from geomlens.interventions.linearize import MODES, ActivationTarget


def _targets(adapter: ModelAdapter, sites: Sequence[str]) -> list[ActivationTarget]:
    model = adapter.model
    if not isinstance(model, torch.nn.Module):
        raise ValueError(
            f"Linearising modules needs a model; a {adapter.backend!r} adapter has none."
        )
    targets = []
    for number, site in enumerate(sites):
        if not is_module_site(site):
            raise ValueError(
                f"linearize_modules takes module sites ('module:PATH'); got {site!r}. For "
                "transformer blocks by index use adapter.linearize(layers)."
            )
        adapter.resolve_site(site)
        path = module_path(site)
        module = model.get_submodule(path)
        targets.append(ActivationTarget(number, module, path, module=module))
    return targets


def _mean_inputs(
    adapter: ModelAdapter, targets: list[ActivationTarget], calibration: Any, batch_size: int
) -> list[torch.Tensor]:
    """Per-unit mean input of each target module over ``calibration`` (any ``gl.run`` data)."""
    from geomlens.data.dataset import as_dataset

    dataset = as_dataset(calibration)
    sums: list[Any] = [0.0] * len(targets)
    counts = [0] * len(targets)
    masks: list[torch.Tensor] = []

    def tap(number: int) -> Any:
        def hook(module: Any, args: tuple) -> None:
            x = args[0].detach().to(torch.float64)
            mask = masks[-1].to(x.device).bool()
            rows = x[mask] if x.dim() >= 3 and x.shape[:2] == mask.shape else x
            sums[number] = sums[number] + rows.sum(dim=0)
            counts[number] += rows.shape[0]

        return hook

    sites = [f"module:{t.where}" for t in targets]
    batches = list(dataset_batches(dataset, batch_size))
    # The first capture with module sites runs a probe pass for their order; run it before the
    # taps go on, so that no batch is counted twice.
    capture_batch(adapter, next(encoded_batches(adapter, batches[:1])), sites)
    handles = []
    try:
        for target in targets:
            assert target.module is not None  # module targets hook a module
            # A pre-hook: the capture stops the pass as soon as the module's output is read,
            # before a forward hook would run.
            handles.append(target.module.register_forward_pre_hook(tap(target.layer)))
        for inputs in encoded_batches(adapter, batches):
            masks.append(inputs.attention_mask)
            capture_batch(adapter, inputs, sites)
    finally:
        for handle in handles:
            handle.remove()
    return [(total / count).to(torch.float32) for total, count in zip(sums, counts)]


@contextlib.contextmanager
def linearize_modules(
    adapter: ModelAdapter,
    sites: str | Sequence[str],
    mode: str = "identity",
    calibration: Any = None,
    *,
    batch_size: int = 16,
) -> Iterator[list[ActivationTarget]]:
    """Linearise the activation modules at ``sites`` for forward passes inside the block."""
    from geomlens.interventions.linearize import (
        _ACTIVE,  # the registry results read provenance from
    )

    if mode not in MODES:
        raise ValueError(f"Unknown linearisation mode {mode!r}; use 'identity' or 'tangent'.")
    sites = [sites] if isinstance(sites, str) else list(sites)
    targets = _targets(adapter, sites)
    if mode == "tangent":
        if calibration is None:
            raise ValueError(
                "mode='tangent' expands φ around the mean input of calibration data; pass "
                "calibration= (the same kind of data as the run, e.g. {'pixel_values': ...})."
            )
        for target, x0 in zip(targets, _mean_inputs(adapter, targets, calibration, batch_size)):
            target.set_operating_point(x0)

    # Each module's input is kept by a pre-hook and its output replaced by an adapter edit at
    # the module's site, so the site itself reads the linearised value (a forward hook would run
    # after nnsight has read the output).
    inputs: dict[int, torch.Tensor] = {}

    def keep(target: ActivationTarget) -> Any:
        def hook(module: Any, args: tuple) -> None:
            inputs[target.layer] = args[0]

        return hook

    def replace(target: ActivationTarget) -> Any:
        def edit(output: torch.Tensor) -> torch.Tensor:
            pre = inputs.pop(target.layer)
            if output.shape != pre.shape:
                raise ValueError(
                    f"Module {target.where!r} is not elementwise (its output is not shaped like "
                    "its input), so it cannot be linearised; name an activation module (ReLU, "
                    "GELU, …)."
                )
            return target.replacement(pre, mode)

        return edit

    entry = {"modules": sites, "mode": mode, "where": [t.where for t in targets]}
    active = _ACTIVE.setdefault(adapter, [])
    active.append(entry)
    handles = []
    try:
        with contextlib.ExitStack() as stack:
            for site, target in zip(sites, targets):
                assert target.module is not None  # module targets hook a module
                handles.append(target.module.register_forward_pre_hook(keep(target)))
                stack.enter_context(adapter.intervene(site, replace(target)))
            yield targets
    finally:
        for handle in handles:
            handle.remove()
        active.remove(entry)

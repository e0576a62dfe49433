"""A second forward pass that starts at layer L from the residual stream the first pass cached.

An analysis that re-runs the model with an edit at block L (a linearised MLP, an SAE splice)
would otherwise recompute blocks 0..L−1, whose output it already has: the first pass captured
``blocks.L.hook_resid_pre``, the input of block L. :func:`capture_from_layer` runs the model's
own forward with blocks 0..L−1 short-circuited: each returns at once, the last of them handing
block L the cached residual. Everything the model's forward prepares outside its blocks
(embeddings, attention and padding masks, position ids, rotary tables, causal or bidirectional
masking) is prepared exactly as in a full pass, so blocks L.. see the inputs they would see in
a full rerun, and the result equals it.

The short-circuit replaces the block's ``forward`` for the duration of the pass and puts back
exactly what was there (nnsight installs its own forward on traced modules; that object is
restored). A block's output may be a tensor or a tuple (it differs across transformers versions
and TransformerLens bridges); the first short-circuited pass on an adapter runs block 0 once
to see which, and later passes reuse the answer.

Falls back to the full pass (same result, no saving) where skipping cannot be exact: a model
whose layers are one shared module (ALBERT), edits or sites before layer L or on
``module:PATH`` sites, or an adapter without blocks.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, cast

import torch

from geomlens.hooks.sites import HEAD_SITES, LOGITS_SITE, is_module_site, layer_of
from geomlens.inputs.adapter_protocol import ModelAdapter
from geomlens.inputs.encoding import ModelInputs

#: While :func:`recording_second_passes` is open: where each second pass started.
_recorders: list[list[int]] = []


@contextlib.contextmanager
def recording_second_passes() -> Iterator[list[int]]:
    """Within the block, the layer at which each :func:`capture_from_layer` pass started, in
    order (0 where it ran the whole model: a fallback, or nothing to skip). The benchmarks read
    it to time an analysis against its floor: the bare pass plus these reruns."""
    layers: list[int] = []
    _recorders.append(layers)
    try:
        yield layers
    finally:  # by identity: two open recorders may hold equal lists
        del _recorders[next(i for i, open_ in enumerate(_recorders) if open_ is layers)]


def _record(layer: int) -> None:
    for layers in _recorders:
        layers.append(layer)


def resume_site(layer: int) -> str:
    """The site the first pass must capture for a second pass to start at ``layer``."""
    return f"blocks.{layer}.hook_resid_pre"


def resume_site_for(adapter: ModelAdapter, layer: int | None) -> str | None:
    """The site to capture in the first pass so that a second pass can start at ``layer``, or
    None where there is nothing to skip (layer 0, ``hook_embed``, a model without blocks)."""
    if layer is None or layer <= 0 or layer >= adapter.n_layers:
        return None
    site = resume_site(layer)
    return site if site in adapter.sites() else None


#: Per adapter: whether its blocks return a tuple (and its length) or a bare tensor.
_OUTPUT_FORM: weakref.WeakKeyDictionary[ModelAdapter, int | None] = weakref.WeakKeyDictionary()


def _block_list(adapter: ModelAdapter) -> Sequence[torch.nn.Module] | None:
    """The model's blocks, in order, as modules whose forward is called once per pass each."""
    if adapter.is_hooked_transformer:
        return adapter.model.blocks
    table = getattr(adapter, "table", None)  # nnsight's architecture table
    if table is not None and (table.shared_block or not table.layers):
        return None  # one module run once per layer (ALBERT): it cannot be skipped per layer
    try:
        # The layer stack: an nn.ModuleList (or Sequential), indexed by layer.
        return cast("Sequence[torch.nn.Module] | None", adapter.transformer_blocks())
    except AttributeError:  # a layer list the table names but this module lacks
        return None


def _can_resume(adapter: ModelAdapter, sites: Sequence[str], layer: int) -> bool:
    if layer <= 0 or layer >= adapter.n_layers:
        return False
    for site in [*sites, *(site for site, _ in adapter.active_edits)]:
        if site == LOGITS_SITE or site in HEAD_SITES:
            continue
        at = layer_of(site)
        if is_module_site(site) or at is None or at < layer:
            return False
    return resume_site(layer) in adapter.sites()


def _shaped(form: int | None, hidden: torch.Tensor) -> Any:
    return hidden if form is None else (hidden, *([None] * (form - 1)))


@contextlib.contextmanager
def _blocks_short_circuited(
    adapter: ModelAdapter, blocks: Sequence[torch.nn.Module], layer: int, resid: torch.Tensor
) -> Iterator[None]:
    """Blocks 0..layer−1 return ``resid`` without computing (in the block's output form)."""
    saved: list[tuple[torch.nn.Module, Any]] = []

    def short_circuit(module: torch.nn.Module, original: Any) -> Any:
        def forward(*args: Any, **kwargs: Any) -> Any:
            if adapter not in _OUTPUT_FORM:  # once per adapter: what does a block return?
                output = original(*args, **kwargs)
                _OUTPUT_FORM[adapter] = len(output) if isinstance(output, tuple) else None
            return _shaped(_OUTPUT_FORM[adapter], resid)

        return forward

    try:
        for module in list(blocks)[:layer]:
            had = module.__dict__.get("forward")  # nnsight's controller, or nothing
            saved.append((module, had))
            original = had if had is not None else type(module).forward.__get__(module)
            # Through __dict__: a TransformerLens bridge block redirects attribute writes.
            module.__dict__["forward"] = short_circuit(module, original)
        yield
    finally:
        for module, had in saved:
            if had is None:
                module.__dict__.pop("forward", None)
            else:
                module.__dict__["forward"] = had


def capture_from_layer(
    adapter: ModelAdapter,
    inputs: ModelInputs,
    sites: Sequence[str],
    layer: int,
    resid_pre: torch.Tensor | None,
) -> dict[str, torch.Tensor]:
    """``adapter.capture(inputs, sites)`` (with the active edits), computing only blocks
    ``layer``.. from ``resid_pre``, the input of block ``layer`` captured by an earlier pass on
    the same inputs (``resume_site(layer)``). Equal to the full pass; falls back to it where a
    skip could not be exact (module docstring) or ``resid_pre`` is None."""
    blocks = _block_list(adapter) if resid_pre is not None else None
    if resid_pre is None or blocks is None or not _can_resume(adapter, sites, layer):
        _record(0)
        return adapter.capture(inputs, sites)
    _record(layer)
    resid = resid_pre.to(adapter.device)
    with _blocks_short_circuited(adapter, blocks, layer, resid):
        return adapter.capture(inputs, sites)

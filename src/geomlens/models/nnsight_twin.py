"""The module nnsight traces: a structural twin sharing the user's weights, or the model's own envoy.

nnsight 0.8 instruments a module by installing a controller as the instance's ``forward`` and
leaves it there for good. So a plain module handed to the nnsight adapter is never wrapped
itself: the adapter wraps a structural twin that shares the module's parameter and buffer tensors
(no weights are copied), and the user's module keeps its own ``forward``, hooks and attributes.
An nnsight model is already instrumented, so its module is traced directly.
"""

from __future__ import annotations

import copy
import itertools
import warnings
from typing import Any

import torch
from nnsight import NNsight
from nnsight.intervention.envoy import Envoy


def twin_sharing_weights(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``module``'s structure whose parameters and buffers are the original tensors."""
    shared = itertools.chain(module.parameters(), module.buffers())
    return copy.deepcopy(module, memo={id(tensor): tensor for tensor in shared})


def traceable(model: Any) -> tuple[torch.nn.Module, Envoy | None]:
    """The torch module to trace, and the envoy to trace it with when the model brings one.

    A plain module gets a weight-sharing twin (so the module itself is never instrumented). An
    envoy whose trace hands inputs straight to its module (``NNsight``) is used as it is; one
    that processes inputs itself (``TransformersModel``) is bypassed for a fresh envoy.
    """
    if isinstance(model, Envoy):
        if getattr(model, "dispatched", True) is False:
            model.dispatch()  # a TransformersModel built lazily on the meta device
        passes_inputs_through = type(model)._batch is Envoy._batch
        return model._module, model if passes_inputs_through else None
    if isinstance(model, torch.nn.Module):
        return twin_sharing_weights(model), None
    raise TypeError(
        f"NNsightAdapter takes an nnsight model or a torch module, not a {type(model).__name__}."
    )


def path_in(root: torch.nn.Module, target: torch.nn.Module) -> str:
    for name, module in root.named_modules():
        if module is target:
            return name
    raise ValueError(f"{type(target).__name__} is not a submodule of {type(root).__name__}.")


def join_path(*parts: str) -> str:
    return ".".join(p for p in parts if p)


def transformers_hooks(module: torch.nn.Module) -> int:
    """Forward hooks that transformers itself installed (its output-capturing hooks)."""
    return sum(
        getattr(hook, "__module__", "").startswith("transformers.")
        for sub in module.modules()
        for hook in sub._forward_hooks.values()
    )


def quiet_envoy(module: torch.nn.Module) -> NNsight:
    with warnings.catch_warnings():
        # nnsight warns that BERT's `output` submodules are reached as `E_output`; the adapter
        # resolves paths with that rule (see `_envoy_at`).
        warnings.simplefilter("ignore", UserWarning)
        return NNsight(module)

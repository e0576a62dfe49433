"""Module-path sites: ``module:PATH`` is the output of the submodule at ``PATH``, in any torch model.

Canonical names (TransformerLens hook names) exist only where an architecture table knows the
model. Vision models, VLM towers and plain torch modules have layers with no such name, so every
submodule is also a site under its torch path: ``module:layer4.1.relu2`` is the output of
``model.get_submodule("layer4.1.relu2")`` in the forward pass (the first element when the module
returns a tuple, the first field when it returns a Hugging Face ``ModelOutput``).

nnsight reads module outputs in the order the model computes them, and that order is not the
order in which modules are registered (a ResNet's ``downsample`` is registered last in its block
but runs before the block's sum). So the order is *measured*: one forward pass with a torch
pre-hook and hook on every module records when each module's input and output appear
(:func:`record_execution_order`); the hooks are handles removed in a ``finally``. The same pass
counts calls: a module that runs more than once per forward (torchvision's ResNet blocks reuse a
single ``relu`` three times) has no single output, so reading it is refused with a pointer to a
module that does.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from geomlens.hooks.sites import module_path, module_site

#: Where a value is read: a module's forward input or its output.
Event = tuple[str, str]


def module_sites(root: torch.nn.Module) -> list[str]:
    """A site for every submodule of ``root`` (the root itself excluded), in registration order."""
    return [module_site(name) for name, _ in root.named_modules() if name]


def check_module_site(root: torch.nn.Module, site: str, model_id: str) -> str:
    """The torch path of ``site``; a clear error naming the nearest paths when there is none."""
    path = module_path(site)
    try:
        if not path:
            raise AttributeError
        root.get_submodule(path)
    except AttributeError:
        paths = [name for name, _ in root.named_modules() if name]
        nearest = difflib.get_close_matches(path, paths, n=3, cutoff=0.0)
        raise ValueError(
            f"Model {model_id!r} has no submodule {path!r}, so site {site!r} does not exist. "
            f"Nearest paths: {', '.join(map(repr, nearest)) or 'none'} (all paths: "
            "[name for name, _ in model.named_modules()])."
        ) from None
    return path


@dataclass
class ExecutionOrder:
    """When each module's input and output appear in one forward pass, and how often it runs."""

    events: dict[Event, int] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def position(self, path: str, port: str, model_id: str = "the model") -> int:
        """The step at which ``path``'s ``port`` ("input" or "output") first appears."""
        try:
            return self.events[(path, port)]
        except KeyError:
            raise ValueError(
                f"Module {path!r} of {model_id} did not run in a forward pass on these inputs, "
                "so nothing can be read there (a vision tower without an image, or a branch the "
                "inputs do not take)."
            ) from None

    def check_single_call(self, path: str, model_id: str = "the model") -> None:
        """Refuse a module that runs more than once per forward: its output is not one tensor."""
        calls = self.calls.get(path, 0)
        if calls > 1:
            parent = path.rpartition(".")[0]
            hint = f" e.g. 'module:{parent}' (its enclosing module)" if parent else ""
            raise ValueError(
                f"Module {path!r} of {model_id} runs {calls} times in one forward pass (one "
                "module object reused, as torchvision's ResNet blocks reuse their relu), so it "
                f"has no single output. Read a module that runs once instead,{hint}, or give "
                "each use its own module."
            )


def record_execution_order(root: torch.nn.Module, run: Callable[[], Any]) -> ExecutionOrder:
    """Run ``run()`` once with a pre-hook and a hook on every module of ``root``, recording the
    order of module inputs and outputs. Every hook is removed before this returns or raises."""
    names = {id(module): name for name, module in root.named_modules()}
    order = ExecutionOrder()

    def seen(name: str, port: str) -> None:
        order.events.setdefault((name, port), len(order.events))

    def on_input(module: torch.nn.Module, args: Any) -> None:
        name = names[id(module)]
        order.calls[name] = order.calls.get(name, 0) + 1
        seen(name, "input")

    def on_output(module: torch.nn.Module, args: Any, output: Any) -> None:
        seen(names[id(module)], "output")

    handles: list[torch.utils.hooks.RemovableHandle] = []
    try:
        for module in root.modules():
            handles.append(module.register_forward_pre_hook(on_input))
            handles.append(module.register_forward_hook(on_output))
        run()
    finally:
        for handle in handles:
            handle.remove()
    return order


def first_tensor(value: Any, where: str) -> torch.Tensor:
    """The tensor a module-path site reads from a module output: the value itself, the first
    element of a tuple/list, or the first field of a ``ModelOutput``."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    if _is_model_output(value):
        first = next(iter(value.values()), None)
        if isinstance(first, torch.Tensor):
            return first
    raise ValueError(
        f"The output of {where!r} is a {type(value).__name__}, not a tensor (or a tuple / "
        "ModelOutput starting with one), so it cannot be read as a site; read a submodule "
        "whose output is a tensor."
    )


def with_first_tensor(value: Any, replacement: torch.Tensor) -> Any:
    """``value`` with the tensor :func:`first_tensor` reads replaced (for edits)."""
    if isinstance(value, torch.Tensor):
        return replacement
    if isinstance(value, (tuple, list)):
        return type(value)([replacement, *value[1:]])
    if _is_model_output(value):
        edited = type(value)(**dict(value.items()))
        edited[next(iter(value.keys()))] = replacement
        return edited
    raise TypeError(f"Cannot place an edited tensor into a {type(value).__name__}.")


def _is_model_output(value: Any) -> bool:
    from collections import OrderedDict

    return isinstance(value, OrderedDict) and hasattr(value, "to_tuple")


def module_sites_table(model_name: str) -> Any:
    """An architecture table with no canonical sites, for a model whose blocks are unknown: its
    sites are its module paths (a CNN, any plain torch module)."""
    from geomlens.models.architectures import ArchitectureTable

    return ArchitectureTable(
        family=f"module-paths:{model_name}",
        model_types=(),
        layers="",
        embed=None,
        note="no architecture table and no block list found: module:PATH sites only.",
    )

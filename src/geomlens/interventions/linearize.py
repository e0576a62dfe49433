"""Local linearisation of MLP nonlinearities: ``adapter.linearize(layers, mode=...)``.

Inside the ``with`` block the MLP activation φ at the chosen layers is replaced by

- ``"identity"``: φ(x) → x (the abstraction paper's local GELU ablation), or
- ``"tangent"``: φ(x) → φ(x₀) + φ'(x₀)(x − x₀), x₀ the per-neuron mean pre-activation over
  the real tokens of calibration data the caller gives (a first-order expansion at the
  operating point).

Gated MLPs (GeGLU, SwiGLU) apply φ to the gate branch only, so the gate is what is linearised;
the product with the linear branch stays. Any elementwise activation is handled (GELU variants,
SiLU, ReLU, ...); φ' comes from autograd on the model's own activation function.

Where the edit happens differs by backend, and all of that is in this module:

- Hugging Face modules (the nnsight backend, whose ``adapter.model`` is a weight-sharing twin of
  the user's module, and the TransformerBridge, which calls the wrapped HF modules): a torch
  forward hook on the activation *module* found inside each block, by type;
- HookedTransformer (activation is a plain function): TransformerLens hooks on the MLP's
  ``hook_pre`` (and ``hook_pre_linear``) that remember the pre-activation, and on ``hook_post``
  that replaces the activation output.

Every hook is a handle removed in ``finally``; no parameter is touched. Active linearisations
are listed by :func:`active_linearizations`, which the engine records in each result.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import numpy as np
import torch

from geomlens.hooks.hook_points import hooks_added
from geomlens.inputs.adapter_protocol import ModelAdapter
from geomlens.inputs.batches import capture_batch, dataset_batches, encoded_batches

Mode = Literal["identity", "tangent"]
MODES: tuple[str, ...] = ("identity", "tangent")

#: Module names that hold a block's MLP, in the families geomlens knows (BERT's is split into
#: ``intermediate`` and ``output``; the activation lives in ``intermediate``).
MLP_NAMES = ("mlp", "intermediate", "feed_forward", "ffn", "ff")

_ACTIVE: weakref.WeakKeyDictionary[ModelAdapter, list[dict[str, Any]]] = weakref.WeakKeyDictionary()


def _elementwise_activation_types() -> tuple[type[torch.nn.Module], ...]:
    """torch and transformers activation modules that act on each element on its own."""
    import transformers.activations as hf_activations

    nn = torch.nn
    torch_types = (
        nn.GELU, nn.SiLU, nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.ELU, nn.SELU, nn.CELU, nn.Tanh,
        nn.Sigmoid, nn.Mish, nn.Softplus, nn.Hardswish, nn.Hardtanh, nn.Hardsigmoid,
    )  # fmt: skip
    hf_types = tuple(
        value
        for value in vars(hf_activations).values()
        if isinstance(value, type)
        and issubclass(value, nn.Module)
        and value.__module__ == hf_activations.__name__
    )
    return torch_types + hf_types


class LinearizationError(ValueError):
    """A layer cannot be linearised (no elementwise activation found, or an unknown MLP)."""


@dataclass
class ActivationTarget:
    """One layer's MLP activation and how to reach it."""

    layer: int
    function: Callable[[torch.Tensor], torch.Tensor]
    where: str
    module: torch.nn.Module | None = None  # a HF activation module, hooked directly
    mlp: Any = None  # a TransformerLens MLP, hooked at its HookPoints
    gated: bool = False
    x0: torch.Tensor | None = None
    value_at_x0: torch.Tensor | None = field(default=None, repr=False)
    slope_at_x0: torch.Tensor | None = field(default=None, repr=False)

    def replacement(self, pre: torch.Tensor, mode: str) -> torch.Tensor:
        """The linearised activation of the pre-activation ``pre`` [..., F]."""
        if mode == "identity":
            return pre
        if self.x0 is None or self.value_at_x0 is None or self.slope_at_x0 is None:
            raise LinearizationError("The tangent needs an operating point: set_operating_point.")
        value = self.value_at_x0.to(pre.device, pre.dtype)
        slope = self.slope_at_x0.to(pre.device, pre.dtype)
        return value + slope * (pre - self.x0.to(pre.device, pre.dtype))

    def set_operating_point(self, x0: torch.Tensor) -> None:
        """Fix x₀ and take φ(x₀), φ'(x₀) by autograd on the model's own φ (elementwise)."""
        point = x0.detach().to(torch.float32).clone().requires_grad_(True)
        with torch.enable_grad():
            value = self.function(point)
            (slope,) = torch.autograd.grad(value.sum(), point)
        self.x0 = x0.detach().to(torch.float32)
        self.value_at_x0 = value.detach()
        self.slope_at_x0 = slope.detach()


# -- finding the activation in each backend -------------------------------------------------------


def _hf_blocks(adapter: ModelAdapter) -> torch.nn.ModuleList:
    blocks = adapter.transformer_blocks()
    if blocks is not None:
        # The layer stack: an nn.ModuleList (or Sequential), indexed by layer.
        return cast(torch.nn.ModuleList, blocks)
    raise LinearizationError(
        f"Linearisation needs a model; a {adapter.backend!r} adapter has none "
        "(recorded activations cannot be re-run). Record the activations under the "
        "linearisation instead."
    )


def _mlp_of(block: torch.nn.Module) -> tuple[str, torch.nn.Module]:
    for name in MLP_NAMES:
        for path, module in block.named_modules():
            if path.split(".")[-1] == name:
                return path, module
    return "", block


def _module_target(block: torch.nn.Module, layer: int) -> ActivationTarget:
    """The elementwise activation module inside a Hugging Face block's MLP."""
    kinds = _elementwise_activation_types()
    mlp_path, mlp = _mlp_of(block)
    found = [(path, m) for path, m in mlp.named_modules() if isinstance(m, kinds)]
    if len(found) != 1:
        contents = sorted({type(m).__name__ for m in mlp.modules() if m is not mlp})
        what = (
            "no elementwise activation module"
            if not found
            else f"{len(found)} activation modules ({', '.join(p for p, _ in found)})"
        )
        raise LinearizationError(
            f"Layer {layer}: the MLP at {mlp_path or '(block)'!r} holds {what}, so geomlens "
            f"cannot tell which nonlinearity to linearise. It contains: "
            f"{', '.join(contents) or 'nothing'}. Supported: one GELU / SiLU / ReLU-like "
            "activation module per MLP (gated MLPs: on the gate branch)."
        )
    path, module = found[0]
    gated = any(
        name.split(".")[-1] in ("gate_proj", "gate", "wi_0", "w1")
        for name, _ in mlp.named_modules()
    )
    # Named as Hugging Face names it inside the block, on every backend: the bridge keeps the
    # HF modules under `_original_component` and may reach the same module through its own
    # wrapper (`mlp._original_component.…`), so the shortest of its names without the
    # bridge's segments is the HF path.
    names = [
        name.replace("_original_component.", "")
        for name, found_module in block.named_modules(remove_duplicate=False)
        if found_module is module
    ]
    where = min(names, key=lambda name: (name.count("."), len(name)))
    return ActivationTarget(layer, module, where, module=module, gated=gated)


def _hooked_transformer_target(model: Any, layer: int) -> ActivationTarget:
    # TransformerLens 3 only, as HookedTransformer is (4.0 removed both); imported here so that
    # nothing imports TransformerLens before a model of its own is linearised.
    from transformer_lens.components.mlps.gated_mlp import GatedMLP
    from transformer_lens.components.mlps.mlp import MLP

    mlp = model.blocks[layer].mlp
    if not isinstance(mlp, MLP | GatedMLP) or model.cfg.is_layer_norm_activation():
        raise LinearizationError(
            f"Layer {layer}: the MLP is a {type(mlp).__name__} with activation "
            f"{model.cfg.act_fn!r}; geomlens linearises a plain or gated MLP with an elementwise "
            "activation (not SoLU / LayerNorm activations or mixtures of experts)."
        )
    gated = isinstance(mlp, GatedMLP)
    return ActivationTarget(layer, mlp.act_fn, f"blocks.{layer}.mlp", mlp=mlp, gated=gated)


def activation_targets(
    adapter: ModelAdapter, layers: int | Iterable[int]
) -> list[ActivationTarget]:
    """The MLP activation of each layer, or :class:`LinearizationError` saying what was found."""
    if adapter.is_hooked_transformer:
        layers = sorted(set(_check_layers(adapter, layers)))
        return [_hooked_transformer_target(adapter.model, layer) for layer in layers]
    blocks = _hf_blocks(adapter)
    layers = sorted(set(_check_layers(adapter, layers)))
    targets = [_module_target(blocks[layer], layer) for layer in layers]
    chosen = {id(t.module) for t in targets}
    for other in set(range(len(blocks))) - set(layers):
        for module in blocks[other].modules():
            if id(module) in chosen:
                raise LinearizationError(
                    f"Layer {other} shares its activation module with a layer asked for "
                    f"({layers}); linearise those layers together."
                )
    return targets


def _check_layers(adapter: ModelAdapter, layers: int | Iterable[int]) -> list[int]:
    layers = [layers] if isinstance(layers, int) else list(layers)
    n = adapter.n_layers
    if not layers:
        raise ValueError("linearize needs at least one layer index.")
    bad = [
        layer for layer in layers if not isinstance(layer, int | np.integer) or not -n <= layer < n
    ]
    if bad:
        raise ValueError(
            f"Layer(s) {bad} do not exist in {adapter.model_id!r}, which has {n} blocks "
            f"(indices 0..{n - 1}, or negative from the end)."
        )
    return [int(layer) % n for layer in layers]


# -- hooks ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def _module_hooks(hooks: list[tuple[torch.nn.Module, Callable[..., Any]]]) -> Iterator[None]:
    handles = []
    try:
        for module, hook in hooks:
            handles.append(module.register_forward_hook(hook))
        yield
    finally:
        for handle in handles:
            handle.remove()


def _hooks_on(
    module_hooks: list[tuple[torch.nn.Module, Callable[..., Any]]], lens_hooks: list
) -> contextlib.AbstractContextManager:
    """Torch forward hooks on HF modules and TransformerLens HookPoint hooks, all removed on
    exit."""
    stack = contextlib.ExitStack()
    stack.enter_context(_module_hooks(module_hooks))
    if lens_hooks:
        stack.enter_context(hooks_added(lens_hooks))
    return stack


def _replacing_hooks(
    targets: list[ActivationTarget], mode: str
) -> contextlib.AbstractContextManager:
    """Hooks that put the linearised activation in place of φ(pre) at every target."""
    module_hooks = []
    lens_hooks = []
    for target in targets:
        if target.module is not None:

            def replace(module: Any, args: tuple, output: torch.Tensor, target=target) -> Any:
                return target.replacement(args[0], mode)

            module_hooks.append((target.module, replace))
            continue
        seen: dict[str, torch.Tensor] = {}

        def remember(name: str, seen=seen) -> Callable[..., torch.Tensor]:
            def hook(activation: torch.Tensor, hook: Any) -> torch.Tensor:
                seen[name] = activation
                return activation

            return hook

        def replace_post(activation: torch.Tensor, hook: Any, target=target, seen=seen):
            linear = target.replacement(seen.pop("pre"), mode)
            if target.gated:  # TransformerLens's gated MLP: φ(gate) * linear branch + b_in
                return linear * seen.pop("pre_linear") + target.mlp.b_in
            return linear

        mlp = target.mlp
        lens_hooks.append((mlp.hook_pre, remember("pre")))
        if target.gated:
            lens_hooks.append((mlp.hook_pre_linear, remember("pre_linear")))
        lens_hooks.append((mlp.hook_post, replace_post))
    return _hooks_on(module_hooks, lens_hooks)


def _pre_activation_taps(
    targets: list[ActivationTarget], record: Callable[[ActivationTarget, torch.Tensor], None]
) -> contextlib.AbstractContextManager:
    """Hooks that hand each target's pre-activation to ``record`` (nothing is changed)."""
    module_hooks = []
    lens_hooks = []
    for target in targets:
        if target.module is not None:

            def tap(module: Any, args: tuple, output: Any, target=target) -> None:
                record(target, args[0])

            module_hooks.append((target.module, tap))
        else:

            def tap_lens(activation: torch.Tensor, hook: Any, target=target) -> torch.Tensor:
                record(target, activation)
                return activation

            lens_hooks.append((target.mlp.hook_pre, tap_lens))
    return _hooks_on(module_hooks, lens_hooks)


def mean_pre_activations(
    adapter: ModelAdapter,
    targets: list[ActivationTarget],
    calibration: Any,
    *,
    batch_size: int = 16,
    max_length: int | None = 128,
) -> dict[int, torch.Tensor]:
    """Per-neuron mean pre-activation of each target over the real tokens of ``calibration``
    (anything ``gl.run`` takes as data)."""
    from geomlens.data.dataset import as_dataset

    dataset = as_dataset(calibration)
    max_length = _within_positions(adapter, max_length)
    sums: dict[int, torch.Tensor] = {}
    counts: dict[int, int] = {}
    mask_of_batch: list[torch.Tensor] = []

    def record(target: ActivationTarget, pre: torch.Tensor) -> None:
        mask = mask_of_batch[-1].to(pre.device).bool()
        rows = pre.detach()[mask].to(torch.float64)
        sums[target.layer] = sums.get(target.layer, 0) + rows.sum(dim=0)
        counts[target.layer] = counts.get(target.layer, 0) + rows.shape[0]

    # The forward pass must reach the deepest linearised block; its output is the stop point.
    stop = f"blocks.{max(t.layer for t in targets)}.hook_resid_post"
    stop = stop if stop in adapter.sites() else adapter.sites()[-1]
    with _pre_activation_taps(targets, record):
        batches = dataset_batches(dataset, batch_size)
        for inputs in encoded_batches(adapter, batches, max_length=max_length):
            mask_of_batch.append(inputs.attention_mask)
            capture_batch(adapter, inputs, [stop])
    missing = [t.layer for t in targets if t.layer not in counts]
    if missing:
        raise RuntimeError(f"The calibration pass never reached the MLP of layer(s) {missing}.")
    return {layer: (sums[layer] / counts[layer]).to(torch.float32) for layer in sums}


def _within_positions(adapter: ModelAdapter, max_length: int | None) -> int | None:
    """``max_length`` cut to the positions the model has (calibration text can be long)."""
    limit = adapter.max_positions
    if limit is None:
        return max_length
    return min(limit, max_length) if max_length is not None else limit


def _operating_points(
    adapter: ModelAdapter, targets: list[ActivationTarget], calibration: Any
) -> dict[int, torch.Tensor]:
    if calibration is None:
        raise ValueError(
            "mode='tangent' expands φ around the mean pre-activation of calibration data; pass "
            "calibration= (texts, or {layer: x0 tensor}), e.g. "
            "geomlens.data.corpus.stdlib_paragraphs(64)."
        )
    if isinstance(calibration, Mapping) and all(isinstance(k, int) for k in calibration):
        points = {int(k): torch.as_tensor(v) for k, v in calibration.items()}
        absent = [t.layer for t in targets if t.layer not in points]
        if absent:
            raise ValueError(f"calibration gives x0 for layers {sorted(points)}, not {absent}.")
        return points
    return mean_pre_activations(adapter, targets, calibration)


def active_linearizations(adapter: ModelAdapter) -> list[dict[str, Any]]:
    """The linearisations active on ``adapter`` (layers, mode, where), outermost first."""
    return [dict(entry) for entry in _ACTIVE.get(adapter, [])]


@contextlib.contextmanager
def linearize(
    adapter: ModelAdapter,
    layers: int | Iterable[int],
    mode: str = "identity",  # checked against MODES
    calibration: Any = None,
) -> Iterator[list[ActivationTarget]]:
    """Linearise the MLP activation at ``layers`` for forward passes inside the block.

    ``mode``: ``"identity"`` or ``"tangent"`` (then ``calibration``: data whose mean
    pre-activation per neuron is x₀, or ``{layer: x0}``). Yields the targets (layer, where the
    activation was found, x₀). Refuses, before any forward pass, a layer whose MLP has no
    single elementwise activation.
    """
    if mode not in MODES:
        raise ValueError(f"Unknown linearisation mode {mode!r}; use 'identity' or 'tangent'.")
    targets = activation_targets(adapter, layers)
    if mode == "tangent":
        points = _operating_points(adapter, targets, calibration)
        for target in targets:
            target.set_operating_point(points[target.layer])
    entry = {
        "layers": [t.layer for t in targets],
        "mode": mode,
        "where": [t.where for t in targets],
        "gated": [t.gated for t in targets],
    }
    active = _ACTIVE.setdefault(adapter, [])
    active.append(entry)
    try:
        with _replacing_hooks(targets, mode):
            yield targets
    finally:
        active.remove(entry)

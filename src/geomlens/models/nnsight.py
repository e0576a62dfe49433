"""The nnsight backend: canonical sites read from any Hugging Face model in one nnsight trace.

Where each site lives comes from the architecture tables in :mod:`geomlens.models.architectures`.
A capture opens one trace, reads every needed module output / input in forward order (applying
active edits as it goes), and stops the model after the last one.

A plain module is traced through a structural twin sharing its weights
(:mod:`~geomlens.models.nnsight_twin`); loading by name is :mod:`~geomlens.models.nnsight_loading`.

Every trace hands the model geomlens's own token ids, attention mask and position ids. A plain
``NNsight`` passes them straight through, so it is traced as it is (edits stored on it with
``.edit()`` apply). A ``TransformersModel`` / ``LanguageModel`` re-pads inputs and derives
positions itself, so its module is traced through a fresh plain envoy instead, which bypasses
that processing and any edits stored on the wrapper.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from nnsight.intervention.envoy import Envoy

from geomlens.hooks.sites import HEAD_SITES, is_module_site, module_path
from geomlens.inputs.encoding import ModelInputs, numbered_positions, position_ids_from_mask
from geomlens.inputs.tensor_inputs import forward_kwargs, one_row_per_example
from geomlens.models.adapter import (
    EMBED_SITE,
    LOGITS_SITE,
    Adapter,
    EditFn,
    checked_edit,
    count_torch_hooks,
    eval_mode,
    layer_of,
)
from geomlens.models.architectures import (
    ArchitectureTable,
    Port,
    configured_layer_count,
    discover_table,
    table_for_config,
    table_named,
)
from geomlens.models.config_kinds import is_decoder
from geomlens.models.module_sites import (
    ExecutionOrder,
    check_module_site,
    first_tensor,
    module_sites,
    module_sites_table,
    record_execution_order,
    with_first_tensor,
)
from geomlens.models.multimodal import language_model_of
from geomlens.models.next_token import head_sites, post_head
from geomlens.models.nnsight_twin import (
    join_path,
    path_in,
    quiet_envoy,
    traceable,
    transformers_hooks,
)

NUMERICS = "raw HF weights (no LayerNorm folding or weight processing)"


@dataclass
class _Location:
    """One module output or input read during a capture, and the sites it holds (in order)."""

    path: str
    port: Port
    tuple_index: int
    sites: list[str] = field(default_factory=list)
    #: Read this attribute of the value (the model output's ``logits``) instead of an element.
    attribute: str | None = None
    #: Which call of the module (a shared block runs once per layer).
    call: int = 0
    #: The module sees the batch's tokens flattened to [B*T, d].
    flat_tokens: bool = False
    #: A ``module:PATH`` site: read the first tensor of whatever the module returns.
    whole_output: bool = False


class NNsightAdapter(Adapter):
    """A Hugging Face (or other torch) model read through nnsight at the canonical sites.

    ``model``: an ``nnsight.NNsight`` / ``TransformersModel`` / ``LanguageModel``, or a plain
    ``PreTrainedModel`` / torch module (left exactly as it was; see the module docstring).
    ``architecture``: a family or ``model_type`` name (``"llama"``) or an
    :class:`~geomlens.models.architectures.ArchitectureTable`; by default chosen from
    ``config.model_type``, falling back to a discovered layer list (resid_pre / resid_post only).
    """

    backend = "nnsight"
    makes_head_sites = True

    def __init__(
        self,
        model: Any,
        *,
        tokenizer: Any = None,
        model_id: str | None = None,
        architecture: str | ArchitectureTable | None = None,
        processor: Any = None,
    ) -> None:
        self._module, envoy = traceable(model)
        #: A Hugging Face processor that turns images (and texts) into model inputs.
        self.processor = processor if processor is not None else getattr(model, "processor", None)
        tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
        if tokenizer is None:  # a VLM's tokenizer comes with its processor
            tokenizer = getattr(self.processor, "tokenizer", None)
        self._tokenizer = tokenizer
        self._execution_orders: dict[tuple[str, ...], ExecutionOrder] = {}
        self.config = getattr(self._module, "config", None)
        super().__init__(
            model_id or getattr(self.config, "name_or_path", None) or type(self._module).__name__
        )
        self._envoy = envoy if envoy is not None else quiet_envoy(self._module)

        base = getattr(self._module, "base_model", self._module)
        language = language_model_of(base, self.config) if architecture is None else None
        if language is not None:  # a VLM: canonical names are its language model's
            base, self.config = language
        self._base_path = path_in(self._module, base)
        if isinstance(architecture, ArchitectureTable):
            self.table = architecture
        elif architecture is not None:
            self.table = table_named(architecture)
        else:
            self.table = table_for_config(self.config) or _discovered(base, self.config)
        self.table.check_config(self.config)
        self._n_layers = self._count_layers() if self.table.block else 0
        self._sites = self._offered_sites()
        self._forward_order = {site: i for i, site in enumerate(self._sites)}
        for site in self._sites:
            if is_module_site(site) or site == LOGITS_SITE:
                continue
            if layer_of(site) in (None, 0):  # a wrong table fails here, not mid-trace
                self._submodule(self._site_path(site))
        # Hooks the model already carried, and those transformers installs for good the first
        # time hidden states are asked for (a VLM's forward asks its vision tower on every
        # first pass), are not ours to count.
        self._foreign_hooks = count_torch_hooks(self._module) - transformers_hooks(self._module)

    # -- what the model offers ---------------------------------------------------------------
    @property
    def is_causal_lm(self) -> bool:
        return self.config is not None and is_decoder(self.config)

    def transformer_blocks(self) -> torch.nn.Module | None:
        model = self.model
        return getattr(model, "base_model", model).get_submodule(self.table.layers)

    @property
    def model(self) -> torch.nn.Module:
        """The torch module traced (a weight-sharing twin of a plain module handed in)."""
        return self._module

    @property
    def n_layers(self) -> int:
        return self._n_layers

    @property
    def device(self) -> torch.device:
        first = next(itertools.chain(self._module.parameters(), self._module.buffers()), None)
        return first.device if first is not None else torch.device("cpu")

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def sites(self) -> list[str]:
        return list(self._sites)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "architecture": self.table.family,
            "positions": self.table.positions,
            "model_type": getattr(self.config, "model_type", None),
            "numerics": NUMERICS,
            "model_class": type(self._module).__name__,
        }

    def _offered_sites(self) -> list[str]:
        sites = [EMBED_SITE] if self.table.embed is not None else []
        per_block = self.table.block_sites(self.config)
        for layer in range(self._n_layers):
            sites.extend(f"blocks.{layer}.{name}" for name in per_block)
        if not sites:  # no canonical names (a CNN, any torch module): every module is a site
            sites.extend(module_sites(self._module))
        if self.has_lm_head:
            sites.append(LOGITS_SITE)
        return sites

    def module_sites(self) -> list[str]:
        """Every ``module:PATH`` site of the model: the output of each submodule."""
        return module_sites(self._module)

    def resolve_site(self, site: str) -> str:
        if is_module_site(site):
            check_module_site(self._module, site, self.model_id)
            return site
        return super().resolve_site(site)

    def _count_layers(self) -> int:
        if self.table.shared_block:  # one module run once per layer
            self._submodule(join_path(self._base_path, self.table.layers))
            return configured_layer_count(self.config) or 0
        layers = self._submodule(join_path(self._base_path, self.table.layers))
        return len(cast(torch.nn.ModuleList, layers))  # the layer stack: a ModuleList

    def residual_layout(self) -> str | None:
        """How the sub-layer sites compose: ``"sequential"`` (resid_pre + attn_out = resid_mid,
        resid_mid + mlp_out = resid_post), ``"parallel"`` (resid_pre + attn_out + mlp_out =
        resid_post), ``"post_ln"`` (normalised sums), or None when the table does not say."""
        if self.table.post_ln:
            return "post_ln"
        if "hook_resid_mid" in self.table.block_sites(self.config):
            return "sequential"
        return "parallel" if self.table.parallel else None

    def refused_sites(self) -> dict[str, str]:
        refused = {}
        if self.table.embed is None:
            refused[EMBED_SITE] = self.table.note or "the token embedding was not located"
        reasons = self.table.block_refusals(self.config)
        for layer in range(self._n_layers):
            refused.update({f"blocks.{layer}.{name}": why for name, why in reasons.items()})
        if not self.has_lm_head:
            refused[LOGITS_SITE] = "the model has no LM head (get_output_embeddings() is None)"
        return refused

    @property
    def has_lm_head(self) -> bool:
        """Whether the model maps the residual stream to vocabulary logits (``logits`` site)."""
        get = getattr(self._module, "get_output_embeddings", None)
        return callable(get) and get() is not None

    def _site_path(self, site: str) -> str:
        relative, _ = self.table.locate(site)
        return join_path(self._base_path, relative)

    def _submodule(self, path: str) -> torch.nn.Module:
        try:
            return self._module.get_submodule(path)
        except AttributeError as error:
            raise ValueError(
                f"The {self.table.family!r} architecture table expects a module at {path!r}, "
                f"which a {type(self._module).__name__} does not have; pass architecture= "
                "with the right family."
            ) from error

    def _envoy_at(self, path: str) -> Envoy:
        """The envoy of the module at a torch path.

        nnsight serves ``.output`` / ``.input`` on every envoy, so a submodule *named* ``output``
        (BERT has several) is mounted under ``Envoy.OVERLOAD_PREFIX + name`` instead.
        """
        envoy: Envoy = self._envoy
        for part in filter(None, path.split(".")):
            if inspect.isdatadescriptor(getattr(Envoy, part, None)):
                part = Envoy.OVERLOAD_PREFIX + part
            envoy = getattr(envoy, part)
        return envoy

    # -- the forward pass ----------------------------------------------------------------------
    def _plan(self, sites: Sequence[str]) -> list[_Location]:
        """The locations holding ``sites``, in forward order, each read once."""
        locations: dict[tuple[str, str, int, int], _Location] = {}
        for site in sorted(set(sites), key=self._forward_order.__getitem__):
            if site == LOGITS_SITE:
                # The whole model's output, so that whatever the head does after its output
                # projection (Gemma 2's soft-capping, Cohere's logit scale) is included.
                locations[("", "output", 0, 0)] = _Location("", "output", 0, [site], "logits")
                continue
            _, read = self.table.locate(site)
            call = (layer_of(site) or 0) if self.table.shared_block else 0
            key = (self._site_path(site), read.port, read.tuple_index, call)
            location = locations.setdefault(
                key,
                _Location(
                    key[0], read.port, read.tuple_index, call=call, flat_tokens=read.flat_tokens
                ),
            )
            location.sites.append(site)
        return list(locations.values())

    def _forward_kwargs(self, inputs: ModelInputs) -> dict[str, Any]:
        self._batch_shape = tuple(inputs.attention_mask.shape)  # for flat-token modules
        if inputs.extra:  # pixel values, named tensors, a processor's multimodal inputs
            forward = type(self._module).forward
            dtype = next(self._module.parameters(), torch.empty(0)).dtype
            return forward_kwargs(inputs.to(self.device), forward, self.model_id, dtype)
        if inputs.input_ids is None:
            raise ValueError(
                f"Model {self.model_id!r} needs token ids; this batch holds none (recorded data?)."
            )
        inputs = inputs.to(self.device)
        accepted = inspect.signature(type(self._module).forward).parameters
        kwargs: dict[str, Any] = {
            "input_ids": inputs.input_ids,
            "attention_mask": inputs.attention_mask.long(),
        }
        # Explicit positions, counted over real tokens: models with absolute positions otherwise
        # number a left-padded example's tokens from the first pad.
        if "position_ids" in accepted and self.table.positions != "none":
            kwargs["position_ids"] = self._position_ids(inputs)
        if "use_cache" in accepted:
            kwargs["use_cache"] = False
        return kwargs

    def _position_ids(self, inputs: ModelInputs) -> torch.Tensor:
        """Positions counted over real tokens, numbered as the family numbers them."""
        mask = inputs.attention_mask
        positions = (
            inputs.position_ids if inputs.position_ids is not None else position_ids_from_mask(mask)
        )
        if self.table.positions == "after_padding_idx":
            pad = self.table.padding_idx
            if pad is None:
                pad = getattr(self.config, "pad_token_id", None)
            if pad is None:
                raise ValueError(
                    f"The {self.table.family!r} family numbers positions from padding_idx + 1, "
                    f"but the config of {self.model_id!r} has no pad_token_id to read it from."
                )
            positions = numbered_positions(positions, mask, first=pad + 1, pad=pad)
        return positions

    def _visit(
        self,
        tracer: Any,
        plan: list[_Location],
        wanted: set[str],
        edits: list[tuple[str, EditFn]],
        captured: dict[str, torch.Tensor],
    ) -> None:
        """Run inside the trace: read each location as the model reaches it, edit, capture."""
        for location in plan:
            if location.call:
                # A later call of a shared module: pin nnsight's occurrence counter to it.
                for _ in tracer.iter[location.call]:
                    self._visit_location(location, wanted, edits, captured)
            else:
                self._visit_location(location, wanted, edits, captured)

    def _visit_location(
        self,
        location: _Location,
        wanted: set[str],
        edits: list[tuple[str, EditFn]],
        captured: dict[str, torch.Tensor],
    ) -> None:
        """Read one location, apply the edits at its sites, capture, write back if edited."""
        envoy = self._envoy_at(location.path)
        value = envoy.output if location.port == "output" else envoy.input
        is_tuple = location.port == "output" and isinstance(value, tuple)
        if location.attribute is not None:
            original = getattr(value, location.attribute)
        elif location.whole_output:
            original = first_tensor(value, location.path)
        else:
            original = value[location.tuple_index] if is_tuple else value
        # A module that sees tokens flattened to [B*T, d] (OPT's MLP) is read as [B, T, d].
        flat = location.flat_tokens and original.dim() == 2
        if flat:
            original = original.view(*self._batch_shape, -1)
        activation = original
        for site in location.sites:
            for edit_site, edit in edits:
                if edit_site == site:
                    activation = checked_edit(edit, activation, site)
            if site in wanted:
                captured[site] = activation.detach().clone()
        if activation is original:
            return
        if flat:
            activation = activation.reshape(-1, activation.shape[-1])
        if location.attribute is not None:
            setattr(value, location.attribute, activation)
            envoy.output = value
        elif location.whole_output:
            envoy.output = with_first_tensor(value, activation)
        elif location.port == "input":
            envoy.input = activation
        elif is_tuple:
            i = location.tuple_index
            envoy.output = (*value[:i], activation, *value[i + 1 :])
        else:
            envoy.output = activation

    def capture(self, inputs: ModelInputs, sites: Sequence[str]) -> dict[str, torch.Tensor]:
        """One forward pass; ``{site: activation}`` as it flows on, i.e. after active edits."""
        wanted = [self.resolve_site(site) for site in dict.fromkeys(sites)]
        if not wanted:
            return {}
        if any(site in HEAD_SITES for site in wanted):
            return self._capture_scored(inputs, wanted)
        order = self._forward_order
        if any(map(is_module_site, [*wanted, *(site for site, _ in self.active_edits)])):
            return self._capture_in_execution_order(inputs, wanted)
        last = max(order[site] for site in wanted)
        # An edit after the last wanted site cannot change what is captured; the pass stops there.
        edits = [(site, edit) for site, edit in self.active_edits if order[site] <= last]
        plan = self._plan([*wanted, *(site for site, _ in edits)])
        kwargs = self._forward_kwargs(inputs)
        wanted_set = set(wanted)
        captured: dict[str, torch.Tensor] = {}
        with eval_mode(self._module), torch.no_grad(), self._envoy.trace(**kwargs) as tracer:
            self._visit(tracer, plan, wanted_set, edits, captured)
            tracer.stop()  # nothing after the last site is needed (e.g. the LM head)
        return _per_example_rows(inputs, {site: captured[site] for site in wanted})

    def _capture_scored(self, inputs: ModelInputs, wanted: list[str]) -> dict[str, torch.Tensor]:
        """A capture with :data:`~geomlens.hooks.sites.HEAD_SITES`: the LM head's input read in
        the pass and reduced chunk by chunk (:func:`~geomlens.models.next_token.head_sites`), the
        pass stopped before the head makes [B, T, vocab]. From the full logits instead when they
        are in the pass anyway (asked for, edited) or other sites need the execution order."""
        reduced = [site for site in wanted if site in HEAD_SITES]
        others = [site for site in wanted if site not in HEAD_SITES]
        edit_sites = [site for site, _ in self.active_edits]
        if (
            LOGITS_SITE in others
            or LOGITS_SITE in edit_sites
            or any(map(is_module_site, [*others, *edit_sites]))
        ):
            full = self.capture(inputs, list(dict.fromkeys([*others, LOGITS_SITE])))
            logits = full[LOGITS_SITE] if LOGITS_SITE in others else full.pop(LOGITS_SITE)
            full.update(
                head_sites(lambda x: x, logits, inputs.input_ids, inputs.attention_mask, reduced)
            )
            return {site: full[site] for site in wanted}
        head = cast("torch.nn.Module", self._module.get_output_embeddings())  # type: ignore[operator]
        head_path = next(name for name, module in self._module.named_modules() if module is head)
        after = post_head(self.config)

        def apply_head(hidden: torch.Tensor) -> torch.Tensor:
            logits = type(head).forward(head, hidden)  # the module's own forward, not traced
            return after(logits) if after is not None else logits

        edits = list(self.active_edits)
        plan = self._plan([*others, *(site for site, _ in edits)])
        kwargs = self._forward_kwargs(inputs)
        captured: dict[str, torch.Tensor] = {}
        with eval_mode(self._module), torch.no_grad(), self._envoy.trace(**kwargs) as tracer:
            self._visit(tracer, plan, set(others), edits, captured)
            hidden = self._envoy_at(head_path).input
            captured.update(
                head_sites(apply_head, hidden, inputs.input_ids, inputs.attention_mask, reduced)
            )
            tracer.stop()  # the head's [B, T, vocab] is never made
        return {site: captured[site] for site in wanted}

    # -- module-path sites ---------------------------------------------------------------------
    def _location_of(self, site: str) -> _Location:
        if is_module_site(site):
            return _Location(module_path(site), "output", 0, whole_output=True)
        location = self._plan([site])[0]
        location.sites.clear()
        return location

    def _execution_order(self, kwargs: dict[str, Any]) -> ExecutionOrder:
        """The measured order of module inputs and outputs, one probe pass per input kind."""
        key = tuple(sorted(kwargs))
        if key not in self._execution_orders:
            with eval_mode(self._module), torch.no_grad():
                self._execution_orders[key] = record_execution_order(
                    self._module, lambda: self._module(**kwargs)
                )
        return self._execution_orders[key]

    def _capture_in_execution_order(
        self, inputs: ModelInputs, wanted: list[str]
    ) -> dict[str, torch.Tensor]:
        """A capture involving ``module:PATH`` sites, whose order no table gives: locations are
        read in the order a probe pass measured (see :mod:`geomlens.models.module_sites`)."""
        kwargs = self._forward_kwargs(inputs)
        execution = self._execution_order(kwargs)
        edit_sites = [site for site, _ in self.active_edits]
        for site in {*wanted, *edit_sites}:
            if is_module_site(site):
                execution.check_single_call(module_path(site), self.model_id)

        def step(site: str) -> tuple[int, int]:
            location = self._location_of(site)
            position = execution.position(location.path, location.port, self.model_id)
            return position, self._forward_order.get(site, 0)

        last = max(step(site) for site in wanted)[0]
        edits = [(site, edit) for site, edit in self.active_edits if step(site)[0] <= last]
        locations: dict[tuple[Any, ...], _Location] = {}
        for site in sorted({*wanted, *(site for site, _ in edits)}, key=step):
            location = self._location_of(site)
            key = (location.path, location.port, location.tuple_index, location.attribute)
            locations.setdefault(key, location).sites.append(site)
        captured: dict[str, torch.Tensor] = {}
        with eval_mode(self._module), torch.no_grad(), self._envoy.trace(**kwargs) as tracer:
            self._visit(tracer, list(locations.values()), set(wanted), edits, captured)
            tracer.stop()
        return _per_example_rows(inputs, {site: captured[site] for site in wanted})

    # -- safety ------------------------------------------------------------------------------
    def hook_count(self) -> int:
        """Torch hooks on the model beyond those it carried when attached (nnsight 0.8 itself
        registers none; its controllers are module ``forward``s, inert outside a trace)."""
        total = count_torch_hooks(self._module) - transformers_hooks(self._module)
        return total - self._foreign_hooks


def _discovered(base: torch.nn.Module, config: Any) -> ArchitectureTable:
    """A discovered residual-stream table, or none at all (module-path sites only) for a model
    whose blocks cannot be found: a CNN, any plain torch module."""
    try:
        return discover_table(base, config)
    except ValueError:
        return module_sites_table(type(base).__name__)


def _per_example_rows(
    inputs: ModelInputs, captured: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """A tokenless batch (images, tensors) gets one flattened row per example (tensor_inputs)."""
    if inputs.input_ids is not None:
        return captured
    return {site: one_row_per_example(activation) for site, activation in captured.items()}

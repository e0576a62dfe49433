"""The TransformerLens backend: HookedTransformer, TransformerBridge, and HF modules wrapped as bridges.

Either TransformerLens line, whichever is installed: 3.x (HookedTransformer and TransformerBridge)
or 4.x (TransformerBridge only), with the same site names and the same numbers. Nothing imports
this module, hence TransformerLens, until the backend is asked for; without TransformerLens,
importing it raises one ImportError that names the extra to install.

Sites are read at TransformerLens HookPoints. A canonical name resolves to the HookPoint that
TransformerLens registers under it (the bridge's aliases, e.g. ``blocks.0.hook_resid_pre`` for
``blocks.0.hook_in``, are the same HookPoint), except where TransformerLens's hook of that name
holds another tensor than geomlens's definition, which is the same for every architecture and
backend:

- ``hook_embed``: the token embedding lookup, before positions and any embedding norm;
- ``blocks.L.hook_resid_pre`` / ``hook_resid_post``: the block's input / output (for a model
  with a final norm, ``hook_resid_post`` of the last block is before that norm);
- ``blocks.L.hook_attn_out`` / ``hook_mlp_out``: a sublayer's output before it is added back;
- ``blocks.L.hook_resid_mid``: the residual stream between the sublayers as the MLP reads it
  (for post-LayerNorm BERT, the attention LayerNorm's output);
- ``blocks.L.mlp.hook_pre`` / ``hook_post``: the MLP's hidden layer before / after activation.

:data:`SITE_OVERRIDES` lists those exceptions as data. Building a bridge around an HF module
(``build_bridge_from_module``, whose docstring says it never mutates the model) replaces the
module's blocks with bridge wrappers in place and renames its state-dict keys (TransformerLens
3.9, measured), so :meth:`TransformerLensAdapter.from_hf` copies the module unless told not to.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

import torch

from geomlens.models.optional import missing_extra

try:
    import transformer_lens  # noqa: F401  (only to name the extra when it is missing)
except ModuleNotFoundError as missing:
    raise missing_extra(missing) from None
from transformer_lens.factories.architecture_adapter_factory import SUPPORTED_ARCHITECTURES
from transformer_lens.hook_points import HookPoint
from transformer_lens.HookedRootModule import HookedRootModule
from transformer_lens.model_bridge import TransformerBridge
from transformer_lens.model_bridge.architecture_adapter import ArchitectureAdapter
from transformer_lens.model_bridge.sources._bridge_builder import build_bridge_from_module
from transformer_lens.model_bridge.sources.transformers import (
    determine_architecture_from_hf_config,
)
from transformers import PreTrainedModel

from geomlens.hooks.hook_points import hooks_added as _hooks_added
from geomlens.hooks.sites import HEAD_SITES
from geomlens.inputs.encoding import ModelInputs, position_ids_from_mask
from geomlens.models.adapter import (
    LOGITS_SITE,
    Adapter,
    EditFn,
    canonical_sites,
    checked_edit,
    count_torch_hooks,
    eval_mode,
)
from geomlens.models.architectures import MOE_REASON
from geomlens.models.config_fields import EXPERT_COUNT_FIELDS, POSITION_FIELDS, first_field
from geomlens.models.config_kinds import is_decoder
from geomlens.models.next_token import head_sites, post_head

#: The model classes the installed TransformerLens line offers: 3.x has HookedTransformer and
#: TransformerBridge; 4.0 removed HookedTransformer (its name then stays in annotations only).
try:
    from transformer_lens.HookedTransformer import HookedTransformer
except ModuleNotFoundError:
    MODEL_CLASSES: tuple[type, ...] = (TransformerBridge,)
else:
    MODEL_CLASSES = (HookedTransformer, TransformerBridge)

#: Where TransformerLens's hook of a canonical name holds another tensor than geomlens's
#: definition (module docstring): the hook to read instead, keyed by the bridge's architecture
#: adapter class. ``{layer}`` stands for the block index.
SITE_OVERRIDES: dict[str, dict[str, str]] = {
    # Post-LN BERT: TransformerLens's hook_embed is the normalised sum of token, position and
    # type embeddings; its attn_out is BertAttention's output, i.e. LayerNorm(x + attention);
    # its resid_mid is the sum x' + mlp before the second LayerNorm.
    "BertArchitectureAdapter": {
        "hook_embed": "embed.hook_out",
        "blocks.{layer}.hook_attn_out": "blocks.{layer}.attn.o.hook_out",
        "blocks.{layer}.hook_resid_mid": "blocks.{layer}.ln1.hook_out",
    },
    # BLOOM normalises the token embedding (word_embeddings_layernorm); TransformerLens's
    # hook_embed is after that norm, ours the lookup before it.
    "BloomArchitectureAdapter": {"hook_embed": "embed.hook_out"},
}

#: Bridges of post-LayerNorm models, whose sub-layer sites do not add up.
POST_LN_BRIDGES = frozenset({"BertArchitectureAdapter"})

#: The installed TransformerLens line (3 or 4): what the bridges can do differs between them.
TL_MAJOR = int(version("transformer-lens").split(".")[0])

#: Architectures whose TransformerLens bridge computes other numbers than the model itself:
#: refused at attach, with the measurement. (Measured on tiny seeded models, TransformerLens
#: 3.9 and 4.3 / transformers 5: see docs/architectures.md.)
#: Keyed by bridge adapter class: (the Hugging Face config values it is refused for, all of
#: which must match, none meaning always; the reason).
REFUSED_BRIDGES: dict[str, tuple[dict[str, Any], str]] = {
    # Fails on 3.9 and 4.3 alike.
    "OptArchitectureAdapter": (
        {"do_layer_norm_before": False},
        "TransformerLens's OPT bridge fails in the forward pass of a post-LayerNorm OPT "
        "(do_layer_norm_before=False, as OPT-350m)",
    ),
}
if TL_MAJOR < 4:
    # TransformerLens 4.3's Cohere bridge equals the model (block inputs within 4e-9 on the
    # same tiny model): refused on 3.x only.
    REFUSED_BRIDGES["CohereArchitectureAdapter"] = (
        {},
        "TransformerLens's Cohere bridge differs from the model's own forward (block inputs "
        "off by ~1e-4 on a tiny model, far above float32 round-off), so its numbers cannot be "
        "trusted",
    )


def _identity(logits: torch.Tensor) -> torch.Tensor:
    return logits


class _StopForward(Exception):
    """Raised from the last hook that still had something to capture: the rest of the forward
    pass cannot change what was captured, so it is not run."""


@dataclass
class _Tap:
    """What happens at one HookPoint during a capture: edits in order, then captures."""

    hook_point: HookPoint
    edits: list[tuple[str, EditFn]] = field(default_factory=list)
    capture_as: list[str] = field(default_factory=list)


def _tap_hook(
    key: int,
    tap: _Tap,
    captured: dict[str, torch.Tensor],
    pending: set[int],
    stop: bool,
) -> Callable[[torch.Tensor, HookPoint], torch.Tensor]:
    """The hook of one tap: its edits in order, then its captures; once no tap is pending and
    ``stop``, it ends the pass (:class:`_StopForward`)."""

    def hook(activation: torch.Tensor, hook: HookPoint) -> torch.Tensor:
        for site, edit in tap.edits:
            activation = checked_edit(edit, activation, site)
        for site in tap.capture_as:
            # A copy: a later edit may change this tensor in place.
            captured[site] = activation.detach().clone()
        pending.discard(key)
        if not pending and stop:
            raise _StopForward
        return activation

    return hook


class TransformerLensAdapter(Adapter):
    """A HookedTransformer or TransformerBridge seen through geomlens's Adapter protocol."""

    backend = "transformer-lens"
    makes_head_sites = True

    def __init__(
        self,
        model: HookedTransformer | TransformerBridge,
        *,
        tokenizer: Any = None,
        model_id: str | None = None,
    ) -> None:
        if not isinstance(model, MODEL_CLASSES):
            kind = "TransformerLens model" if isinstance(model, HookedRootModule) else "model"
            runs = " and ".join(cls.__name__ for cls in MODEL_CLASSES)
            raise TypeError(
                f"The TransformerLens backend (transformer-lens {_tl_version()}) runs {runs} "
                f"models; got a {kind} of type {type(model).__name__}. Wrap a Hugging Face module "
                "with TransformerLensAdapter.from_hf(model), or attach it with backend='nnsight'."
            )
        if isinstance(model, TransformerBridge):
            when, reason = REFUSED_BRIDGES.get(type(model.adapter).__name__, (None, ""))
            hf_config = getattr(getattr(model, "original_model", None), "config", None)
            if when is not None and all(
                getattr(hf_config, key, None) == value for key, value in when.items()
            ):
                raise ValueError(
                    f"{reason}. Attach this model with the nnsight backend instead: "
                    "gl.attach(model, backend='nnsight') or --backend nnsight."
                )
        super().__init__(model_id or str(getattr(model.cfg, "model_name", type(model).__name__)))
        self.model = model
        self._tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
        #: Set by from_hf: the wrapped HF class and whether the module was copied first.
        self.wrapped_from: dict[str, Any] | None = None
        #: Set by from_hf when it bridged a copy: the user's module, as it was.
        self.reference_module: torch.nn.Module | None = None
        #: Set by from_hf when it bridged the module itself: the fingerprint of its weights
        #: before and after bridging (see :func:`geomlens.models.fingerprint.weights_fingerprint`).
        self.source_fingerprint: tuple[str, str] | None = None

    # -- building from Hugging Face ------------------------------------------------------------
    @classmethod
    def from_hf(
        cls,
        hf_model: torch.nn.Module,
        tokenizer: Any = None,
        *,
        model_id: str | None = None,
        copy_model: bool = True,
    ) -> TransformerLensAdapter:
        """Wrap a Hugging Face model in a TransformerBridge, offline.

        Building a bridge rewires the module in place, so it is deep-copied first unless
        ``copy_model=False`` (then ``hf_model`` belongs to the bridge afterwards). A model whose
        class TransformerLens does not bridge itself (``BertModel``, ``GPT2Model``, a
        classification head) is bridged through its base model with the adapter of its family.
        """
        config = getattr(hf_model, "config", None)
        if config is None:
            raise TypeError(
                f"A {type(hf_model).__name__} has no Hugging Face config, so TransformerLens "
                "cannot bridge it; attach it with backend='nnsight'."
            )
        architecture, module, base_prefix = _bridge_target(hf_model)
        if copy_model:
            module = copy.deepcopy(module)
        else:  # the bridge rewrites the module: its weights' identity is taken before
            from geomlens.models.fingerprint import module_tensors, tensors_fingerprint

            before = tensors_fingerprint(module_tensors(hf_model))
        # No tokenizer for TransformerLens: its set-up edits the tokenizer (pad, BOS, padding
        # side) and may reload it by name; geomlens tokenises and pads on its own.
        try:
            bridge = build_bridge_from_module(
                module,
                architecture,
                hf_config=config,
                post_adapter_hook=None
                if base_prefix is None
                else _reroot_on_base_model(base_prefix),
            )
        except (RuntimeError, AttributeError, KeyError, IndexError, TypeError) as error:
            # TransformerLens's adapter for the family does not fit this config (e.g. Falcon's
            # new decoder architecture with grouped key/value heads; TransformerLens 4 refuses a
            # bridge with no hook point, a T5 encoder's, with a TypeError): say so, name the
            # way out.
            raise ValueError(
                f"TransformerLens {_tl_version()} could not bridge this {type(hf_model).__name__} "
                f"({type(error).__name__}: {error}). Attach it with the nnsight backend "
                "instead: gl.attach(model, backend='nnsight')."
            ) from error
        adapter = cls(
            bridge,
            tokenizer=tokenizer,
            model_id=model_id or getattr(config, "name_or_path", None) or type(hf_model).__name__,
        )
        if not adapter.hook_points():
            raise ValueError(
                f"TransformerLens {_tl_version()} bridges a {type(hf_model).__name__} with no "
                "canonical site at all (its bridge maps blocks this model does not have), so "
                "there is nothing to read. Attach it with the nnsight backend instead: "
                "gl.attach(model, backend='nnsight')."
            )
        # The user's own module, untouched (the bridge wraps a copy): conformance's referee.
        adapter.reference_module = hf_model if copy_model else None
        if not copy_model:
            from geomlens.models.fingerprint import weights_fingerprint

            adapter.source_fingerprint = (before, weights_fingerprint(adapter))
        adapter.wrapped_from = {
            "hf_class": type(hf_model).__name__,
            "bridged_module": type(module).__name__,
            "module_copied": copy_model,
        }
        return adapter

    # -- what the model offers -----------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        return int(self.model.cfg.n_layers)

    @property
    def device(self) -> torch.device:
        first = next(self.model.parameters(), None)
        return first.device if first is not None else torch.device("cpu")

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def is_bridge(self) -> bool:
        return isinstance(self.model, TransformerBridge)

    @property
    def is_hooked_transformer(self) -> bool:
        return not self.is_bridge

    @property
    def max_positions(self) -> int | None:
        return first_field(self.model.cfg, POSITION_FIELDS)

    @property
    def hf_config(self) -> Any:
        """The bridged model's Hugging Face config (None for a HookedTransformer)."""
        if not self.is_bridge:
            return None
        return getattr(getattr(self.model, "original_model", None), "config", None)

    @property
    def is_causal_lm(self) -> bool:
        """Decided from the model's config as on every backend (an encoder bridged through
        TransformerLens is not a causal LM though its bridge offers logits); a
        HookedTransformer is a causal LM."""
        if not self.is_bridge:
            return True
        config = self.hf_config
        return config is not None and is_decoder(config)

    def transformer_blocks(self) -> torch.nn.Module | None:
        # A TransformerBridge wraps Hugging Face blocks; a HookedTransformer's are its own.
        return self.model.blocks if self.is_bridge else None

    def _overrides(self) -> dict[str, str]:
        if not self.is_bridge:
            return {}
        return SITE_OVERRIDES.get(type(self.model.adapter).__name__, {})

    def hook_points(self) -> dict[str, HookPoint]:
        """Each canonical site this model offers, with the HookPoint that holds it."""
        points, _ = self._points_and_refusals()
        return points

    def _points_and_refusals(self) -> tuple[dict[str, HookPoint], dict[str, str]]:
        # Read afresh each time: enable_compatibility_mode() rebuilds the bridge's registry.
        hook_dict = self.model.hook_dict
        renamed = {
            site.format(layer=layer): hook.format(layer=layer)
            for site, hook in self._overrides().items()
            for layer in range(self.n_layers)
        }
        cfg = self.model.cfg
        refused: dict[str, str] = {}
        if self.is_mixture_of_experts:
            # TransformerLens's MoE hook_pre / hook_post hold the MLP's input and output.
            for layer in range(self.n_layers):
                refused[f"blocks.{layer}.mlp.hook_pre"] = MOE_REASON
                refused[f"blocks.{layer}.mlp.hook_post"] = MOE_REASON
        points = {}
        for site in canonical_sites(self.n_layers):
            name = renamed.get(site, site)
            if site in refused:
                continue
            if getattr(cfg, "attn_only", False) and ("mlp" in site):
                # An attention-only HookedTransformer still registers hook_mlp_out, never fired.
                refused[site] = "an attention-only model has no MLP"
            elif name in hook_dict:
                points[site] = hook_dict[name]
            elif site.endswith("hook_resid_mid") and getattr(cfg, "parallel_attn_mlp", False):
                refused[site] = (
                    "parallel residual: attention and MLP read the same input, so no hook_resid_mid"
                )
            else:
                refused[site] = f"TransformerLens registers no hook {name!r} for this model"
        if not self.has_lm_head:
            refused[LOGITS_SITE] = "the bridged model has no LM head (no unembed component)"
        return points, refused

    def residual_layout(self) -> str | None:
        """How the sub-layer sites compose (see :meth:`NNsightAdapter.residual_layout`)."""
        if self.is_bridge and type(self.model.adapter).__name__ in POST_LN_BRIDGES:
            return "post_ln"
        if "blocks.0.hook_resid_mid" in self.hook_points():
            return "sequential"
        return "parallel" if getattr(self.model.cfg, "parallel_attn_mlp", False) else None

    @property
    def is_mixture_of_experts(self) -> bool:
        cfg = self.model.cfg
        return any((getattr(cfg, name, None) or 0) > 1 for name in EXPERT_COUNT_FIELDS)

    def refused_sites(self) -> dict[str, str]:
        _, refused = self._points_and_refusals()
        return refused

    @property
    def has_lm_head(self) -> bool:
        """Whether the forward pass ends in vocabulary logits (the ``logits`` site): always for a
        HookedTransformer, for a bridge when it kept its ``unembed`` (a bridged bare base model
        such as ``BertModel`` or ``GPT2Model`` has none)."""
        if not self.is_bridge:
            return True
        return "unembed" in (getattr(self.model.adapter, "component_mapping", None) or {})

    def sites(self) -> list[str]:
        sites = list(self.hook_points())
        # Read from the forward's return value: HookedTransformer has no hook after its unembed,
        # and what the model returns is the definition of its logits.
        return [*sites, LOGITS_SITE] if self.has_lm_head else sites

    def describe(self) -> dict[str, Any]:
        cfg = self.model.cfg
        info = super().describe()
        info["model_class"] = type(self.model).__name__
        if self.is_bridge:
            info["architecture"] = cfg.architecture
            info["numerics"] = _bridge_numerics(self.model)
        else:
            info["architecture"] = getattr(cfg, "original_architecture", None)
            info["numerics"] = _hooked_transformer_numerics(cfg.normalization_type)
        info["normalization_type"] = cfg.normalization_type
        info["site_overrides"] = dict(self._overrides())
        info["wrapped_from"] = self.wrapped_from
        return info

    # -- the forward pass ----------------------------------------------------------------------
    def capture(self, inputs: ModelInputs, sites: Sequence[str]) -> dict[str, torch.Tensor]:
        if inputs.input_ids is None:
            raise ValueError(
                f"Model {self.model_id!r} needs token ids; these inputs carry none "
                "(they index recorded activations)."
            )
        points = self.hook_points()
        for site in sites:
            if site not in points:
                self.resolve_site(site)  # raises, naming the nearest valid site
        if not sites:
            return {}
        reduced = [site for site in sites if site in HEAD_SITES]
        logits_edited = any(site == LOGITS_SITE for site, _ in self.active_edits)
        # Made from the head's input unless the full logits are in the pass anyway (asked for,
        # or edited): then from those, by the same functions.
        from_head = bool(reduced) and LOGITS_SITE not in sites and not logits_edited
        wants_logits = LOGITS_SITE in sites or (bool(reduced) and not from_head)
        hooked_sites = [site for site in sites if site != LOGITS_SITE and site not in HEAD_SITES]
        taps = self._taps(points, hooked_sites)
        captured: dict[str, torch.Tensor] = {}
        pending = {key for key, tap in taps.items() if tap.capture_as}
        # The pass may end at the last capture only when nothing after it is wanted.
        stop = not wants_logits and not from_head
        hooks = [
            (tap.hook_point, _tap_hook(key, tap, captured, pending, stop))
            for key, tap in taps.items()
        ]
        inputs = inputs.to(self.device)
        # The bridge's module tree does not reach the wrapped HF model's own top-level modules.
        wrapped = getattr(self.model, "original_model", None)
        head_hook = (
            self._scoring_head_hook(inputs, reduced, captured)
            if from_head
            else contextlib.nullcontext()
        )
        with eval_mode(self.model, *([wrapped] if wrapped is not None else [])), torch.no_grad():
            try:
                with _hooks_added(hooks), head_hook:
                    # A HookedTransformer asked for no logits returns before its unembed.
                    logits = self._forward(inputs, wants_logits or from_head)
            except _StopForward:
                pass
            else:
                if from_head:
                    raise RuntimeError(
                        f"The forward pass of {self.model_id!r} never called its unembedding "
                        "module, so the next-token scores could not be made from its input."
                    )
                if wants_logits:
                    assert logits is not None  # the pass was asked for its logits
                    self._capture_logits(logits, inputs, sites, reduced, captured)
        missing = [site for site in sites if site not in captured]
        if missing:
            raise RuntimeError(
                f"The forward pass of {self.model_id!r} never reached {missing}; "
                "their hooks did not fire."
            )
        return {site: captured[site] for site in sites}

    def _taps(self, points: Mapping[str, HookPoint], hooked_sites: list[str]) -> dict[int, _Tap]:
        """One tap per HookPoint touched: the active edits at it (logits' edits are applied to
        the returned logits instead), then the sites captured there, each once."""
        taps: dict[int, _Tap] = {}
        for site, edit in self.active_edits:
            if site == LOGITS_SITE:
                continue  # applied to the returned logits
            hook_point = points[site]
            taps.setdefault(id(hook_point), _Tap(hook_point)).edits.append((site, edit))
        for site in dict.fromkeys(hooked_sites):
            hook_point = points[site]
            taps.setdefault(id(hook_point), _Tap(hook_point)).capture_as.append(site)
        return taps

    def _capture_logits(
        self,
        logits: torch.Tensor,
        inputs: ModelInputs,
        sites: Sequence[str],
        reduced: list[str],
        captured: dict[str, torch.Tensor],
    ) -> None:
        """Edit the returned logits, then make the ``reduced`` head sites and the logits site
        from them into ``captured``."""
        for site, edit in self.active_edits:
            if site == LOGITS_SITE:
                logits = checked_edit(edit, logits, site)
        captured.update(
            head_sites(_identity, logits, inputs.input_ids, inputs.attention_mask, reduced)
        )
        if LOGITS_SITE in sites:
            captured[LOGITS_SITE] = logits.detach().clone()

    def _scoring_head_hook(
        self, inputs: ModelInputs, reduced: list[str], captured: dict[str, torch.Tensor]
    ) -> contextlib.AbstractContextManager[Any]:
        """A pre-hook on the unembedding that makes the ``reduced`` sites from its input
        (:func:`~geomlens.models.next_token.head_sites`, chunk by chunk) and ends the pass
        there: the [B, T, vocab] logits are never made."""
        head = self.model.unembed
        config = self.model.cfg
        wrapped = getattr(self.model, "original_model", None)
        after = post_head(getattr(wrapped, "config", None) if wrapped is not None else config)

        def apply_head(hidden: torch.Tensor) -> torch.Tensor:
            logits = type(head).forward(head, hidden)  # its hooks (this one) not run again
            return after(logits) if after is not None else logits

        def score(module: torch.nn.Module, args: tuple[Any, ...]) -> None:
            captured.update(
                head_sites(apply_head, args[0], inputs.input_ids, inputs.attention_mask, reduced)
            )
            raise _StopForward

        @contextlib.contextmanager
        def installed() -> Iterator[None]:
            handle = head.register_forward_pre_hook(score)
            try:
                yield
            finally:
                handle.remove()

        return installed()

    def _forward(self, inputs: ModelInputs, logits: bool = False) -> torch.Tensor | None:
        mask = inputs.attention_mask.long()
        return_type = "logits" if logits else None
        if not self.is_bridge:
            # HookedTransformer derives positions (absolute and rotary) from the mask itself.
            return self.model(inputs.input_ids, attention_mask=mask, return_type=return_type)
        kwargs: dict[str, Any] = {"attention_mask": mask}
        if _bridge_takes_position_ids(self.model):
            positions = inputs.position_ids
            kwargs["position_ids"] = (
                position_ids_from_mask(mask) if positions is None else positions
            )
        return self.model(inputs.input_ids, return_type=return_type, **kwargs)

    # -- safety --------------------------------------------------------------------------------
    def hook_count(self) -> int:
        """Hooks on the model's HookPoints (where every hook of ours lives). The bridge's own
        wiring is part of the model, not counted: its hooks on the wrapped HF modules, and
        TransformerLens's permanent hooks on HookPoints (TransformerLens 4 ties a BERT bridge's
        MLP HookPoints together with them; geomlens never adds a permanent hook)."""
        unique = {id(hp): hp for hp in self.model.hook_dict.values()}
        return sum(count_torch_hooks(hp) - _permanent_hooks(hp) for hp in unique.values())


def _permanent_hooks(hook_point: HookPoint) -> int:
    return sum(handle.is_permanent for handle in (*hook_point.fwd_hooks, *hook_point.bwd_hooks))


def load_transformer_lens(
    name_or_path: str,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
    trust_remote_code: bool = False,
) -> TransformerLensAdapter:
    """Load a Hugging Face model by name or local path and bridge it.

    The class named in the config is loaded when TransformerLens bridges it; otherwise the bare
    model (``AutoModel``), e.g. MiniLM's ``BertModel``, which is bridged through its family's
    adapter without inventing a task head with random weights.
    """
    import transformers

    # Safe loading: no code from the model's files unless asked, and weights only from
    # safetensors or torch.load(weights_only=True) (a pickle carrying code is refused).
    safe = {"trust_remote_code": trust_remote_code}
    config = transformers.AutoConfig.from_pretrained(name_or_path, **safe)
    named = (getattr(config, "architectures", None) or [None])[0]
    model_class = getattr(transformers, named, None) if named in SUPPORTED_ARCHITECTURES else None
    hf_model = (model_class or transformers.AutoModel).from_pretrained(
        name_or_path, dtype=dtype, weights_only=True, **safe
    )
    if device is not None:
        hf_model = hf_model.to(device)
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(name_or_path, **safe)
    except OSError:
        tokenizer = None  # token ids still work; texts fail later with a clear message
    return TransformerLensAdapter.from_hf(
        hf_model, tokenizer, model_id=str(name_or_path), copy_model=False
    )


def _bridge_target(hf_model: torch.nn.Module) -> tuple[str, torch.nn.Module, str | None]:
    """(architecture adapter name, module to bridge, base-model prefix to re-root on or None)."""
    own_class = type(hf_model).__name__
    if own_class in SUPPORTED_ARCHITECTURES:
        return own_class, hf_model, None
    try:
        family = determine_architecture_from_hf_config(hf_model.config)
    except ValueError:
        family = None
    base_model = getattr(hf_model, "base_model", None)
    prefix = getattr(hf_model, "base_model_prefix", "")
    if family is None or base_model is None or not prefix:
        raise ValueError(
            f"TransformerLens {_tl_version()} has no TransformerBridge adapter for "
            f"{own_class} (model_type {getattr(hf_model.config, 'model_type', None)!r}). "
            "Attach this model with the nnsight backend instead: "
            "gl.attach(model, backend='nnsight')."
        )
    return family, base_model, prefix


def _reroot_on_base_model(prefix: str):
    """An adapter edit that bridges the bare base model: paths under ``prefix.`` lose it, and
    components outside the base model (the task head) are dropped."""

    def reroot(adapter: ArchitectureAdapter) -> None:
        mapping = adapter.component_mapping
        assert mapping is not None  # every bridge architecture adapter maps its components
        for key, component in list(mapping.items()):
            if component.name and component.name.startswith(prefix + "."):
                component.name = component.name[len(prefix) + 1 :]
            else:
                del mapping[key]

    return reroot


def _bridge_takes_position_ids(bridge: TransformerBridge) -> bool:
    # TransformerLens knows which wrapped models must derive positions themselves (mRoPE,
    # mask-driven positional embeddings, fixed-signature remote code); ask it, and pass
    # positions when a bridge version has no such check.
    check = getattr(bridge, "_accepts_derived_position_ids", None)
    return True if check is None else bool(check())


def _bridge_numerics(bridge: TransformerBridge) -> str:
    if getattr(bridge, "_weights_processed", False):
        return (
            "processed weights (TransformerLens compatibility mode: LayerNorm folded, "
            "writing weights centred)"
        )
    # Worded as the nnsight backend words it, so equal numerics compare equal across backends.
    source = "HF weights" if isinstance(bridge.original_model, PreTrainedModel) else "weights"
    mode = "TransformerLens compatibility mode, " if bridge.compatibility_mode else ""
    return f"raw {source} ({mode}no LayerNorm folding or weight processing)"


def _hooked_transformer_numerics(normalization_type: str | None) -> str:
    if normalization_type is None:
        return "HookedTransformer without LayerNorm"
    folded = "folded" if normalization_type.endswith("Pre") else "not folded"
    return f"HookedTransformer, LayerNorm {folded} ({normalization_type})"


def _tl_version() -> str:
    return version("transformer-lens")

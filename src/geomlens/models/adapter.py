"""The Adapter protocol: how every analysis touches a model, whatever the backend.

An adapter knows the model's canonical site names (TransformerLens hook names), turns a slice of
a :class:`~geomlens.data.Dataset` into :class:`ModelInputs`, runs **one** forward pass that
returns the activations at the requested sites, and applies interventions as context managers.
Every hook it adds is a handle removed in a ``finally``; after any exception the model has no
hook of ours and its parameters are unchanged.
"""

from __future__ import annotations

import contextlib
import difflib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import numpy as np
import torch

from geomlens.data.dataset import Dataset
from geomlens.hooks.sites import (  # noqa: F401  (also read from here: geomlens.models.adapter.EMBED_SITE)
    EMBED_SITE,
    HEAD_SITES,
    LAYER_SITE_TEMPLATES,
    LOGITS_SITE,
    canonical_sites,
    layer_of,
)
from geomlens.inputs.encoding import ModelInputs, PaddingSide, encode_texts, encode_token_ids
from geomlens.models.config_fields import POSITION_FIELDS, first_field

#: An edit applied at a site: takes the activation [B, T, ...] and returns its replacement.
EditFn = Callable[[torch.Tensor], torch.Tensor]


class UnknownSiteError(KeyError, ValueError):
    """A site name that the model does not have; the message lists valid names."""

    def __str__(self) -> str:  # KeyError would wrap the message in quotes
        return str(self.args[0])


def unknown_site_error(site: str, valid: Sequence[str], model_id: str) -> UnknownSiteError:
    nearest = difflib.get_close_matches(site, valid, n=1, cutoff=0.0)
    hint = f" Did you mean {nearest[0]!r}?" if nearest else ""
    layers = [layer for layer in map(layer_of, valid) if layer is not None]
    asked = layer_of(site)
    if asked is not None and layers and asked > max(layers):
        # A layer past the last one: say how many the model has, not only the nearest name.
        hint = f" The model has {max(layers) + 1} blocks (0..{max(layers)}).{hint}"
    shown = ", ".join(valid[:12]) + (", …" if len(valid) > 12 else "")
    return UnknownSiteError(
        f"Unknown site {site!r} for model {model_id!r}.{hint} Valid sites ({len(valid)}): {shown}"
    )


def count_torch_hooks(module: torch.nn.Module) -> int:
    """Number of forward/backward hooks registered on ``module`` and all its submodules."""
    total = 0
    for sub in module.modules():
        for attr in (
            "_forward_hooks",
            "_forward_pre_hooks",
            "_backward_hooks",
            "_backward_pre_hooks",
        ):
            total += len(getattr(sub, attr, {}) or {})
    return total


def checked_edit(edit: EditFn, activation: torch.Tensor, site: str) -> torch.Tensor:
    """Apply ``edit`` to the activation at ``site``; it must return a tensor of the same shape."""
    replaced = edit(activation)
    if not isinstance(replaced, torch.Tensor) or replaced.shape != activation.shape:
        got = tuple(replaced.shape) if isinstance(replaced, torch.Tensor) else type(replaced)
        raise ValueError(
            f"An edit at {site!r} must return a tensor of shape {tuple(activation.shape)}; "
            f"it returned {got}."
        )
    return replaced


@contextlib.contextmanager
def eval_mode(*models: torch.nn.Module) -> Iterator[None]:
    """No dropout for one pass. Only the modules in training mode are switched, one by one, and
    switched back after, so a user's mix of train/eval modules comes back exactly."""
    modules = {id(m): m for model in models for m in model.modules()}
    training = [m for m in modules.values() if m.training]
    for module in training:
        module.training = False
    try:
        yield
    finally:
        for module in training:
            module.training = True


class Adapter(ABC):
    """One model seen through one backend. Subclasses fill in the abstract methods."""

    #: Short backend name recorded in results: "transformer-lens", "nnsight" or "recorded".
    backend: str = ""
    #: The model's name as results record it (set by ``__init__``).
    model_id: str
    #: Where ``geomlens.load`` found the model (provenance), and whether it let the model's
    #: own code run; set by ``load``, absent on an adapter built by hand.
    model_source: dict[str, Any] | None = None
    trust_remote_code: bool = False

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id
        self._edits: list[tuple[str, EditFn]] = []

    # -- what the model offers ---------------------------------------------------------------
    @abstractmethod
    def sites(self) -> list[str]:
        """Canonical site names this model exposes, in forward order."""

    @property
    @abstractmethod
    def n_layers(self) -> int:
        """Number of transformer blocks (0 for recorded data without blocks)."""

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    @property
    def tokenizer(self) -> Any:
        return None

    #: Whether this adapter makes the reductions of the logits inside the pass
    #: (``geomlens.hooks.sites.HEAD_SITES``: next-token log-probabilities, the last token's
    #: logits) wherever it offers ``logits``.
    makes_head_sites: bool = False

    def resolve_site(self, site: str) -> str:
        """Check a site name; raise :class:`UnknownSiteError` naming the nearest valid one."""
        valid = self.sites()
        if site in HEAD_SITES and self.makes_head_sites and LOGITS_SITE in valid:
            return site  # a reduction of the logits, made inside the pass
        if site not in valid:
            reason = self.refused_sites().get(site)
            if reason:
                raise UnknownSiteError(
                    f"Site {site!r} is not offered for model {self.model_id!r}: {reason}. "
                    f"Offered sites ({len(valid)}): {', '.join(valid[:12])}"
                    + (", …" if len(valid) > 12 else "")
                )
            if site.startswith("module:"):
                raise UnknownSiteError(
                    f"Site {site!r} is a module path; module:PATH sites are read by the nnsight "
                    f"backend (gl.attach(model, backend='nnsight')), not by the {self.backend!r} "
                    f"one, which offers: {', '.join(valid[:12])}"
                    + (", …" if len(valid) > 12 else "")
                )
            raise unknown_site_error(site, valid, self.model_id)
        return site

    def module_sites(self) -> list[str]:
        """``module:PATH`` sites, the output of any submodule (docs/vision.md); only the nnsight
        backend reads them, so other backends have none."""
        return []

    def refused_sites(self) -> dict[str, str]:
        """Canonical sites this model does not offer, each with the reason (a mixture-of-experts
        block has no MLP hidden layer, a parallel block no resid_mid, ...)."""
        return {}

    def describe(self) -> dict[str, Any]:
        """Provenance recorded in every result (model id, backend, numerics mode, …)."""
        info = {"model_id": self.model_id, "backend": self.backend, "n_layers": self.n_layers}
        # Where gl.load found the weights, when a name stood for more than a folder (the
        # embedded causal LMs: a package's GGUF, dequantised, or the hub's original).
        source = getattr(self, "model_source", None)
        if source:
            info["model_source"] = source
        return info

    # -- inputs and the forward pass -----------------------------------------------------------
    def encode(
        self,
        dataset: Dataset,
        index: np.ndarray,
        *,
        padding_side: PaddingSide = "right",
        max_length: int | None = None,
    ) -> ModelInputs:
        """Turn rows ``index`` of ``dataset`` into one padded batch on this adapter's device."""
        if dataset.inputs:  # pixel values, any named tensor input, or images for a processor
            from geomlens.inputs.tensor_inputs import encode_named_inputs

            batch = encode_named_inputs(
                self, dataset, index, padding_side=padding_side, max_length=max_length
            )
            return batch.to(self.device)
        if dataset.texts is not None:
            texts = [dataset.texts[i] for i in index]
            inputs = encode_texts(
                self.tokenizer, texts, index, padding_side=padding_side, max_length=max_length
            )
        elif dataset.token_ids is not None:
            rows = [
                dataset.token_ids[i][:max_length] if max_length else dataset.token_ids[i]
                for i in index
            ]
            inputs = encode_token_ids(
                rows, index, pad_id=self.pad_token_id, padding_side=padding_side
            )
        else:
            raise ValueError(
                f"The dataset holds neither texts nor token ids, so model {self.model_id!r} "
                "cannot run on it; pass texts or token ids."
            )
        return inputs.to(self.device)

    @property
    def pad_token_id(self) -> int:
        tok = self.tokenizer
        if tok is not None:
            for attr in ("pad_token_id", "eos_token_id"):
                value = getattr(tok, attr, None)
                if value is not None:
                    return int(value)
        return 0

    @abstractmethod
    def capture(self, inputs: ModelInputs, sites: Sequence[str]) -> dict[str, torch.Tensor]:
        """Run one forward pass and return ``{site: activation [B, T, ...]}`` (detached).

        Active edits (from :meth:`intervene`) are applied during this pass.
        """

    # -- interventions ------------------------------------------------------------------------
    @contextlib.contextmanager
    def intervene(self, site: str, edit: EditFn) -> Iterator[None]:
        """Replace the activation at ``site`` by ``edit(activation)`` for forward passes run
        inside the ``with`` block. Edits stack in the order entered."""
        site = self.resolve_site(site)
        entry = (site, edit)
        self._edits.append(entry)
        try:
            yield
        finally:
            self._edits.remove(entry)

    def replace(self, site: str, value: torch.Tensor) -> contextlib.AbstractContextManager[None]:
        """Replace the activation at ``site`` by a fixed tensor (broadcast to its shape)."""
        return self.intervene(site, lambda act: value.to(act.dtype).expand_as(act))

    @property
    def active_edits(self) -> list[tuple[str, EditFn]]:
        return list(self._edits)

    def linearize(
        self,
        layers: int | Sequence[int] | str | Sequence[str],
        mode: str = "identity",
        calibration: Any = None,
    ) -> contextlib.AbstractContextManager[Any]:
        """Replace the MLP activation φ at ``layers`` by ``"identity"`` (φ(x) → x) or
        ``"tangent"`` (φ(x₀) + φ'(x₀)(x − x₀), x₀ the mean pre-activation on ``calibration``
        data) inside the ``with`` block; see :mod:`geomlens.interventions.linearize`. ``layers`` may
        also be ``module:PATH`` sites of activation modules (a CNN's ReLUs; see
        :mod:`geomlens.interventions.module_linearize`)."""
        if isinstance(layers, str) or (
            isinstance(layers, Sequence) and layers and all(isinstance(x, str) for x in layers)
        ):
            from geomlens.interventions.module_linearize import linearize_modules

            sites = cast("str | Sequence[str]", layers)  # module sites, checked above
            return linearize_modules(self, sites, mode=mode, calibration=calibration)
        from geomlens.interventions.linearize import linearize

        indices = cast("int | Sequence[int]", layers)  # layer indices: not sites
        return linearize(self, indices, mode=mode, calibration=calibration)

    #: The model's Hugging Face config, or None (a TransformerLens model keeps ``model.cfg``;
    #: recorded activations have no model).
    config: Any = None
    #: The torch module run, or None for recorded activations.
    model: Any = None

    def residual_sites(self) -> list[str]:
        """The residual stream after each block (``blocks.L.hook_resid_post``), in order."""
        return [site for site in self.sites() if site.endswith("hook_resid_post")]

    @property
    def max_positions(self) -> int | None:
        """The number of positions the model takes, or None when its config does not say."""
        return first_field(self.config, POSITION_FIELDS)

    @property
    def is_causal_lm(self) -> bool:
        """Whether the model predicts the next token (its logits are a language model's)."""
        return False

    @property
    def is_hooked_transformer(self) -> bool:
        """Whether the model is a TransformerLens HookedTransformer (its MLPs carry hook points
        rather than Hugging Face activation modules)."""
        return False

    def transformer_blocks(self) -> torch.nn.Module | None:
        """The model's transformer blocks as modules indexed by layer (what linearisation hooks),
        or None when there are none to hook (recorded activations, a HookedTransformer)."""
        return None

    # -- safety ------------------------------------------------------------------------------
    @abstractmethod
    def hook_count(self) -> int:
        """Hooks currently registered on the model (0 whenever no pass is running)."""

"""Conformance checks a user can run on their own model (``geomlens check MODEL``).

For every canonical site the model offers, :func:`check_adapter` reports whether it resolves,
its shape (``[batch, tokens, width]``, the width checked against the config's d_model / d_mlp /
vocabulary), whether a padded batch (left and right) gives the same activations at real tokens
as one-by-one runs, whether the residual-stream sites equal the model's own
``output_hidden_states`` (block ``L``'s input is hidden state ``L``), and whether the sub-layer
sites add up (``resid_pre + attn_out = resid_mid``, ``resid_mid + mlp_out = resid_post`` for a
sequential block; ``resid_pre + attn_out + mlp_out = resid_post`` for a parallel one). Each
failing site is named with its error. See docs/architectures.md.

Every comparison is relative to the activations' scale: max |a − b| divided by the largest
|value| compared (:func:`relative_gap`), against one tolerance ``rtol`` that the report prints.
float32 round-off grows with the size of the numbers summed, so an absolute threshold that
suits a small model fails a right site of a model whose residual stream is large (SmolLM2's
reaches the hundreds), while a wrong site (swapped, positions shifted) is off by the order of
the values themselves, far above any tolerance.
"""

from __future__ import annotations

import functools
import operator
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from geomlens.checks.own_forward import (
    _hidden_state_offset,
    _own_hidden_states,
    reference_model,
)
from geomlens.checks.reference import fallback_note, float64_reference, judged
from geomlens.data.dataset import Dataset
from geomlens.inputs.encoding import ModelInputs, PaddingSide
from geomlens.models.adapter import Adapter, canonical_sites, layer_of
from geomlens.models.config_fields import (
    EMBED_WIDTH_FIELDS,
    MLP_WIDTH_FIELDS,
    RESIDUAL_WIDTH_FIELDS,
)
from geomlens.models.widths import expected_widths, width_kind

DEFAULT_PROMPTS = (
    "The quick brown fox jumps over the lazy dog.",
    "It happened in the year 1630.",
    "Geometry of representations.",
)
#: Token ids used when the model has no tokenizer (small ids exist in every vocabulary).
DEFAULT_TOKEN_IDS = ([1, 2, 3, 4, 5], [6, 7, 8], [9, 10, 11, 12])

#: Config fields naming the residual width, the MLP hidden width and the embedding width, in the
#: spellings of the Hugging Face families (first one set wins).
D_MODEL_FIELDS = RESIDUAL_WIDTH_FIELDS
D_MLP_FIELDS = MLP_WIDTH_FIELDS
EMBED_FIELDS = EMBED_WIDTH_FIELDS


@dataclass
class Check:
    """One check: its name, the site it concerns (None for a whole-model check), the verdict and
    a sentence saying what was measured."""

    name: str
    passed: bool
    detail: str
    site: str | None = None


def _dataset(adapter: Adapter, prompts: Sequence[str]) -> Dataset:
    if adapter.tokenizer is not None:
        return Dataset(texts=list(prompts))
    return Dataset(token_ids=[list(row) for row in DEFAULT_TOKEN_IDS])


def relative_gap(ours: torch.Tensor, reference: torch.Tensor, *terms: torch.Tensor) -> float:
    """max |ours − reference| / scale, the scale being the largest |value| of ``reference`` and
    of ``terms`` (the summands, where ``reference`` is a sum: round-off grows with them). 0 when
    both are exactly 0."""
    ours, reference = ours.detach().float().cpu(), reference.detach().float().cpu()
    if ours.shape != reference.shape:
        return float("inf")
    scale = max([reference.abs().max().item(), *(t.detach().abs().max().item() for t in terms)])
    gap = (ours - reference).abs().max().item() if reference.numel() else 0.0
    return gap / scale if scale > 0 else (0.0 if gap == 0 else float("inf"))


def _padding_errors(
    adapter: Adapter, dataset: Dataset, sites: list[str], side: PaddingSide
) -> dict[str, float]:
    """Per site, the relative gap (:func:`relative_gap`) between the batched activations at
    real tokens and the example run alone."""
    index = np.arange(len(dataset))
    batched_inputs = adapter.encode(dataset, index, padding_side=side)
    batched = adapter.capture(batched_inputs, sites)
    worst = dict.fromkeys(sites, 0.0)
    for row in index:
        single = adapter.capture(adapter.encode(dataset, np.array([row])), sites)
        mask = batched_inputs.attention_mask[row].bool()
        for site in sites:
            together = batched[site][row][mask.to(batched[site].device)]
            worst[site] = max(worst[site], relative_gap(together, single[site][0]))
    return worst


def hidden_state_errors(
    adapter: Adapter,
    inputs: ModelInputs,
    activations: dict[str, torch.Tensor],
    reference: torch.nn.Module | None = None,
) -> dict[str, float] | str:
    """Per residual site, the relative gap (:func:`relative_gap`) between the site and the model's
    own hidden state at real tokens, worst example: block ``L``'s ``resid_pre`` against hidden
    state ``L`` and ``resid_post`` against ``L + 1`` (the last block's output is left out: most
    models normalise it before reporting it). A string says why
    there is no reference. ``reference``: the module to compare with (default: the adapter's own
    Hugging Face module, see :func:`reference_model`)."""
    model = reference if reference is not None else reference_model(adapter)
    if model is None:
        return "no Hugging Face module to compare with (TransformerLens's own model)"
    n_layers = adapter.n_layers
    offset = _hidden_state_offset(model)
    targets = {f"blocks.{layer}.hook_resid_pre": layer - offset for layer in range(n_layers)}
    targets.update(
        {f"blocks.{layer}.hook_resid_post": layer + 1 - offset for layer in range(n_layers - 1)}
    )
    targets = {s: index for s, index in targets.items() if s in activations and index >= 0}
    errors = dict.fromkeys(targets, 0.0)
    for row in range(inputs.batch_size):
        hidden = _own_hidden_states(model, inputs, row)
        if hidden is None:
            return "the model does not return output_hidden_states"
        if len(hidden) != n_layers + 1:
            return f"the model returns {len(hidden)} hidden states for {n_layers} blocks"
        mask = inputs.attention_mask[row].bool()
        for site, index in targets.items():
            ours = activations[site][row][mask.to(activations[site].device)]
            errors[site] = max(errors[site], relative_gap(ours, hidden[index][0]))
    return errors


def additivity_errors(
    adapter: Adapter, inputs: ModelInputs, activations: dict[str, torch.Tensor]
) -> dict[str, float]:
    """Per checked site, the relative gap (:func:`relative_gap`, scaled by the largest of the
    parts and the site) between the sum of its parts and the site at real tokens, keyed by the
    site the sum should equal (resid_mid, resid_post). Post-LayerNorm blocks normalise the sums,
    so they are not checked."""
    layout = getattr(adapter, "residual_layout", lambda: None)()
    if layout not in ("sequential", "parallel"):
        return {}
    mask = inputs.attention_mask.bool()
    errors: dict[str, float] = {}

    def gap(parts: list[str], total: str) -> None:
        if all(p in activations for p in [*parts, total]):
            terms = [activations[p][mask].float() for p in parts]
            summed = functools.reduce(operator.add, terms)  # t0 + t1 + …, as sum() adds
            errors[total] = relative_gap(summed, activations[total][mask], *terms)

    for layer in range(adapter.n_layers):
        site = f"blocks.{layer}."
        if layout == "sequential":
            gap([site + "hook_resid_pre", site + "hook_attn_out"], site + "hook_resid_mid")
            gap([site + "hook_resid_mid", site + "hook_mlp_out"], site + "hook_resid_post")
        else:
            parts = [site + "hook_resid_pre", site + "hook_attn_out", site + "hook_mlp_out"]
            gap(parts, site + "hook_resid_post")
    return errors


def _refusal_check(adapter: Adapter) -> Check:
    """Every canonical site is offered or refused with a stated reason."""
    offered = set(adapter.sites())
    refused = adapter.refused_sites()
    silent = [s for s in canonical_sites(adapter.n_layers) if s not in offered and s not in refused]
    detail = (
        f"{len(offered)} offered, {len(refused)} refused with a reason"
        + (f" (e.g. {next(iter(refused))}: {next(iter(refused.values()))})" if refused else "")
        if not silent
        else f"not offered and no reason given: {', '.join(silent[:6])}"
    )
    return Check("coverage", not silent, detail)


#: The fixed relative tolerance: of the sub-layer sums, and of every comparison where the model's
#: own forward cannot be run in float64 (or a tolerance is passed).
DEFAULT_RTOL = 1e-5


def check_adapter(
    adapter: Adapter,
    prompts: Sequence[str] = DEFAULT_PROMPTS,
    rtol: float | None = None,
    atol: float | None = None,
) -> list[Check]:
    """Run the conformance checks; one :class:`Check` per site, then whole-model checks.

    By default the padding and hidden-state comparisons are judged against the model's own
    forward pass run in float64 (:mod:`geomlens.checks.reference`): a site passes when its error
    is within ``FLOAT32_MULTIPLE`` times the model's own float32 error there (plus a small floor);
    where no float64 copy can be made, and for the sub-layer sums, the fixed ``rtol`` (default
    ``1e-5``) applies, printed. Passing ``rtol`` (or ``atol``) uses the fixed rule throughout.

    ``rtol``: the fixed tolerance of every comparison (padded vs one-by-one, the model's own hidden
    states, the sub-layer sums), relative to the activations' scale (:func:`relative_gap`):
    float32 round-off of a right site is ~1e-7 of it, a wrong position or a swapped site is of
    the order of the values. ``atol`` is deprecated (it was an absolute tolerance for the hidden
    states and sums, which failed right sites of models with a large residual stream); when
    given it is used as their relative tolerance.
    """
    if atol is not None:
        warnings.warn(
            "check_adapter(atol=...) is deprecated: every comparison is relative now; pass rtol. "
            "atol is used as the relative tolerance of the hidden-state and sum checks.",
            DeprecationWarning,
            stacklevel=2,
        )
    fixed = rtol is not None or atol is not None
    rtol = DEFAULT_RTOL if rtol is None else rtol
    state_rtol = rtol if atol is None else atol
    if adapter.backend == "recorded":
        raise ValueError(
            "geomlens check compares a model's forward pass with itself and with Hugging Face; "
            "recorded activations have none. Run it on a model name or folder instead."
        )
    sites = adapter.sites()
    if not sites:
        return [Check("sites", False, "the model offers no site at all")]
    if all(site.startswith("module:") for site in sites):
        raise ValueError(
            f"{adapter.model_id!r} has no canonical sites, only module:PATH ones (a model with no "
            "architecture table, e.g. a CNN); geomlens check compares a token model's canonical "
            "sites with its Hugging Face hidden states. Read module sites with adapter.capture "
            "(docs/vision.md)."
        )
    measured = _measure(adapter, prompts, sites, fixed)
    checks = [_site_check(site, measured, rtol, state_rtol) for site in sites]
    failing = [c.site for c in checks if not c.passed and c.site is not None]  # all per site
    checks.extend(_whole_model_checks(measured, rtol, state_rtol))
    checks.append(_refusal_check(adapter))
    checks.append(
        Check(
            "sites",
            not failing,
            f"{len(sites)} sites checked" + (f"; failing: {', '.join(failing)}" if failing else ""),
        )
    )
    hooks = adapter.hook_count()
    checks.append(Check("no hooks left", hooks == 0, f"{hooks} hooks on the model"))
    return checks


@dataclass
class _Measured:
    """What the checks compare: the captured activations, the per-site errors of each
    comparison, and what the site shapes are checked against."""

    activations: dict[str, torch.Tensor]
    padding: dict[PaddingSide, dict[str, float]]  # by padding side, then site
    hidden: dict[str, float] | str  # a str says why the hidden states were not compared
    offset: int  # hidden-state index of block 0's input
    sums: dict[str, float]
    widths: dict[str, int]
    batch_shape: tuple[int, ...]
    #: The float64 reference, or why there is none (then the fixed tolerance judges).
    float64: Any
    #: Per-site verdicts of the float64 rule (None: the fixed tolerance judges).
    pad_rule: dict[str, Any] | None
    hidden_rule: dict[str, Any] | None


def _measure(adapter: Adapter, prompts: Sequence[str], sites: list[str], fixed: bool) -> _Measured:
    """Capture every site on right-padded prompts and measure each comparison once."""
    dataset = _dataset(adapter, prompts)
    inputs = adapter.encode(dataset, np.arange(len(dataset)), padding_side="right")
    activations = adapter.capture(inputs, sites)
    sides: tuple[PaddingSide, ...] = ("right", "left")
    padding = {side: _padding_errors(adapter, dataset, sites, side) for side in sides}
    hidden = hidden_state_errors(adapter, inputs, activations)
    float64 = "a fixed tolerance was asked for" if fixed else float64_reference(adapter, inputs)
    pad_rule, hidden_rule = reference_verdicts(float64, activations, inputs, padding)
    reference = reference_model(adapter)
    offset = _hidden_state_offset(reference) if reference is not None else 0
    sums = additivity_errors(adapter, inputs, activations)
    widths = expected_widths(adapter)
    batch_shape = tuple(inputs.attention_mask.shape)
    return _Measured(
        activations,
        padding,
        hidden,
        offset,
        sums,
        widths,
        batch_shape,
        float64,
        pad_rule,
        hidden_rule,
    )


def _site_check(site: str, measured: _Measured, rtol: float, state_rtol: float) -> Check:
    """One site's check: it resolves, its shape and width, padding, its own hidden state and
    the sum of its parts, each against its tolerance; the detail lists the problems, or the
    facts measured when there is none."""
    act = measured.activations.get(site)
    if act is None:
        return Check(site, False, "does not resolve: the capture returned nothing", site)
    problems, facts = [], []
    shape, batch_shape, widths = tuple(act.shape), measured.batch_shape, measured.widths
    facts.append(f"shape {list(shape)}")
    if len(shape) != 3 or shape[:2] != batch_shape:
        problems.append(f"shape {list(shape)} is not [batch, tokens, width] {list(batch_shape)}")
    kind = width_kind(site)
    if kind in widths and shape[-1] != widths[kind]:
        problems.append(f"width {shape[-1]}, config says {kind} = {widths[kind]}")
    right, left = measured.padding["right"][site], measured.padding["left"][site]
    pad = max(right, left)
    facts.append(f"padding {pad:.0e}")
    pad_ok, pad_rule_text = judged(measured.pad_rule, site, pad, rtol)
    if not pad_ok:
        problems.append(
            f"padded batch differs from one-by-one by {pad:.1e} (relative; right "
            f"{right:.1e}, left {left:.1e}; {pad_rule_text})"
        )
    hidden, sums = measured.hidden, measured.sums
    if isinstance(hidden, dict) and site in hidden:
        facts.append(f"own hidden state {hidden[site]:.0e}")
        state_ok, state_rule = judged(measured.hidden_rule, site, hidden[site], state_rtol)
        if not state_ok:
            layer = layer_of(site) or 0
            index = (layer if site.endswith("resid_pre") else layer + 1) - measured.offset
            problems.append(
                f"differs from the model's own hidden_states[{index}] by {hidden[site]:.2g} "
                f"of its scale ({state_rule})"
            )
    if site in sums:
        facts.append(f"sum of parts {sums[site]:.0e}")
        if sums[site] > state_rtol:
            problems.append(
                f"is not the sum of its parts (off by {sums[site]:.2g} of their scale; "
                f"tolerance {state_rtol:.0e})"
            )
    return Check(site, not problems, "; ".join(problems or facts), site)


def _whole_model_checks(measured: _Measured, rtol: float, state_rtol: float) -> list[Check]:
    """The worst padding error of each side, the own-hidden-state and the sub-layer-sum
    verdicts over all sites."""
    padding, hidden, sums = measured.padding, measured.hidden, measured.sums
    pad_rule, hidden_rule, note = (
        measured.pad_rule,
        measured.hidden_rule,
        fallback_note(measured.float64),
    )
    checks = []
    for side in ("right", "left"):
        worst_site, error, side_ok, side_rule = worst_judged(padding[side], pad_rule, rtol)
        checks.append(
            Check(
                f"{side}-padding",
                side_ok,
                f"max |batched − one-by-one| / max|one-by-one| = {error:.1e} at {worst_site} "
                f"({side_rule}){note}",
            )
        )
    if isinstance(hidden, str):
        checks.append(Check("own hidden states", True, f"not compared: {hidden}"))
    else:
        bad = {s: e for s, e in hidden.items() if not judged(hidden_rule, s, e, state_rtol)[0]}
        worst_state, _, _, state_rule = worst_judged(hidden, hidden_rule, state_rtol)
        checks.append(
            Check(
                "own hidden states",
                not bad,
                f"{len(hidden)} residual sites equal output_hidden_states: max |site − hidden| / "
                f"max|hidden| = {max(hidden.values(), default=0.0):.1e} (worst against the "
                f"rule at {worst_state}: {state_rule}){note}"
                if not bad
                else f"differ (relative to max|hidden|{note}): "
                + ", ".join(
                    f"{s} by {e:.2g} ({judged(hidden_rule, s, e, state_rtol)[1]})"
                    for s, e in bad.items()
                ),
            )
        )
    if sums:
        worst_sum = max(sums, key=sums.__getitem__)
        checks.append(
            Check(
                "sub-layer sums",
                sums[worst_sum] <= state_rtol,
                f"max |sum of parts − site| / max|part or site| = {sums[worst_sum]:.1e} at "
                f"{worst_sum} (tolerance {state_rtol:.0e})",
            )
        )
    return checks


def reference_verdicts(
    float64: Any,
    activations: dict[str, torch.Tensor],
    inputs: ModelInputs,
    padding: Mapping[Any, dict[str, float]],
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The float64 rule's verdicts for the padding gaps (worst side) and the hidden-state
    comparisons; ``(None, None)`` where there is no float64 reference (the fixed rule applies)."""
    from geomlens.checks.reference import Float64Reference, hidden_verdicts, padding_verdicts

    if not isinstance(float64, Float64Reference):
        return None, None
    worst = {s: max(side[s] for side in padding.values()) for s in next(iter(padding.values()))}
    return (
        padding_verdicts(float64, activations, inputs, worst),
        hidden_verdicts(float64, inputs, activations),
    )


def worst_judged(
    errors: dict[str, float], verdicts: dict[str, Any] | None, rtol: float
) -> tuple[str, float, bool, str]:
    """The site nearest to failing (largest ratio to its allowance), its error, whether every
    site passes, and the words of its rule."""

    def closeness(site: str) -> float:
        if verdicts is not None and site in verdicts:
            return errors[site] / verdicts[site].allowed
        return errors[site] / rtol if rtol > 0 else errors[site]

    if not errors:
        return "no site", 0.0, True, f"tolerance {rtol:.0e}"
    site = max(errors, key=closeness)
    every = all(judged(verdicts, s, e, rtol)[0] for s, e in errors.items())
    return site, errors[site], every, judged(verdicts, site, errors[site], rtol)[1]


def all_passed(checks: list[Check]) -> bool:
    return all(c.passed for c in checks)


def failures(checks: list[Check]) -> list[Check]:
    """The checks that failed, per-site ones first."""
    return [c for c in checks if not c.passed]


__all__ = [
    "Check",
    "additivity_errors",
    "all_passed",
    "check_adapter",
    "expected_widths",
    "failures",
    "hidden_state_errors",
    "relative_gap",
]

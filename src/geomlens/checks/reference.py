"""The float64 referee of ``geomlens check``: the model's own forward pass, run once in float64.

A fixed relative tolerance (``1e-5``) judges a right site of a deep model with a large residual
stream as wrong: float32 round-off there reaches ~1e-5 of the scale (SmolLM2-135M's blocks 10
and 11). So :func:`float64_reference` runs a float64 deep copy of the model's Hugging Face
module (the user's module keeps its weights and dtype) on the probe examples, one at a time,
and measures the model's *own* error against it, per hidden state. A backend's site then passes
when its error against the float64 reference is within :data:`FLOAT32_MULTIPLE` times the
model's own error at that depth, plus :data:`SCALE_FLOOR` of the site's scale (for sites where
the model's own error happens to be ~0, e.g. the embeddings). A wrong site or a shifted position
is off by the order of the values, thousands of times any such allowance.

Where the float64 copy cannot be made (too large for the memory left, out of memory, a module
that cannot be cast, no Hugging Face module to copy) :func:`float64_reference` returns a
sentence saying why, and the check falls back to the fixed relative tolerance, printed.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass

import torch

from geomlens.checks.own_forward import _hidden_state_offset, _own_hidden_states, reference_model
from geomlens.inputs.encoding import ModelInputs
from geomlens.models.adapter import Adapter, layer_of

#: A backend's error against the float64 reference may be this many times the model's own
#: float32 error (at the same depth) before the site fails.
FLOAT32_MULTIPLE = 8.0
#: An allowance relative to a site's scale, added to the multiple: a few float32 epsilons
#: (2**-23 ≈ 1.2e-7), for sites where the model's own error is ~0.
SCALE_FLOOR = 1e-6


@dataclass
class Float64Reference:
    """The model's own hidden states in float64 (per example, unpadded) and its own float32
    error against them, per hidden-state index: ``own_abs`` (max |h32 − h64|), ``scale``
    (max |h64|)."""

    hidden: list[tuple[torch.Tensor, ...]]
    own_abs: dict[int, float]
    scale: dict[int, float]
    offset: int = 0
    dtype: str = "float32"
    n_layers: int = 0

    def own_relative(self, index: int) -> float:
        scale = self.scale.get(index, 0.0)
        return self.own_abs.get(index, 0.0) / scale if scale > 0 else 0.0

    def _indices(self, site: str) -> list[int]:
        """The hidden states bracketing a site: its block's input and output (the embeddings for
        ``hook_embed``; the last hidden state for a site outside the blocks, e.g. logits)."""
        last = max(self.own_abs, default=0)
        layer = layer_of(site)
        if layer is None:
            return [0] if "embed" in site else [last]
        return [i for i in (layer - self.offset, layer + 1 - self.offset) if 0 <= i <= last]

    def own_error(self, site: str, site_scale: float) -> float:
        """The model's own float32 error at a site's depth, relative to ``site_scale``: the larger
        of the bracketing hidden states' absolute error over the site's scale and their relative
        error (a normalised site such as logits carries the relative one)."""
        worst = 0.0
        for index in self._indices(site):
            absolute = self.own_abs.get(index, 0.0) / site_scale if site_scale > 0 else 0.0
            worst = max(worst, absolute, self.own_relative(index))
        return worst

    def tolerance(self, site: str, site_scale: float) -> float:
        """The relative error a backend's site may have: FLOAT32_MULTIPLE × the model's own
        error there + SCALE_FLOOR."""
        return FLOAT32_MULTIPLE * self.own_error(site, site_scale) + SCALE_FLOOR


@dataclass
class Verdict:
    """One comparison against the float64 reference: the backend's error and the model's own,
    both relative to the scale, the allowed error and whether it passed."""

    error: float
    own: float
    allowed: float

    @property
    def passed(self) -> bool:
        return self.error <= self.allowed

    @property
    def ratio(self) -> float:
        if self.own > 0:
            return self.error / self.own
        return 0.0 if self.error == 0 else float("inf")

    def describe(self, what: str = "vs float64") -> str:
        return (
            f"{what} {self.error:.2g}, model's own {self.own:.2g}, ratio {self.ratio:.3g}× "
            f"(allowed {FLOAT32_MULTIPLE:g}× + {SCALE_FLOOR:.0e} of scale = {self.allowed:.2g})"
        )


def _available_bytes(device: torch.device) -> int | None:
    """Free memory on ``device`` (CUDA's free memory, or MemAvailable for the CPU); None when
    unknown."""
    if device.type == "cuda":
        try:
            return int(torch.cuda.mem_get_info(device)[0])
        except (RuntimeError, AssertionError):
            return None
    if device.type != "cpu":
        return None
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    pages, size = (
        getattr(os, "sysconf", lambda _: -1)(n) for n in ("SC_AVPHYS_PAGES", "SC_PAGE_SIZE")
    )
    return pages * size if pages > 0 and size > 0 else None


def float64_bytes(model: torch.nn.Module) -> int:
    """Bytes of a float64 copy of ``model``'s parameters and floating buffers (twice a float32
    model's)."""
    tensors = [*model.parameters(), *(b for b in model.buffers() if b.is_floating_point())]
    return sum(t.numel() * 8 for t in tensors)


def float64_copy(model: torch.nn.Module) -> torch.nn.Module | str:
    """A float64 deep copy of ``model`` on its device, or a sentence saying why there is none.
    ``model`` itself is left as it was (weights, dtype, mode)."""
    parameter = next(model.parameters(), None)
    if parameter is None:
        return "the model has no parameters to copy"
    need = float64_bytes(model)
    free = _available_bytes(parameter.device)
    if free is not None and need > free:
        return (
            f"a float64 copy needs {need / 2**30:.2f} GiB, {free / 2**30:.2f} GiB free "
            f"on {parameter.device}"
        )
    try:
        twin = copy.deepcopy(model)
        return twin.to(torch.float64).eval()
    except torch.OutOfMemoryError:
        return f"out of memory making a float64 copy ({need / 2**30:.2f} GiB)"
    except (RuntimeError, TypeError, ValueError, NotImplementedError, AttributeError) as error:
        return f"the model cannot be cast to float64 ({type(error).__name__}: {error})"


def float64_reference(adapter: Adapter, inputs: ModelInputs) -> Float64Reference | str:
    """Run the model's own forward pass in float64 and in its own dtype on each example alone;
    a sentence says why not (then the check keeps the fixed tolerance)."""
    model = reference_model(adapter)
    if model is None:
        return "no Hugging Face module to run in float64 (TransformerLens's own model)"
    if inputs.input_ids is None:
        return "no token ids to run the model on"
    dtype = next(model.parameters(), torch.empty(0)).dtype
    twin = float64_copy(model)
    if isinstance(twin, str):
        return twin
    hidden64: list[tuple[torch.Tensor, ...]] = []
    own_abs: dict[int, float] = {}
    scale: dict[int, float] = {}
    try:
        for row in range(inputs.batch_size):
            ours = _own_hidden_states(model, inputs, row)
            truth = _own_hidden_states(twin, inputs, row)
            if ours is None or truth is None or len(ours) != len(truth):
                return "the model does not return output_hidden_states in float64"
            hidden64.append(truth)
            for index, (h32, h64) in enumerate(zip(ours, truth, strict=True)):
                h64 = h64.detach().cpu()
                gap = (h32.detach().cpu().to(torch.float64) - h64).abs().max().item()
                own_abs[index] = max(own_abs.get(index, 0.0), gap)
                scale[index] = max(scale.get(index, 0.0), h64.abs().max().item())
    except torch.OutOfMemoryError:
        return "out of memory running the float64 copy"
    finally:
        del twin
    return Float64Reference(
        hidden=hidden64,
        own_abs=own_abs,
        scale=scale,
        offset=_hidden_state_offset(model),
        dtype=str(dtype).removeprefix("torch."),
        n_layers=adapter.n_layers,
    )


def site_scale(activation: torch.Tensor, inputs: ModelInputs) -> float:
    """The largest |value| of a site at real tokens."""
    mask = inputs.attention_mask.bool().to(activation.device)
    if activation.dim() < 2 or tuple(activation.shape[:2]) != tuple(mask.shape):
        return float(activation.detach().abs().max().item()) if activation.numel() else 0.0
    real = activation[mask]
    return float(real.detach().abs().max().item()) if real.numel() else 0.0


def padding_verdicts(
    reference: Float64Reference,
    activations: dict[str, torch.Tensor],
    inputs: ModelInputs,
    gaps: dict[str, float],
) -> dict[str, Verdict]:
    """Per site, the padded batch's relative gap to one-by-one runs judged against the model's
    own float32 error at the site's depth."""
    verdicts = {}
    for site, gap in gaps.items():
        act = activations.get(site)
        scale = site_scale(act, inputs) if act is not None else 0.0
        verdicts[site] = Verdict(
            gap, reference.own_error(site, scale), reference.tolerance(site, scale)
        )
    return verdicts


def hidden_verdicts(
    reference: Float64Reference,
    inputs: ModelInputs,
    activations: dict[str, torch.Tensor],
) -> dict[str, Verdict]:
    """Per residual site (block ``L``'s ``resid_pre`` is hidden state ``L``, ``resid_post`` is
    ``L + 1``; the last block's output is left out as most models normalise it), the backend's
    error against the float64 hidden state, relative to its scale, worst example, with the
    model's own float32 error there."""
    n_layers = reference.n_layers
    targets = {
        f"blocks.{layer}.hook_resid_pre": layer - reference.offset for layer in range(n_layers)
    }
    targets.update(
        {
            f"blocks.{layer}.hook_resid_post": layer + 1 - reference.offset
            for layer in range(n_layers - 1)
        }
    )
    verdicts: dict[str, Verdict] = {}
    for site, index in targets.items():
        if site not in activations or index < 0 or index >= len(reference.hidden[0]):
            continue
        worst = 0.0
        for row, truth in enumerate(reference.hidden):
            mask = inputs.attention_mask[row].bool()
            ours = activations[site][row][mask.to(activations[site].device)]
            h64 = truth[index][0].detach().cpu()
            if ours.shape != h64.shape:
                worst = float("inf")
                break
            gap = (ours.detach().cpu().to(torch.float64) - h64).abs().max().item()
            worst = max(worst, gap)
        scale = reference.scale.get(index, 0.0)
        error = worst / scale if scale > 0 else (0.0 if worst == 0 else float("inf"))
        own = reference.own_relative(index)
        verdicts[site] = Verdict(error, own, FLOAT32_MULTIPLE * own + SCALE_FLOOR)
    return verdicts


def judged(
    verdicts: dict[str, Verdict] | None, site: str, error: float, rtol: float
) -> tuple[bool, str]:
    """Whether ``error`` (relative) passes at ``site`` and the words that say against what: the
    float64 rule where ``verdicts`` has the site, the fixed ``rtol`` otherwise."""
    if verdicts is not None and site in verdicts:
        verdict = Verdict(error, verdicts[site].own, verdicts[site].allowed)
        return verdict.passed, verdict.describe()
    return error <= rtol, f"tolerance {rtol:.0e}"


def fallback_note(reference: Float64Reference | str) -> str:
    """The words a whole-model line ends with: which rule judged it."""
    if isinstance(reference, str):
        return f"; float64 reference not run ({reference}): fixed tolerance"
    return (
        f"; against the model's own forward in float64 (its {reference.dtype} error × "
        f"{FLOAT32_MULTIPLE:g} + {SCALE_FLOOR:.0e} of scale allowed)"
    )


__all__ = [
    "FLOAT32_MULTIPLE",
    "SCALE_FLOOR",
    "Float64Reference",
    "Verdict",
    "float64_copy",
    "float64_reference",
    "fallback_note",
    "hidden_verdicts",
    "judged",
    "padding_verdicts",
]

"""Theory beside a measured trajectory, in three levels (stated on the figure and in sweep.json).

- ``exact``: the series declares its setup (a geomlens experiment's run.json). For the
  abstraction-dynamics network: the exact α(t) of every hidden layer at t = Σ lr
  (``theory.abstraction.alpha_trajectory`` for the last layer, the per-layer artanh law for the
  others), α_max and the time of the peak, α_∞, whether the checkpoints resolve the peak, and a
  clock check (the time scale that best maps the measured α onto the exact curve: 1 when the
  run's clock is the theory's). For the toy network: the distance of (p_S, p_I) to the front of
  its linear-decay proposition.
- ``laws``: parameter-free laws for any model, as diagnostics: the per-layer artanh law drawn
  through the first and last layer's α, and α after each MLP nonlinearity against α before it
  (the attenuation law says after ≤ before). Neither need hold on a trained transformer.
- ``none``: the trajectory alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import minimize_scalar

from geomlens.theory import abstraction

LEVELS = ("auto", "exact", "laws", "none")
#: The peak counts as resolved when the best checkpoint's exact α is this close to α_max.
PEAK_RESOLUTION = 1e-3


@dataclass(frozen=True)
class ExactAbstraction:
    """The exact theory of a two-factor linear network (run.json's ``theory`` block)."""

    sigma_x: np.ndarray
    sigma_y: np.ndarray
    gamma: float
    kappa: float
    depth: int
    sites: tuple[str, ...]
    origin: str

    @classmethod
    def from_record(cls, record: Mapping[str, Any], origin: str) -> ExactAbstraction:
        block = record["theory"]
        return cls(
            np.asarray(block["sigma_x"], dtype=float),
            np.asarray(block["sigma_y"], dtype=float),
            float(block["gamma"]),
            float(block["kappa"]),
            int(block["depth"]),
            tuple(record.get("sites", ())),
            origin,
        )

    @classmethod
    def from_parameters(cls, block: Mapping[str, Any]) -> ExactAbstraction:
        """The theory back from its :meth:`parameters` (sweep.json's ``theory.exact``), so a
        figure can draw the exact curve anywhere between the checkpoints."""
        return cls.from_record(
            {"theory": block, "sites": block.get("sites", ())}, str(block.get("origin", ""))
        )

    @property
    def alpha_x(self) -> float:
        return abstraction.decompose_2fs(self.sigma_x).alpha

    def layer_of(self, site: str) -> int | None:
        """Hidden layer ℓ = 1..L of a site, or None for another site."""
        return self.sites.index(site) + 1 if site in self.sites else None

    def alpha(self, times: ArrayLike, layer: int | None = None) -> np.ndarray:
        """Exact α at ``times`` of hidden layer ``layer`` (the last when None)."""
        last = abstraction.alpha_trajectory(
            self.sigma_x, self.sigma_y, self.gamma, self.kappa, np.asarray(times, float), self.depth
        )
        if layer is None or layer == self.depth:
            return np.asarray(last)
        return abstraction.depth_per_layer(self.alpha_x, last, self.depth)[..., layer]

    def parameters(self) -> dict[str, Any]:
        return {
            "kind": "abstraction-exact",
            "sigma_x": self.sigma_x.tolist(),
            "sigma_y": self.sigma_y.tolist(),
            "gamma": self.gamma,
            "kappa": self.kappa,
            "depth": self.depth,
            "sites": list(self.sites),
            "alpha_x": self.alpha_x,
            "alpha_y": abstraction.decompose_2fs(self.sigma_y).alpha,
            "origin": self.origin,
        }

    def summary(self, times: Sequence[float], measured_last: Sequence[float]) -> dict[str, Any]:
        """α_max, its time, α_∞, whether the checkpoints resolve the peak (and only then the
        gap of the largest measured α to α_max), the clock check and the largest residual."""
        moments = np.asarray(times, dtype=float)
        measured = np.asarray(measured_last, dtype=float)
        alpha_max = abstraction.alpha_max(
            self.sigma_x, self.sigma_y, self.gamma, self.kappa, self.depth
        )
        peak_time = _peak_time(self)
        exact = self.alpha(moments)
        sampled_peak = float(np.max(exact)) if exact.size else float("nan")
        resolved = bool(
            np.isfinite(peak_time)
            and moments.size > 0
            and moments.min() <= peak_time <= moments.max()
            and alpha_max - sampled_peak <= PEAK_RESOLUTION
        )
        finite = np.isfinite(measured)
        info: dict[str, Any] = {
            "alpha_max": alpha_max,
            "peak_time": peak_time,
            "alpha_infinity": float(self.alpha([np.inf])[0]),
            "terminal_law": float(
                abstraction.depth_terminal(
                    self.alpha_x, abstraction.decompose_2fs(self.sigma_y).alpha, self.depth
                )
            ),
            "peak_resolved": resolved,
            "largest_measured_alpha": float(np.max(measured[finite])) if finite.any() else None,
            "largest_measured_minus_alpha_max": (
                float(np.max(measured[finite]) - alpha_max) if resolved and finite.any() else None
            ),
            "max_abs_residual": (
                float(np.max(np.abs(measured[finite] - exact[finite]))) if finite.any() else None
            ),
            "clock_ratio": _clock_ratio(self, moments[finite], measured[finite]),
        }
        if not resolved:
            info["peak_note"] = _peak_note(peak_time, alpha_max, moments)
        return info


def _peak_note(peak_time: float, alpha_max: float, moments: np.ndarray) -> str:
    """Why α_max is not compared, naming where the peak lies against the checkpoints."""
    why = (
        f"the checkpoints do not resolve the peak (none is within {PEAK_RESOLUTION} of α_max "
        "in the exact curve): α_max is not compared"
    )
    if not np.isfinite(peak_time) or moments.size == 0:
        return why
    where = f"at t = {peak_time:.3g} (α_max = {alpha_max:.4g})"
    if peak_time < moments.min():
        return f"the peak {where} comes before the first checkpoint; {why}"
    if peak_time > moments.max():
        return f"the peak {where} comes after the last checkpoint; {why}"
    return f"the checkpoints miss the peak {where}; {why}"


def _peak_time(theory: ExactAbstraction) -> float:
    from geomlens.theory.abstraction import _peak

    return float(_peak(theory.sigma_x, theory.sigma_y, theory.gamma, theory.kappa, theory.depth)[0])


def _clock_ratio(theory: ExactAbstraction, times: np.ndarray, measured: np.ndarray) -> float | None:
    """The c that makes α_exact(c t) fit the measured α best (least squares over (0.5, 2))."""
    moving = times > 0
    if moving.sum() < 2:
        return None

    def misfit(scale: float) -> float:
        return float(np.sum((theory.alpha(scale * times[moving]) - measured[moving]) ** 2))

    fitted = minimize_scalar(misfit, bounds=(0.5, 2.0), method="bounded", options={"xatol": 1e-6})
    return float(fitted.x)


# --- parameter-free laws ----------------------------------------------------------------------


def site_layer(site: str) -> int | None:
    """The layer number in a site's name (``blocks.3.…`` → 3, ``module:layers.2`` → 2)."""
    found = re.search(r"\.(\d+)(?:\.|$)", site)
    return int(found.group(1)) if found else None


def layer_law(values: Mapping[str, float]) -> dict[str, float]:
    """The per-layer artanh law through the first and last layer's α, for each kind of site
    (``blocks.{L}.hook_resid_post``, ``module:layers.{L}``, …) measured at three layers or more:
    ``tanh((1 − f) artanh α_first + f artanh α_last)`` at the sites between, f the fraction of
    the way from the first layer to the last."""
    kinds: dict[str, list[tuple[int, str]]] = {}
    for site, value in values.items():
        layer = site_layer(site)
        if layer is not None and np.isfinite(value):
            kinds.setdefault(re.sub(r"\.(\d+)(\.|$)", r".{}\2", site, count=1), []).append(
                (layer, site)
            )
    law: dict[str, float] = {}
    for layered in kinds.values():
        layered.sort()
        if len(layered) < 3:
            continue
        (first_layer, first), (last_layer, last) = layered[0], layered[-1]
        ends = np.arctanh(np.clip([values[first], values[last]], -1 + 1e-15, 1 - 1e-15))
        for layer, site in layered[1:-1]:
            fraction = (layer - first_layer) / (last_layer - first_layer)
            law[site] = float(np.tanh((1 - fraction) * ends[0] + fraction * ends[1]))
    return law


def attenuation_bounds(values: Mapping[str, float]) -> dict[str, float]:
    """For each ``blocks.L.mlp.hook_post`` whose ``blocks.L.mlp.hook_pre`` was measured too,
    α before the nonlinearity: the attenuation law's bound on α after it."""
    bounds = {}
    for site in values:
        if site.endswith("mlp.hook_post"):
            before = site[: -len("hook_post")] + "hook_pre"
            if before in values and np.isfinite(values[before]):
                bounds[site] = float(values[before])
    return bounds

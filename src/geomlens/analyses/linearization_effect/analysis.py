"""linearization-effect: α and CCGP with and without locally linearising an MLP, and what it costs.

Each batch runs twice: as the model is, and with the MLP activation φ of the chosen layers
replaced (``adapter.linearize``; default: the penultimate layer, φ → identity, the abstraction
paper's protocol). Per task and site it reports α and CCGP in both conditions; a summary at the
output of the deepest linearised layer (mean α base → linearised, how many tasks went up,
CCGP likewise); and the fidelity cost: the change in next-token LM loss where the model has
logits, otherwise the cosine between the original and linearised output embeddings (the last
block's output, mean over tokens), named in the result. Sites before the linearised layer
cannot change and are measured once. See docs/abstraction.md.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from geomlens import progress
from geomlens.analyses.abstraction.analysis import (
    abstraction_draws,
    comparable_tasks,
    site_alpha_metrics,
)
from geomlens.analyses.abstraction.figures import legend_with_styles, plot_by_layer
from geomlens.analyses.base import Analysis, Batch, RunContext
from geomlens.analyses.ccgp.analysis import (
    CCGP_COLUMNS,
    ccgp_tables,
    plot_ccgp,
    site_ccgp_metrics,
)
from geomlens.analyses.statistics.alpha_scores import AlphaDraws, site_mean_interval
from geomlens.analyses.statistics.concept_state import (
    ConceptRowsAnalysis,
    ConceptState,
    concept_sites,
    site_tasks,
    task_rng,
)
from geomlens.analyses.statistics.next_token import next_token_loss
from geomlens.analyses.words.metric_words import metric_value
from geomlens.formatting import human_name
from geomlens.hooks.sites import NEXT_TOKEN_SITE
from geomlens.inputs.pooling import pool_tokens
from geomlens.interventions.linearize import (
    MODES,
    activation_targets,
    active_linearizations,
    mean_pre_activations,
)
from geomlens.interventions.resume import capture_from_layer, resume_site_for
from geomlens.models.adapter import LOGITS_SITE, Adapter, layer_of
from geomlens.models.widths import expected_widths
from geomlens.results import Result

from . import DECLARATION
from .config import LinearizationEffectConfig
from .metrics import loss_above_uniform

CONDITIONS = ("base", "linearized")


def _affected(site: str, first_layer: int) -> bool:
    """Whether linearising from ``first_layer`` on can change the activation at ``site``."""
    if site in (LOGITS_SITE, NEXT_TOKEN_SITE):
        return True
    layer = layer_of(site)
    return layer is not None and layer >= first_layer


class LinearizationEffect(ConceptRowsAnalysis, declaration=DECLARATION):
    """α and CCGP with and without local linearisation of an MLP, and its fidelity cost."""

    config: LinearizationEffectConfig

    def __init__(self, config: LinearizationEffectConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        if self.config.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.config.mode!r}.")
        self.states = {condition: ConceptState(keep_rows=True) for condition in CONDITIONS}
        self.fidelity: dict[str, float | torch.Tensor] = {}
        self.linearized_layers: list[int] = []
        self.where: list[str] = []
        self.operating_points: dict[int, torch.Tensor] | None = None
        #: Width of the logits (the vocabulary) where the model has them: ln V nats is the loss
        #: of a uniform guess.
        self.vocab_size = 0

    # -- sites and set-up --------------------------------------------------------------------
    def _layers(self, adapter: Adapter) -> list[int]:
        if self.config.layers is not None:
            return [int(layer) % adapter.n_layers for layer in self.config.layers]
        if adapter.n_layers < 2:
            raise ValueError(
                f"{adapter.model_id!r} has {adapter.n_layers} block(s): no penultimate layer; "
                "pass layers=[...]."
            )
        return [adapter.n_layers - 2]

    def _output_site(self, adapter: Adapter) -> str:
        if LOGITS_SITE in adapter.sites() and adapter.makes_head_sites:
            # Scored inside the pass: the passes never hold [B, T, vocab] logits.
            return NEXT_TOKEN_SITE
        return f"blocks.{adapter.n_layers - 1}.hook_resid_post"

    def sites(self, adapter: Adapter) -> list[str]:
        sites = concept_sites(self.config, adapter)
        if adapter.n_layers > 0:
            sites = list(dict.fromkeys([*sites, self._output_site(adapter)]))
            resume = self._resume_site(adapter)
            if resume is not None:
                sites.append(resume)
        return sites

    def _resume_site(self, adapter: Adapter) -> str | None:
        """The input of the first linearised block: the linearised pass starts there."""
        try:
            first = min(self._layers(adapter))
        except ValueError:
            return None  # no penultimate layer: setup says so
        return resume_site_for(adapter, first)

    def setup(self, context: RunContext) -> None:
        super().setup(context)
        adapter = context.adapter
        if active_linearizations(adapter):
            raise ValueError(
                "linearization-effect compares the model with and without linearisation itself; "
                "run it outside adapter.linearize (without --linearize) and choose the layers "
                "with its layers= option."
            )
        # Refuse an unlinearisable model (recorded data, no elementwise MLP activation) here,
        # before the first forward pass.
        targets = activation_targets(adapter, self._layers(adapter))
        self.linearized_layers = [t.layer for t in targets]
        self.where = [t.where for t in targets]
        if self.config.mode == "tangent" and self.operating_points is None:
            from geomlens.data.corpus import stdlib_paragraphs

            calibration = stdlib_paragraphs(self.config.calibration_texts)
            self.operating_points = mean_pre_activations(adapter, targets, calibration)

    # -- streaming ---------------------------------------------------------------------------
    def update(self, batch: Batch) -> None:
        adapter = self._run_context().adapter
        first = min(self.linearized_layers)
        measured = concept_sites(self.config, adapter)
        changed = [s for s in self.sites(adapter) if _affected(s, first)]
        resume = self._resume_site(adapter)
        cached = batch.activations.get(resume) if resume is not None else None
        with adapter.linearize(self.linearized_layers, self.config.mode, self.operating_points):
            # Blocks before the first linearised one are unchanged: start from their output.
            linearized = capture_from_layer(adapter, batch.inputs, changed, first, cached)
        self.states["base"].update(batch.activations, batch, measured, self.config.pooling)
        changed_measured = [s for s in measured if s in linearized]
        self.states["linearized"].update(linearized, batch, changed_measured, self.config.pooling)
        self._update_fidelity(batch, batch.activations, linearized)

    def _update_fidelity(self, batch: Batch, base: dict, linearized: dict) -> None:
        site = self._output_site(self._run_context().adapter)
        if site == NEXT_TOKEN_SITE:
            if not self.vocab_size:  # ln V is the uniform guess's loss (read once, from config)
                vocab = expected_widths(self._run_context().adapter).get("vocab")
                self.vocab_size = int(vocab or 0)
            for condition, activations in zip(CONDITIONS, (base, linearized)):
                total, count = next_token_loss(activations[site], batch)
                self._add(f"loss_sum_{condition}", total)
                self._add(f"loss_count_{condition}", count)
            return
        pooled = [
            pool_tokens(acts[site], batch.attention_mask, "mean") for acts in (base, linearized)
        ]
        cosines = F.cosine_similarity(pooled[0].double(), pooled[1].double(), dim=-1)
        self._add("cosine_sum", cosines.sum())
        self._add("cosine_count", cosines.numel())

    def _add(self, key: str, value: float | torch.Tensor) -> None:
        """Sums kept as device tensors: nothing is read back to the host per batch."""
        if isinstance(value, torch.Tensor):
            value = value.detach().double()
            current = self.fidelity.get(key)
            if isinstance(current, torch.Tensor):
                value = value.to(current.device)
        self.fidelity[key] = self.fidelity.get(key, 0.0) + value

    def merge(self, other: Analysis) -> None:
        self._check_mergeable(other)
        assert isinstance(other, LinearizationEffect)
        for condition in CONDITIONS:
            self.states[condition].merge(other.states[condition])
        for key, value in other.fidelity.items():
            self._add(key, float(value))
        self.vocab_size = max(self.vocab_size, other.vocab_size)
        self.linearized_layers = self.linearized_layers or other.linearized_layers
        self.where = self.where or other.where

    # -- results -----------------------------------------------------------------------------
    def _condition_rows(
        self, condition: str, seed: int
    ) -> tuple[list[dict], list[dict], dict[tuple[str, str], AlphaDraws]]:
        state = self.states[condition]
        alpha_rows, draws = abstraction_draws(state, self.config, seed, self.name)
        ccgp_rows, split_rows = ccgp_tables(state, self.config, seed)
        merged = [{**a, **c, "condition": condition} for a, c in zip(alpha_rows, ccgp_rows)]
        return merged, [{**s, "condition": condition} for s in split_rows], draws

    def _fidelity_metrics(self) -> dict[str, float]:
        f = {key: float(value) for key, value in self.fidelity.items()}
        if "loss_count_base" in f:
            base = f["loss_sum_base"] / max(f["loss_count_base"], 1)
            linearized = f["loss_sum_linearized"] / max(f["loss_count_linearized"], 1)
            return {
                "fidelity.lm_loss_base": base,
                "fidelity.lm_loss_linearized": linearized,
                "fidelity.lm_loss_change": linearized - base,
                "fidelity.lm_loss_uniform": math.log(self.vocab_size)
                if self.vocab_size
                else math.nan,
            }
        return {"fidelity.output_embedding_cosine": f["cosine_sum"] / max(f["cosine_count"], 1)}

    def finalize(self) -> Result:
        if self.states["base"].empty:
            raise ValueError(
                "linearization-effect saw no data; give rows with concept and context."
            )
        seed = self.context.seed if self.context is not None else 0
        # One count for the step (the conditions): the site loops inside each add nothing, so
        # the count's target does not change between the two conditions.
        by_condition = {
            condition: self._condition_rows(condition, seed)
            for condition in progress.each(["base", "linearized"], "conditions finished")
        }
        base_rows, base_splits, base_draws = by_condition["base"]
        linearized_rows, linearized_splits, linearized_draws = by_condition["linearized"]
        changed = {r["site"] for r in linearized_rows}
        # Sites before the linearised layer are the same activations in both conditions.
        linearized_rows += [
            {**r, "condition": "linearized"} for r in base_rows if r["site"] not in changed
        ]
        linearized_draws = {**base_draws, **linearized_draws}
        per_task = base_rows + linearized_rows
        comparison = self._comparison(base_rows, linearized_rows)
        metrics: dict[str, float] = {}
        for condition, rows, draws in (
            ("base", base_rows, base_draws),
            ("linearized", linearized_rows, linearized_draws),
        ):
            averages = site_alpha_metrics(rows, draws, self.config, seed)
            averages.update(site_ccgp_metrics(rows))
            metrics.update({f"{k}_{condition}": v for k, v in averages.items()})
        summary = self._summary(comparison, base_draws, linearized_draws, seed)
        metrics.update({f"summary.{k}": v for k, v in summary.items() if k != "site"})
        metrics.update(self._fidelity_metrics())
        measure = (
            "lm_loss_change" if "fidelity.lm_loss_change" in metrics else "output_embedding_cosine"
        )
        linearization = {
            "layers": self.linearized_layers,
            "mode": self.config.mode,
            "where": self.where,
            "summary_site": summary["site"],
            "fidelity_measure": measure,
        }
        return Result(
            self.name,
            metrics=metrics,
            tables={
                "per_task": per_task,
                "comparison": comparison,
                "splits": base_splits + linearized_splits,
                "linearization": [linearization],
                "sites": site_tasks(base_rows, CCGP_COLUMNS),
            },
        )

    @staticmethod
    def _comparison(base_rows: list[dict], linearized_rows: list[dict]) -> list[dict]:
        linearized = {(r["site"], r["task"]): r for r in linearized_rows}
        rows = []
        for b in base_rows:
            lin = linearized[(b["site"], b["task"])]
            rows.append(
                {
                    "site": b["site"],
                    "task": b["task"],
                    "alpha_base": b["alpha"],
                    "alpha_linearized": lin["alpha"],
                    "alpha_change": lin["alpha"] - b["alpha"],
                    "rows_per_cell": b["rows_per_cell"],
                    "alpha_corrected_base": b["alpha_corrected"],
                    "alpha_corrected_linearized": lin["alpha_corrected"],
                    "alpha_corrected_change": lin["alpha_corrected"] - b["alpha_corrected"],
                    "ccgp_base": b["ccgp"],
                    "ccgp_linearized": lin["ccgp"],
                    "within_context_accuracy_base": b["within_context_accuracy"],
                    "within_context_accuracy_linearized": lin["within_context_accuracy"],
                    "mixed_context_accuracy_base": b["mixed_context_accuracy"],
                    "mixed_context_accuracy_linearized": lin["mixed_context_accuracy"],
                    "n_contexts": b["n_contexts"],
                }
            )
        return rows

    def _summary(
        self,
        comparison: list[dict],
        base_draws: dict[tuple[str, str], AlphaDraws],
        linearized_draws: dict[tuple[str, str], AlphaDraws],
        seed: int,
    ) -> dict[str, Any]:
        """The seed's headline at the output of the deepest linearised layer (or the first
        measured site after it), with an interval for the mean change of α: a paired bootstrap
        (both conditions resample the same contexts, then tasks are resampled)."""
        deepest = max(self.linearized_layers)
        sites = list(dict.fromkeys(r["site"] for r in comparison))

        def depth(name: str) -> int:
            layer = layer_of(name)
            return layer if layer is not None else -1

        after = [s for s in sites if depth(s) >= deepest]
        site = min(after, key=depth) if after else sites[-1]
        everything = [r for r in comparison if r["site"] == site]
        ccgp_up = [r["ccgp_linearized"] >= r["ccgp_base"] for r in everything]
        summary: dict[str, Any] = {"site": site}
        # The raw α over the tasks of one cell size (it grows with the rows per cell), the
        # corrected α over the tasks that define it.
        raw = comparable_tasks(everything)
        summary.update(self._paired("alpha", raw, base_draws, linearized_draws, seed, site))
        summary["n_tasks_alpha"] = float(len(raw))
        summary["rows_per_cell"] = raw[0]["rows_per_cell"]
        corrected = [
            r
            for r in everything
            if np.isfinite(r["alpha_corrected_base"])
            and np.isfinite(r["alpha_corrected_linearized"])
        ]
        summary.update(
            self._paired("alpha_corrected", corrected, base_draws, linearized_draws, seed, site)
        )
        summary["n_tasks_alpha_corrected"] = float(len(corrected))
        summary.update(
            {
                "ccgp_base": float(np.mean([r["ccgp_base"] for r in everything])),
                "ccgp_linearized": float(np.mean([r["ccgp_linearized"] for r in everything])),
                "tasks_ccgp_up_or_equal": float(sum(ccgp_up)),
                "n_tasks": float(len(everything)),
            }
        )
        return summary

    def _paired(
        self,
        column: str,
        rows: list[dict],
        base_draws: dict[tuple[str, str], AlphaDraws],
        linearized_draws: dict[tuple[str, str], AlphaDraws],
        seed: int,
        site: str,
    ) -> dict[str, float]:
        """Mean ``column`` base and linearised over ``rows``, its change with a paired
        bootstrap interval (both conditions resample the same contexts, then tasks are
        resampled), and how many tasks went up; NaN over no rows."""
        nan = float("nan")
        if not rows:
            keys = ("base", "linearized", "change", "change_ci_low", "change_ci_high")
            return {**{f"{column}_{k}": nan for k in keys}, f"tasks_{column}_up": nan}
        corrected = column == "alpha_corrected"
        pairs = [(base_draws[(site, r["task"])], linearized_draws[(site, r["task"])]) for r in rows]

        def point(d: AlphaDraws) -> float:
            return d.alpha_corrected if corrected else d.alpha

        def resampled(d: AlphaDraws) -> Any:
            return d.corrected_bootstrap if corrected else d.bootstrap

        low, high = site_mean_interval(
            [point(lin) - point(base) for base, lin in pairs],
            [resampled(lin) - resampled(base) for base, lin in pairs],
            task_rng(seed, site, "\x00alpha change" + ("" if not corrected else " corrected")),
            confidence=self.config.confidence,
        )
        return {
            f"{column}_base": float(np.mean([r[f"{column}_base"] for r in rows])),
            f"{column}_linearized": float(np.mean([r[f"{column}_linearized"] for r in rows])),
            f"{column}_change": float(np.mean([r[f"{column}_change"] for r in rows])),
            f"{column}_change_ci_low": low,
            f"{column}_change_ci_high": high,
            f"tasks_{column}_up": float(
                sum(r[f"{column}_linearized"] > r[f"{column}_base"] for r in rows)
            ),
        }

    @classmethod
    def plot(cls, result: Result, **kwargs: Any) -> Any:
        import matplotlib.pyplot as plt

        rows = result.tables["per_task"]
        by_condition = {c: [r for r in rows if r["condition"] == c] for c in CONDITIONS}
        figure, (ax_alpha, ax_ccgp) = plt.subplots(1, 2, figsize=(13, 4.5))
        plot_by_layer(ax_alpha, by_condition["base"], "alpha")
        plot_by_layer(ax_alpha, by_condition["linearized"], "alpha", linestyle="--", labelled=False)
        ax_alpha.set_ylabel("abstraction cosine α")
        ax_alpha.set_title("α by layer", fontsize=9)
        plot_ccgp(ax_ccgp, by_condition["base"])
        plot_by_layer(ax_ccgp, by_condition["linearized"], "ccgp", linestyle="--", labelled=False)
        ax_ccgp.set_title("CCGP beside within-context accuracy (base)", fontsize=9)
        legend_with_styles(
            ax_ccgp,
            {
                "base": "-",
                "linearised": "--",
                "within-context (base)": ":",
                "mixed-context (base)": "-.",
            },
        )
        info = (result.tables.get("linearization") or [{}])[0]
        # The cost through the metrics' own specs (words, unit, guards), as the reading writes it.
        words = {
            "fidelity.output_embedding_cosine": "output-embedding cosine",
            "fidelity.lm_loss_change": "next-token loss change",
        }
        cost = [
            f"{name} {metric_value(result, key)}"
            for key, name in words.items()
            if key in result.metrics
        ]
        if loss_above_uniform(result) is not None:  # the reading does not read it either
            cost = ["not read (the loss is above a uniform guess's)"]
        layers = ", ".join(str(layer) for layer in info.get("layers") or [])
        figure.suptitle(
            f"linearization-effect · {result.provenance.get('model_id', '')} · layers "
            f"{layers} → {human_name(str(info.get('mode')))} · cost: " + ", ".join(cost)
        )
        figure.tight_layout()
        return figure

"""Behavioural similarity: choice probabilities from option logits, p_S^n / p_I^n, and g(d).

Each row is a multiple-choice prompt with options x_1..x_n (their coordinates given) and a
probe p. The model's next-token log-probabilities of the option tokens, renormalised over the
options, are the choice probabilities D_i. Under the Luce rule D_i = g(d_i) / Σ_k g(d_k), so
log(D_i / D_1) = log g(d_i) − log g(d_1) for every pair of options of a trial: g is recovered
up to one scale by least squares over all trials (normalised to 1 at the smallest distance
seen, which is d = 0 when identification trials are present). The similarity test's accuracy
is the mean D of the option closest to the probe (ties share), the identification test's the
mean D of the option equal to the probe; both per number of options n, beside chance (1/n)
and a 95% interval over the drawn trials (a bootstrap resampling the rotations of one trial
together, never narrower than ± t standard errors). How the prompts were written (options
by value or by label, plain or in the model's chat template) is read from the data's
``labels`` / ``prompt_format`` columns and stated in the result, with the mean D of the option listed first (a position preference).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from geomlens.analyses.similarity.binning import distance_edges
from geomlens.analyses.similarity.stimulus_range import range_metrics
from geomlens.data.distances import Metric, parse_metric
from geomlens.models.adapter import LOGITS_SITE
from geomlens.plain_state import state_class

TESTS = ("similarity", "identification")
#: Bootstrap resamples of the trials for the accuracy intervals, and their coverage.
BOOTSTRAP_RESAMPLES = 2000
INTERVAL = 0.95


@state_class
@dataclass
class ChoiceRecords:
    """Per-row choice probabilities and coordinates (mergeable by concatenation)."""

    REQUIRED_COLUMNS = ("coordinate", "options", "option_coordinates", "test")

    index: list[int] = field(default_factory=list)
    test: list[str] = field(default_factory=list)
    probabilities: list[np.ndarray] = field(default_factory=list)
    probe: list[Any] = field(default_factory=list)
    option_coordinates: list[Any] = field(default_factory=list)
    first_token_options: set[str] = field(default_factory=set)
    trial: list[int] = field(default_factory=list)
    formats: set[tuple[str, str]] = field(default_factory=set)
    _token_ids: dict[str, int] = field(default_factory=dict, repr=False)

    def add(self, batch: Any, site: str, tokenizer: Any, first_token: bool) -> None:
        """Fold a batch: D over each row's options from the last real token's logits (``site``
        holds them ``[B, vocab]``, as ``logits.last`` does, or holds every token's)."""
        activation = batch.activations[site]
        logits = activation if activation.dim() == 2 else batch.pooled(site, "last")
        log_probs = torch.log_softmax(logits.detach().to(torch.float64), dim=-1).cpu()
        columns = batch.columns
        for row, index in enumerate(batch.index):
            options = list(columns["options"][row])
            if "option_token_ids" in columns:
                ids = [int(i) for i in columns["option_token_ids"][row]]
            else:
                ids = [self._option_token(o, tokenizer, first_token) for o in options]
            if len(ids) != len(options) or len(ids) < 1:
                raise ValueError(f"Row {index}: {len(options)} options but {len(ids)} token ids.")
            if len(set(ids)) < len(ids):
                raise ValueError(
                    f"Row {index}: options {options} share a scoring token (ids {ids}), so the "
                    "model's choice between them cannot be read; use options whose (first) "
                    "tokens differ."
                )
            chosen = log_probs[row, ids]
            self.index.append(int(index))
            self.test.append(_test_name(columns["test"][row]))
            self.probabilities.append(torch.softmax(chosen, dim=0).numpy().copy())
            self.probe.append(columns["coordinate"][row])
            self.option_coordinates.append(list(columns["option_coordinates"][row]))
            # Rows without a trial id are trials of their own (negative ids never collide).
            trial = columns["trial"][row] if "trial" in columns else -1 - int(index)
            self.trial.append(int(trial))
            self.formats.add(
                (
                    str(columns["labels"][row]) if "labels" in columns else "values",
                    str(columns["prompt_format"][row]) if "prompt_format" in columns else "plain",
                )
            )

    def _option_token(self, option: str, tokenizer: Any, first_token: bool) -> int:
        if option in self._token_ids:
            return self._token_ids[option]
        if tokenizer is None:
            raise ValueError(
                "Behavioural similarity needs the model's tokenizer to find the option tokens, or "
                "an 'option_token_ids' column with one token id per option."
            )
        ids = tokenizer(option, add_special_tokens=False)["input_ids"]
        unknown = getattr(tokenizer, "unk_token_id", None)
        if unknown is not None and ids and ids[0] == unknown:
            raise ValueError(
                f"Option {str(option)!r} is the tokenizer's unknown token, so every such option "
                "would get the same logit; use options the tokenizer knows."
            )
        if len(ids) != 1:
            if not first_token or not ids:
                pieces = tokenizer.convert_ids_to_tokens(ids) if ids else []
                raise ValueError(
                    f"Option {str(option)!r} is {len(ids)} tokens {pieces}, so its next-token "
                    "probability is not one logit. Use single-token options (e.g. a leading "
                    "space, shorter labels), or pass first_token=True to score options by their "
                    "first token (recorded in the result)."
                )
            self.first_token_options.add(option)
        self._token_ids[option] = int(ids[0])
        return int(ids[0])

    def merge(self, other: ChoiceRecords) -> None:
        self.index.extend(other.index)
        self.test.extend(other.test)
        self.probabilities.extend(other.probabilities)
        self.probe.extend(other.probe)
        self.option_coordinates.extend(other.option_coordinates)
        self.first_token_options |= other.first_token_options
        self.trial.extend(other.trial)
        self.formats |= other.formats

    def _row_order(self) -> np.ndarray:
        return np.argsort(self.index, kind="stable")

    def _coordinates_seen(self) -> list[Any]:
        """Every probe's and option's coordinate (the stimuli the choices were asked over)."""
        return [c for k in self._row_order() for c in (self.probe[k], *self.option_coordinates[k])]

    def trials(self, metric: Metric) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """(test, D over options, option distances to the probe) per row, in row order."""
        distance = parse_metric(metric)
        out = []
        for k in self._row_order():
            points = [self.probe[k], *self.option_coordinates[k]]
            coordinates = np.asarray([np.asarray(c, dtype=float) for c in points])
            out.append(
                (self.test[k], self.probabilities[k], np.round(distance(coordinates)[0, 1:], 12))
            )
        return out

    def finalize(self, name: str, metric: Metric, bins: int | None) -> Any:
        from geomlens.results import Result

        if not self.index:
            raise ValueError(f"{name} (behavioural) saw no prompts; give multiple-choice rows.")
        trials = self.trials(metric)
        accuracy_rows = choice_accuracy(trials, [self.trial[k] for k in self._row_order()])
        metrics: dict[str, float] = {}
        for row in accuracy_rows:
            key = "p_similarity" if row["test"] == "similarity" else "p_identification"
            stem = f"{LOGITS_SITE}.{key}_n{row['n']}"
            metrics[stem] = row["accuracy"]
            metrics[f"{stem}_ci_low"] = row["ci_low"]
            metrics[f"{stem}_ci_high"] = row["ci_high"]
            if row["n"] == 2:
                metrics[f"{LOGITS_SITE}.{key}"] = row["accuracy"]
        metrics[f"{LOGITS_SITE}.first_token_options"] = float(len(self.first_token_options))
        metrics.update(range_metrics(LOGITS_SITE, self._coordinates_seen()))
        profile = recover_similarity(
            [d for _, _, d in trials], [np.log(p) for _, p, _ in trials], bins
        )
        return Result(
            name,
            metrics=metrics,
            tables={
                "g_of_d": [{"site": LOGITS_SITE, **row} for row in profile],
                "choice_accuracy": accuracy_rows,
                "first_token_options": [{"option": o} for o in sorted(self.first_token_options)],
                "prompts": [
                    {"labels": labels, "prompt_format": prompt_format}
                    for labels, prompt_format in sorted(self.formats)
                ],
                "position_preference": position_preference(trials),
            },
        )


def _test_name(value: Any) -> str:
    test = str(value)
    if test not in TESTS:
        raise ValueError(f"Column 'test' must be 'similarity' or 'identification'; got {test!r}.")
    return test


def choice_accuracy(
    trials: list[tuple[str, np.ndarray, np.ndarray]],
    trial_ids: list[int] | None = None,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Mean D of the right answer per (test, n): with its standard error, chance (1/n), a 95%
    interval (:func:`accuracy_interval`: the trial bootstrap, never narrower than the standard
    error allows), whether the interval lies above chance, and counts."""
    trial_ids = list(range(len(trials))) if trial_ids is None else list(trial_ids)
    scores: dict[tuple[str, int], list[tuple[int, float]]] = {}
    for (test, probabilities, distances), trial in zip(trials, trial_ids):
        if test == "similarity":
            right = distances == distances.min()
        else:
            right = distances == 0
            if right.sum() != 1:
                raise ValueError(
                    "An identification prompt needs exactly one option equal to the probe; "
                    f"got option distances {distances.tolist()}."
                )
        scores.setdefault((test, len(probabilities)), []).append(
            (trial, float(probabilities[right].sum() / right.sum()))
        )
    rows = []
    rng = np.random.default_rng(seed)
    for (test, n), scored in sorted(scores.items()):
        values = np.asarray([v for _, v in scored])
        se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")
        low, high = accuracy_interval([t for t, _ in scored], values, se, rng)
        rows.append(
            {
                "test": test,
                "n": n,
                "accuracy": float(values.mean()),
                "se": float(se),
                "chance": 1.0 / n,
                "ci_low": low,
                "ci_high": high,
                "above_chance": bool(low > 1.0 / n),
                "trials": len(set(t for t, _ in scored)),
                "prompts": len(values),
            }
        )
    return rows


def accuracy_interval(
    trial_ids: list[int], values: np.ndarray, se: float, rng: np.random.Generator
) -> tuple[float, float]:
    """95 % interval of the mean of ``values`` (probabilities): the percentile bootstrap over
    whole trials (rows sharing a trial id are resampled together; without ids every row is a
    trial), widened to at least mean ± t·SE, with SE the larger of the prompts' and the trial
    means' standard errors and t Student's quantile on (trials − 1) degrees of freedom; clipped
    to [0, 1].

    The bootstrap alone is no interval over few trials: two trials whose rotations each average
    out to one half give two nearly equal means, and an interval a ten-thousandth wide that
    misses 1/2 by chance of the seed, read as "above" or "below chance". The t floor makes a
    handful of trials as uncertain as they are (t = 12.7 for two trials).
    """
    from scipy.stats import t as student_t

    groups = _by_trial(trial_ids, values)
    low, high = _trial_bootstrap(groups, rng)
    if len(groups) < 2:
        return low, high
    means = np.array([np.mean(v) for v in groups])
    spread = max(se, means.std(ddof=1) / np.sqrt(len(means)))
    half = float(student_t.ppf(1 - (1 - INTERVAL) / 2, len(means) - 1)) * spread
    centre = float(values.mean())
    return max(0.0, min(low, centre - half)), min(1.0, max(high, centre + half))


def _by_trial(trial_ids: list[int], values: np.ndarray) -> list[list[float]]:
    """The values of each trial (rows sharing a trial id), trials in order of first appearance."""
    groups: dict[int, list[float]] = {}
    for trial, value in zip(trial_ids, values):
        groups.setdefault(trial, []).append(float(value))
    return list(groups.values())


def _trial_bootstrap(groups: list[list[float]], rng: np.random.Generator) -> tuple[float, float]:
    """Percentile interval of the mean of all values when whole trials (``groups``) are
    resampled."""
    if len(groups) < 2:
        return float("nan"), float("nan")
    sums = np.array([np.sum(v) for v in groups])
    sizes = np.array([len(v) for v in groups], dtype=float)
    draws = rng.integers(len(groups), size=(BOOTSTRAP_RESAMPLES, len(groups)))
    means = sums[draws].sum(axis=1) / sizes[draws].sum(axis=1)
    tail = (1 - INTERVAL) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def position_preference(trials: list[tuple[str, np.ndarray, np.ndarray]]) -> list[dict[str, Any]]:
    """Per n: the mean D of the option listed first, beside chance 1/n. With options shown in
    every rotation a model without a position preference gives chance here."""
    first: dict[int, list[float]] = {}
    for _, probabilities, _ in trials:
        first.setdefault(len(probabilities), []).append(float(probabilities[0]))
    return [
        {"n": n, "first_option_share": float(np.mean(v)), "chance": 1.0 / n, "prompts": len(v)}
        for n, v in sorted(first.items())
    ]


def recover_similarity(
    distances: list[np.ndarray], log_probabilities: list[np.ndarray], bins: int | None = None
) -> list[dict[str, float]]:
    """g(d) up to scale from choice log-probabilities, by least squares on log-ratios.

    For every trial and option i > 1: log D_i − log D_1 = log g(d_i) − log g(d_1), with one
    unknown log g per distance bin (the bins of
    :func:`~geomlens.analyses.similarity.binning.distance_edges` over every option's distance
    to its probe, the representational profile's rule: one per distinct distance, pooling only
    rarely offered ones). The bin of the smallest distance is the reference
    (g = 1); every other bin must be linked to it by a chain of trials. Returns rows
    (distance, mean = g, std = standard error of g, count = options seen in the bin).
    """
    every = np.concatenate(distances)
    # The representational profile's binning (one rule): every distinct distance its own bin
    # while it is seen often enough, so d₁ is the smallest distance an option was offered at.
    edges = distance_edges(every, bins)

    def which(d: np.ndarray) -> np.ndarray:
        return np.digitize(d, edges[1:-1])

    of_every = which(every)
    centres = np.array(
        [
            every[of_every == k].mean() if np.any(of_every == k) else np.nan
            for k in range(len(edges) - 1)
        ]
    )
    rows: list[np.ndarray] = []
    differences: list[float] = []
    counts = np.zeros(len(centres))
    for d, log_p in zip(distances, log_probabilities):
        b = which(d)
        np.add.at(counts, b, 1)
        for i in range(1, len(d)):
            if b[i] != b[0]:
                row = np.zeros(len(centres))
                row[b[i]] += 1.0
                row[b[0]] -= 1.0
                rows.append(row)
                differences.append(log_p[i] - log_p[0])
    seen = np.nonzero(counts)[0]
    if not rows or len(seen) < 2:
        raise ValueError(
            "The choice trials never compare options at different distances from the probe, so "
            "g cannot be recovered; use prompts whose options lie at several distances."
        )
    design = np.asarray(rows)[:, seen]
    target = np.asarray(differences)
    # seen[0] is the smallest distance: its log g is fixed at 0, the rest are free.
    free = design[:, 1:]
    solution, *_ = np.linalg.lstsq(free, target, rcond=None)
    residual = target - free @ solution
    dof = max(len(target) - free.shape[1], 1)
    sigma2 = float(residual @ residual) / dof
    covariance = sigma2 * np.linalg.pinv(free.T @ free)
    log_g = np.concatenate([[0.0], solution])
    se_log = np.concatenate([[0.0], np.sqrt(np.clip(np.diag(covariance), 0, None))])
    g = np.exp(log_g)
    return [
        {
            "distance": float(centres[k]),
            "mean": float(gk),
            "std": float(gk * s),
            "count": int(counts[k]),
        }
        for k, gk, s in zip(seen, g, se_log)
    ]

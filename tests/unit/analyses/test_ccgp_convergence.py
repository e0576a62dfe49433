"""ccgp: accuracies that do not depend on where the solver stopped, and site means over the same
tasks."""

from __future__ import annotations

import numpy as np
import pytest

import geomlens as gl
from geomlens.analyses.statistics import probe_scores


def noisy(*, k: int = 8, d: int = 60, n: int = 12, seed: int = 0):
    """A weak shared concept direction under heavy noise, about as many features as rows: a
    probe whose optimum is far from every warm start and many test rows near its boundary."""
    rng = np.random.default_rng(seed)
    direction = rng.standard_normal(d)
    direction /= np.linalg.norm(direction)
    rows, concept, context = [], [], []
    for c in range(k):
        shift = 2 * rng.standard_normal(d)
        for sign, name in ((-1, "minus"), (1, "plus")):
            rows.append(shift + 0.6 * sign * direction + rng.standard_normal((n, d)))
            concept += [name] * n
            context += [f"c{c}"] * n
    return np.concatenate(rows), np.array(concept), np.array(context)


def split_accuracies(rows, concept, context, monkeypatch, reverse: bool):
    original = probe_scores.context_splits

    def ordered(contexts, max_splits):
        scheme, held = original(contexts, max_splits)
        return scheme, held[::-1] if reverse else held

    monkeypatch.setattr(probe_scores, "context_splits", ordered)
    summary, splits = probe_scores.ccgp_scores(
        rows, concept, context, seed=0, max_splits=0, folds=3, inverse_regularisation=100.0
    )
    return summary, {s["held_out"]: s["accuracy"] for s in splits}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_split_order_does_not_change_any_accuracy(monkeypatch, seed):
    rows, concept, context = noisy(seed=seed)
    forward, forward_splits = split_accuracies(rows, concept, context, monkeypatch, False)
    backward, backward_splits = split_accuracies(rows, concept, context, monkeypatch, True)
    assert forward_splits == backward_splits
    assert forward["ccgp"] == backward["ccgp"]


def test_each_split_equals_a_fresh_converged_fit():
    """Every held-out accuracy equals that of an independent scikit-learn fit run to
    convergence on the same training contexts."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    rows, concept, context = noisy(seed=4)
    _, splits = probe_scores.ccgp_scores(
        rows, concept, context, seed=0, max_splits=0, folds=3, inverse_regularisation=100.0
    )
    for split in splits:
        test = np.isin(context, split["held_out"].split("|"))
        scaler = StandardScaler().fit(rows[~test])
        model = LogisticRegression(C=100.0, tol=1e-10, max_iter=100_000)
        model.fit(scaler.transform(rows[~test]), concept[~test])
        expected = model.score(scaler.transform(rows[test]), concept[test])
        assert split["accuracy"] == pytest.approx(expected, abs=1e-9)


def test_site_ccgp_beside_within_context_accuracy_averages_the_same_tasks():
    """One task with several rows per cell (a within-context accuracy) and one with one row
    per cell (none): ``ccgp_within_tasks`` is the first task's CCGP, ``ccgp`` the mean of both."""
    rng = np.random.default_rng(0)
    rows, concept, context, task = [], [], [], []
    for name, n in (("crossed", 10), ("pairs", 1)):
        for c in range(6):
            shift = 3 * rng.standard_normal(16)
            for sign, value in ((-1, "minus"), (1, "plus")):
                rows.append(shift + sign * np.eye(16)[0] + 0.3 * rng.standard_normal((n, 16)))
                concept += [value] * n
                context += [f"{name}{c}"] * n
                task += [name] * n
    data = {"concept": concept, "context": context, "task": task}
    result = gl.run("ccgp", gl.attach({"x": np.concatenate(rows)}), data)
    by_task = {r["task"]: r for r in result.tables["per_task"]}
    assert np.isnan(by_task["pairs"]["within_context_accuracy"])
    m = result.metrics
    assert m["x.within_context_accuracy"] == by_task["crossed"]["within_context_accuracy"]
    assert m["x.ccgp_within_tasks"] == by_task["crossed"]["ccgp"]
    assert m["x.ccgp"] == pytest.approx((by_task["crossed"]["ccgp"] + by_task["pairs"]["ccgp"]) / 2)

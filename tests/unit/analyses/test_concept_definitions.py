"""Abstraction and CCGP report what their names say, on planted data.

- 5: the shipped crossed set uses different words per context; results name the tasks a site
  mean averages;
- 6: no zero-width interval from two contexts; the site interval is an interval for the site
  mean (tasks and contexts resampled), not a mean of per-task endpoints;
- 7: within_context_accuracy is cross-validated inside each context;
- 8: CCGP leaves one context out exactly, however many contexts there are;
- 9: the default null shuffles the concept label within each context; both nulls are named.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.planted_concepts import planted_many_contexts

import geomlens as gl
from geomlens.analyses.statistics import alpha_scores
from geomlens.data.concepts import english_concepts


def planted_equal_cosines(
    cosine: float, *, k: int, d: int = 40, n: int = 10, noise: float = 0.02, seed: int = 0
):
    """k contexts whose difference vectors all have pairwise cosine ``cosine``, with small
    context offsets."""
    return planted_many_contexts(cosine, k=k, d=d, n=n, noise=noise, offset=0.1, seed=seed)


def run(name, rows, concept, context, task=None, **options):
    data = {"concept": concept, "context": context}
    if task is not None:
        data["task"] = task
    return gl.run(name, gl.attach({"x": rows}), data, **options)


# -- 5 ----------------------------------------------------------------------------------------
def test_crossed_set_uses_different_words_in_each_colour():
    rows = english_concepts(["animacy-by-colour"])
    words = {}
    for text, context in zip(rows["text"], rows["context"]):
        words.setdefault(context, set()).add(text.split("[[")[1].split("]]")[0])
    assert set(words) == {"red", "blue"}
    assert not words["red"] & words["blue"], "the same words in both colours make α ≈ 1"
    assert len(words["red"]) == len(words["blue"]) == 40


def test_results_name_the_tasks_a_site_mean_averages():
    high = planted_equal_cosines(0.8, k=5, seed=1)
    low = planted_equal_cosines(0.2, k=2, seed=2)
    rows = np.concatenate([high[0], low[0]])
    task = ["high"] * len(high[1]) + ["low"] * len(low[1])
    result = run("abstraction", rows, high[1] + low[1], high[2] + low[2], task, n_shuffles=50)
    (site,) = result.tables["sites"]
    assert site["tasks"] == "high, low" and site["n_tasks"] == 2
    assert site["alpha_ci_low_tasks"] == "high"  # "low" has two contexts: no interval
    assert result.metrics["x.n_tasks"] == 2


# -- 6 ----------------------------------------------------------------------------------------
def test_two_contexts_have_no_bootstrap_interval():
    result = run("abstraction", *planted_equal_cosines(0.6, k=2), n_shuffles=50)
    (row,) = result.tables["per_task"]
    assert row["alpha"] == pytest.approx(0.6, abs=0.02)
    assert np.isnan(row["alpha_ci_low"]) and np.isnan(row["alpha_ci_high"])
    # One task without an interval of its own: nothing to resample for the site mean either.
    assert np.isnan(result.metrics["x.alpha_ci_low"])


def test_site_interval_is_an_interval_for_the_mean_over_tasks():
    planted = {
        name: planted_equal_cosines(alpha, k=12, seed=s)
        for s, (name, alpha) in enumerate({"a": 0.2, "b": 0.5, "c": 0.8}.items())
    }
    rows = np.concatenate([p[0] for p in planted.values()])
    concept = sum((p[1] for p in planted.values()), [])
    context = sum((p[2] for p in planted.values()), [])
    task = sum(([name] * len(p[1]) for name, p in planted.items()), [])
    result = run("abstraction", rows, concept, context, task, n_bootstrap=2000, n_shuffles=20)
    m = result.metrics
    per_task = {r["task"]: r for r in result.tables["per_task"]}
    # Each task's interval is narrow (its contexts agree), but the three tasks differ by 0.3:
    # resampling tasks, a site mean of three draws from {0.2, 0.5, 0.8} falls at 0.3 or below
    # (and at 0.7 or above) with probability 7/27 each, far more than 2.5 %.
    assert all(r["alpha_ci_high"] - r["alpha_ci_low"] < 0.05 for r in per_task.values())
    assert m["x.alpha"] == pytest.approx(0.5, abs=0.02)
    assert m["x.alpha_ci_low"] <= 0.32 and m["x.alpha_ci_high"] >= 0.68


# -- 7 ----------------------------------------------------------------------------------------
def planted_xor(*, k: int = 4, d: int = 16, n: int = 12, seed: int = 0):
    """The concept is read along +v in half the contexts and along −v in the others: perfectly
    separable inside every context, not linearly separable across them (an XOR)."""
    rng = np.random.default_rng(seed)
    v = np.eye(d)[0]
    rows, concept, context = [], [], []
    for c in range(k):
        flip = 1.0 if c % 2 == 0 else -1.0
        for sign, name in ((-1.0, "minus"), (1.0, "plus")):
            rows.append(flip * sign * 2.0 * v + 0.3 * rng.standard_normal((n, d)))
            concept += [name] * n
            context += [f"c{c}"] * n
    return np.concatenate(rows).astype(np.float32), concept, context


def test_within_context_accuracy_is_cross_validated_inside_each_context():
    result = run("ccgp", *planted_xor(), folds=3)
    (row,) = result.tables["per_task"]
    assert row["within_context_accuracy"] > 0.95  # each context on its own is easy
    assert row["mixed_context_accuracy"] < 0.75  # one probe for all contexts is not
    assert row["n_within_contexts"] == 4
    assert row["ccgp"] < 0.5  # held-out contexts read the concept the other way round


def test_within_context_accuracy_is_undefined_with_one_row_per_cell():
    rows, concept, context = planted_equal_cosines(0.5, k=8, n=1)
    result = run("ccgp", rows, concept, context, folds=3)
    (row,) = result.tables["per_task"]
    assert np.isnan(row["within_context_accuracy"]) and row["n_within_contexts"] == 0
    assert 0 <= row["mixed_context_accuracy"] <= 1


# -- 8 ----------------------------------------------------------------------------------------
def test_ccgp_leaves_one_context_out_exactly_with_many_contexts():
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import LeaveOneGroupOut
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rows, concept, context = planted_equal_cosines(0.3, k=25, n=4, noise=0.8, seed=3)
    result = run("ccgp", rows, concept, context, folds=2)
    (row,) = result.tables["per_task"]
    assert row["split_scheme"] == "leave one context out" and row["n_splits"] == 25
    splits = {s["held_out"]: s["accuracy"] for s in result.tables["splits"]}
    labels, groups = np.asarray(concept), np.asarray(context)
    expected = {}
    for train, test in LeaveOneGroupOut().split(rows, labels, groups):
        probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000))
        probe.fit(rows[train].astype(np.float64), labels[train])
        expected[groups[test][0]] = probe.score(rows[test].astype(np.float64), labels[test])
    assert splits.keys() == expected.keys()
    for held, accuracy in expected.items():  # warm starts may move one row of eight at most
        assert splits[held] == pytest.approx(accuracy, abs=1 / 8 + 1e-9), held
    assert row["ccgp"] == pytest.approx(np.mean(list(expected.values())), abs=0.01)


def test_grouped_splits_remain_an_option_and_are_recorded():
    rows, concept, context = planted_equal_cosines(0.3, k=25, n=4, noise=0.8, seed=3)
    (row,) = run("ccgp", rows, concept, context, folds=2, max_splits=5).tables["per_task"]
    assert row["n_splits"] == 5 and "5 groups" in row["split_scheme"]


# -- 9 ----------------------------------------------------------------------------------------
def test_default_null_shuffles_the_label_within_each_context():
    # Four contexts with all pairwise cosines 0.9 and ten rows per cell: the within-context null
    # shuffles the concept label among each context's rows, so it can reject a planted α (the
    # old sign flip of each context's difference could not: its 95th percentile was α itself).
    result = run("abstraction", *planted_equal_cosines(0.9, k=4), n_shuffles=4000, n_bootstrap=10)
    (row,) = result.tables["per_task"]
    assert row["alpha_null_kind"] == alpha_scores.ROW_SHUFFLE
    assert row["alpha"] == pytest.approx(0.9, abs=0.01)
    assert row["alpha_null_p95"] < row["alpha"] - 0.2
    assert row["alpha_null_p95_within_context"] == row["alpha_null_p95"]
    assert row["alpha_p_value"] < 0.01
    assert "alpha_null_p95_across_contexts" in row


def test_an_unknown_null_is_refused_naming_both():
    with pytest.raises(ValueError, match="within-context"):
        run("abstraction", *planted_equal_cosines(0.5, k=3), null="rows")


# -- Everywhere: the plain-words readings ----------------------------------------------------
def test_abstraction_reading_names_the_tasks_the_interval_and_the_null():
    from geomlens.report.readings import read

    planted = {
        name: planted_equal_cosines(alpha, k=6, seed=s)
        for s, (name, alpha) in enumerate({"a": 0.3, "b": 0.7}.items())
    }
    rows = np.concatenate([p[0] for p in planted.values()])
    concept = sum((p[1] for p in planted.values()), [])
    context = sum((p[2] for p in planted.values()), [])
    task = sum(([name] * len(p[1]) for name, p in planted.items()), [])
    result = run("abstraction", rows, concept, context, task, n_bootstrap=200, n_shuffles=100)
    text = " ".join(read(result))
    m = result.metrics
    assert "the mean over a, b" in text
    assert f"95 % interval {m['x.alpha_ci_low']:.3g} to {m['x.alpha_ci_high']:.3g}" in text
    assert "within-context null" in text and f"{m['x.alpha_null_p95']:.3g}" in text


@pytest.mark.parametrize(
    ("low", "high", "verdict"),
    [(0.01, 0.05, "resolved at this level"), (-0.02, 0.04, "is not resolved")],
)
def test_linearization_reading_gives_the_change_its_interval_and_its_cost(low, high, verdict):
    from geomlens.report.readings import read

    metrics = {
        "summary.alpha_base": 0.40, "summary.alpha_linearized": 0.43,
        "summary.alpha_change": 0.03, "summary.alpha_change_ci_low": low,
        "summary.alpha_change_ci_high": high, "summary.tasks_alpha_up": 4.0,
        "summary.n_tasks": 5.0, "summary.ccgp_base": 0.98, "summary.ccgp_linearized": 0.99,
        "fidelity.output_embedding_cosine": 0.24,
    }  # fmt: skip
    info = {"layers": [4], "mode": "identity", "summary_site": "blocks.4.hook_resid_post"}
    result = gl.Result("linearization-effect", metrics=metrics, tables={"linearization": [info]})
    text = " ".join(read(result))
    assert f"95 % interval {low:.3g} to {high:.3g}" in text and verdict in text
    assert "output embedding keeps a cosine of 0.24" in text


# -- vectorised resampling equals the direct computation -------------------------------------
def test_vectorised_bootstrap_and_dealt_null_equal_direct_loops():
    from geomlens.analyses.statistics.alpha_scores import (
        across_contexts_null,
        bootstrap_alphas,
        difference_cosines,
    )

    rng = np.random.default_rng(0)
    means = rng.standard_normal((2, 7, 20)) + np.linspace(0, 1, 20)
    cosines, k = difference_cosines(means), 7
    draws = rng.integers(0, k, size=(300, k))
    direct = [cosines[np.ix_(i, i)][i[:, None] != i[None, :]].mean() for i in draws]
    counts = np.stack([np.bincount(i, minlength=k) for i in draws]).astype(float)
    assert np.allclose(bootstrap_alphas(cosines, counts), direct, atol=1e-12)
    # The dealt null from the Gram matrix against dealing the vectors themselves, same draws.
    seed = np.random.default_rng(5)
    vectorised = across_contexts_null(means, seed, 50)
    dealt = np.random.default_rng(5).permuted(np.tile(np.arange(2 * k), (50, 1)), axis=1)
    flat = means.reshape(2 * k, -1)
    for value, order in zip(vectorised, dealt):
        differences = flat[order[:k]] - flat[order[k:]]
        unit = differences / np.linalg.norm(differences, axis=1, keepdims=True)
        assert value == pytest.approx((unit @ unit.T)[np.triu_indices(k, 1)].mean(), abs=1e-10)


def test_ccgp_reading_compares_ccgp_with_the_ceiling_of_the_same_tasks():
    from geomlens.report.readings import read

    xor = planted_xor()
    pairs = planted_equal_cosines(0.5, k=8, d=16, n=1)
    rows = np.concatenate([xor[0], pairs[0]])
    task = ["xor"] * len(xor[1]) + ["pairs"] * len(pairs[1])
    result = run("ccgp", rows, xor[1] + pairs[1], xor[2] + pairs[2], task, folds=3)
    text = " ".join(read(result))
    by_task = {r["task"]: r for r in result.tables["per_task"]}
    within = by_task["xor"]["within_context_accuracy"]
    assert "For xor, whose contexts hold several rows of each value, CCGP is " in text
    assert f"{by_task['xor']['ccgp']:.3g} against a within-context accuracy of {within:.3g}" in text
    assert "pairs have one row per value and context" in text

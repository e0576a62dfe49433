"""abstraction: planted class means with a chosen α (SPEC §2.3 geometry) come back through the
recorded backend; merging halves equals one pass; bad concept data fails with a clear message."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.planted_concepts import planted_many_contexts

import geomlens as gl
from geomlens.analyses.abstraction import Abstraction
from geomlens.data.dataset import Dataset


def planted_two_context(
    alpha: float, *, d: int = 32, n: int = 60, noise: float = 0.2, seed: int = 0
):
    """4 classes (s, c) ∈ {±1}²; class means m(s, c) = ½ s a v_S + ½ s c b v_SC + c v_C with
    orthonormal v_S, v_SC, v_C, so u_c = a v_S + c b v_SC and cos(u_+, u_-) = (a² − b²)/(a² + b²).
    """
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((d, 3)))
    v_s, v_sc, v_c = basis.T
    nu = (1 - alpha) / (1 + alpha)  # inverse SNR b²/a²
    a, b = 2.0, 2.0 * np.sqrt(nu)
    rows, concept, context = [], [], []
    for s in (-1, 1):
        for c in (-1, 1):
            mean = 0.5 * s * a * v_s + 0.5 * s * c * b * v_sc + c * v_c
            rows.append(mean + noise * rng.standard_normal((n, d)))
            concept += ["plus" if s > 0 else "minus"] * n
            context += ["red" if c > 0 else "blue"] * n
    return np.concatenate(rows).astype(np.float32), concept, context


def run_abstraction(rows, concept, context, **options):
    adapter = gl.attach({"x": rows})
    return gl.run("abstraction", adapter, {"concept": concept, "context": context}, **options)


@pytest.mark.parametrize("alpha", [-0.4, 0.2, 0.7])
def test_two_contexts_give_planted_alpha(alpha):
    result = run_abstraction(*planted_two_context(alpha), n_bootstrap=200, n_shuffles=100)
    # Class-mean noise is 0.2·sqrt(2/60) per dimension against |u| = 2..4: well under 0.05.
    assert result.metrics["x.alpha"] == pytest.approx(alpha, abs=0.05)
    (row,) = result.tables["per_task"]
    assert row["task"] == "all" and row["n_contexts"] == 2


@pytest.mark.parametrize("alpha", [0.2, 0.5, 0.8])
def test_many_contexts_give_planted_alpha_inside_ci(alpha):
    result = run_abstraction(*planted_many_contexts(alpha), n_bootstrap=300, n_shuffles=100)
    m = result.metrics
    assert m["x.alpha"] == pytest.approx(alpha, abs=0.05)
    assert m["x.alpha_ci_low"] <= m["x.alpha"] <= m["x.alpha_ci_high"]
    assert m["x.alpha_ci_low"] - 0.05 <= alpha <= m["x.alpha_ci_high"] + 0.05
    # The shuffle null breaks the shared direction: centred near 0 and below the planted α.
    assert abs(m["x.alpha_null"]) < 0.1
    assert m["x.alpha_null_p95"] < alpha


def test_no_shared_direction_gives_alpha_near_zero_and_high_p_value():
    rng = np.random.default_rng(3)
    k, d, n = 12, 64, 20
    rows, concept, context = [], [], []
    for c in range(k):
        u = rng.standard_normal(d)
        for sign, name in ((-0.5, "minus"), (0.5, "plus")):
            rows.append(sign * u + 0.1 * rng.standard_normal((n, d)))
            concept += [name] * n
            context += [f"c{c}"] * n
    result = run_abstraction(np.concatenate(rows).astype(np.float32), concept, context)
    (row,) = result.tables["per_task"]
    assert abs(row["alpha"]) < 0.1
    assert row["alpha_p_value"] > 0.05


def test_tasks_are_separate_and_metrics_average_them():
    rows_a, concept_a, context_a = planted_many_contexts(0.8, seed=4)
    rows_b, concept_b, context_b = planted_many_contexts(0.2, seed=5)
    rows = np.concatenate([rows_a, rows_b])
    data = {
        "concept": concept_a + concept_b,
        "context": context_a + context_b,
        "task": ["high"] * len(concept_a) + ["low"] * len(concept_b),
    }
    result = gl.run("abstraction", gl.attach({"x": rows}), data, n_bootstrap=100, n_shuffles=50)
    by_task = {r["task"]: r["alpha"] for r in result.tables["per_task"]}
    assert by_task["high"] == pytest.approx(0.8, abs=0.05)
    assert by_task["low"] == pytest.approx(0.2, abs=0.05)
    assert result.metrics["x.alpha"] == pytest.approx(np.mean(list(by_task.values())))


def test_merged_halves_equal_one_pass_and_runs_are_deterministic():
    rows, concept, context = planted_many_contexts(0.5, k=6)
    adapter = gl.attach({"x": rows})
    dataset = Dataset(num_rows=len(rows), columns={"concept": concept, "context": context})
    order = np.random.default_rng(0).permutation(len(rows))
    halves = [Abstraction(n_bootstrap=100, n_shuffles=50) for _ in range(2)]
    for analysis, part in zip(halves, np.array_split(order, 2)):
        gl.stream([analysis], adapter, dataset, rows=part, seed=7)
    halves[1].merge(halves[0])  # merge order differs from the data order on purpose
    merged = halves[1].finalize()
    whole = Abstraction(n_bootstrap=100, n_shuffles=50)
    gl.stream([whole], adapter, dataset, seed=7)
    one_pass = whole.finalize()
    for key, value in one_pass.metrics.items():
        assert merged.metrics[key] == pytest.approx(value, abs=1e-12)
    again = gl.run("abstraction", adapter, dataset, n_bootstrap=100, n_shuffles=50, seed=7)
    assert again.metrics == one_pass.metrics


def test_merging_an_empty_state_changes_nothing():
    rows, concept, context = planted_two_context(0.5)
    adapter = gl.attach({"x": rows})
    dataset = Dataset(num_rows=len(rows), columns={"concept": concept, "context": context})
    full, empty = (
        Abstraction(n_bootstrap=50, n_shuffles=20),
        Abstraction(n_bootstrap=50, n_shuffles=20),
    )
    gl.stream([full], adapter, dataset)
    before = full.finalize().metrics
    full.merge(empty)
    empty.merge(full)
    # Two contexts: the interval is NaN (see test_two_contexts_have_no_bootstrap_interval).
    after = full.finalize().metrics
    assert after.keys() == before.keys()
    assert all(
        after[k] == before[k] or (np.isnan(after[k]) and np.isnan(before[k])) for k in before
    )
    assert empty.state.means.keys() == full.state.means.keys()


def test_result_survives_json_and_plots(tmp_path):
    result = run_abstraction(*planted_many_contexts(0.5, k=6), n_bootstrap=50, n_shuffles=20)
    path = tmp_path / "abstraction.json"
    result.to_json(path)
    loaded = gl.Result.from_json(path)
    assert loaded.tables["per_task"] == result.tables["per_task"]
    loaded.plot(tmp_path / "abstraction.png")
    assert (tmp_path / "abstraction.png").stat().st_size > 0


def test_a_concept_with_three_values_is_refused():
    rows = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    data = {"concept": ["a", "b", "c"] * 2, "context": ["x"] * 3 + ["y"] * 3}
    with pytest.raises(ValueError, match="exactly two values"):
        gl.run("abstraction", gl.attach({"x": rows}), data)


def test_one_context_is_refused():
    rows = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    data = {"concept": ["a", "b"] * 2, "context": ["x"] * 4}
    with pytest.raises(ValueError, match="at least two contexts"):
        gl.run("abstraction", gl.attach({"x": rows}), data)


def test_missing_label_columns_fail_before_any_batch():
    rows = np.zeros((4, 4), dtype=np.float32)
    with pytest.raises(ValueError, match="concept"):
        gl.run("abstraction", gl.attach({"x": rows}), {"context": ["x", "x", "y", "y"]})

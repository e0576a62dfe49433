"""abstraction: α that does not grow with the cell size.

Planted rows with known true difference directions t_c (pairwise cosine ρ) plus isotropic row
noise: averaging n rows into each class mean leaves u_c = t_c + noise of variance 2σ²/n per
coordinate, so the raw α is ρ times the Spearman–Brown reliability n r₁ / (1 + (n − 1) r₁) of
one direction, with r₁ = |t|² / (|t|² + 2σ²d) the one-row reliability (computed here from the
planted parameters, not from geomlens). The corrected α divides that reliability out and stays
at ρ for every n.
"""

from __future__ import annotations

import numpy as np
import pytest

import geomlens as gl
from geomlens.analyses.statistics.alpha_scores import ROW_SHUFFLE, SIGN_FLIP, alpha_draws

D = 200
NORM2 = 4.0  # |t_c|²
SIGMA = 0.24  # per-coordinate row noise


def planted_cells(rho: float, n: int, *, k: int = 16, seed: int = 0):
    """k contexts, n rows per (concept value, context) cell; t_c = a v + b w_c (orthonormal
    v, w_c), so cos(t_c, t_c') = a² / (a² + b²) = ρ and |t_c|² = NORM2."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((D, k + 1)))
    a, b = np.sqrt(NORM2 * rho), np.sqrt(NORM2 * (1 - rho))
    rows, concept, context = [], [], []
    for c in range(k):
        shift = rng.standard_normal(D)
        t = a * basis[:, 0] + b * basis[:, c + 1]
        for sign, name in ((-0.5, "minus"), (0.5, "plus")):
            rows.append(shift + sign * t + SIGMA * rng.standard_normal((n, D)))
            concept += [name] * n
            context += [f"context{c:02d}"] * n
    return np.concatenate(rows), {"concept": concept, "context": context}


def spearman_brown(n: int, one_row: float) -> float:
    return n * one_row / (1 + (n - 1) * one_row)


def run(rows, data, **options):
    options = {"n_bootstrap": 200, "n_shuffles": 50, **options}
    return gl.run("abstraction", gl.attach({"x": rows}), data, **options)


SIZES = (4, 8, 16, 32)


@pytest.fixture(scope="module")
def by_size():
    return {n: run(*planted_cells(0.5, n)) for n in SIZES}


def test_raw_alpha_follows_spearman_brown_in_the_rows_per_cell(by_size):
    one_row = NORM2 / (NORM2 + 2 * SIGMA**2 * D)
    for n, result in by_size.items():
        (row,) = result.tables["per_task"]
        assert row["rows_per_cell"] == n and row["rows_per_cell_min"] == n
        assert row["alpha"] == pytest.approx(0.5 * spearman_brown(n, one_row), abs=0.03)
    raw = [by_size[n].metrics["x.alpha"] for n in SIZES]
    assert raw[-1] - raw[0] > 0.2  # the raw α is decided by the cell size


def test_corrected_alpha_is_flat_in_the_rows_per_cell(by_size):
    corrected = [by_size[n].metrics["x.alpha_corrected"] for n in SIZES]
    assert corrected == pytest.approx([0.5] * len(SIZES), abs=0.07)
    assert max(corrected) - min(corrected) < 0.1
    for n in SIZES:
        m = by_size[n].metrics
        assert m["x.alpha_corrected_ci_low"] <= m["x.alpha_corrected"]
        assert m["x.alpha_corrected"] <= m["x.alpha_corrected_ci_high"]
        assert m["x.alpha_corrected_ci_low"] - 0.05 <= 0.5 <= m["x.alpha_corrected_ci_high"] + 0.05


@pytest.mark.parametrize("rho", [0.2, 0.8])
def test_corrected_alpha_recovers_other_planted_cosines(rho):
    result = run(*planted_cells(rho, 6, seed=3))
    assert result.metrics["x.alpha_corrected"] == pytest.approx(rho, abs=0.08)
    assert result.metrics["x.alpha"] < 0.75 * rho  # the raw one is attenuated at 6 rows


def test_one_row_cells_have_no_corrected_alpha_and_say_why():
    result = run(*planted_cells(0.5, 1))
    (row,) = result.tables["per_task"]
    assert row["rows_per_cell"] == 1
    assert np.isnan(row["alpha_corrected"]) and np.isnan(result.metrics["x.alpha_corrected"])
    assert "one row" in row["alpha_corrected_undefined"]
    assert row["alpha_null_kind"] == SIGN_FLIP


def test_site_mean_of_raw_alpha_averages_only_equal_cell_sizes():
    """Two tasks at 1 and 16 rows per cell: the site's raw α is the 1-row task's alone (its
    tasks named), the corrected α the 16-row task's (the only one that defines it)."""
    small, data_small = planted_cells(0.5, 1, seed=1)
    large, data_large = planted_cells(0.5, 16, seed=2)
    rows = np.concatenate([small, large])
    data = {
        "concept": data_small["concept"] + data_large["concept"],
        "context": data_small["context"] + data_large["context"],
        "task": ["pairs"] * len(small) + ["crossed"] * len(large),
    }
    result = run(rows, data)
    by_task = {r["task"]: r for r in result.tables["per_task"]}
    assert result.metrics["x.alpha"] == pytest.approx(by_task["pairs"]["alpha"])
    assert result.metrics["x.rows_per_cell"] == 1
    assert result.metrics["x.alpha_corrected"] == pytest.approx(
        by_task["crossed"]["alpha_corrected"]
    )
    (site,) = result.tables["sites"]
    assert site["alpha_tasks"] == "pairs" and site["alpha_corrected_tasks"] == "crossed"


def two_contexts(n: int, *, shared: bool, seed: int = 0):
    """Two contexts, n rows per cell; the concept direction is shared (cosine 1) or each
    context has its own orthogonal one (cosine 0)."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((64, 3)))
    rows, concept, context = [], [], []
    for c, colour in enumerate(("red", "blue")):
        direction = basis[:, 0] if shared else basis[:, 1 + c]
        for sign, name in ((-1, "minus"), (1, "plus")):
            rows.append(sign * direction + 0.5 * rng.standard_normal((n, 64)))
            concept += [name] * n
            context += [colour] * n
    return np.concatenate(rows), {"concept": concept, "context": context}


def test_two_context_null_can_reject_with_several_rows_per_cell():
    """With the sign-flip null two contexts give ±α, its 95th percentile is α and p ≥ 0.4
    whatever the data; the row-level shuffle rejects a shared direction and not an absent one."""
    shared = run(*two_contexts(20, shared=True), n_shuffles=400)
    (row,) = shared.tables["per_task"]
    assert row["alpha_null_kind"] == ROW_SHUFFLE
    assert row["alpha"] > 0.5
    assert row["alpha_p_value"] < 0.01
    assert row["alpha_null_p95"] < 0.5
    absent = run(*two_contexts(20, shared=False, seed=1), n_shuffles=400)
    (row,) = absent.tables["per_task"]
    assert row["alpha_p_value"] > 0.05


def test_a_vanishing_difference_vector_gives_nan_with_a_reason():
    means = np.zeros((2, 3, 4))
    means[1, 0] = [1, 0, 0, 0]
    means[1, 1] = [1, 1, 0, 0]  # context 2: both values have the same mean
    draws = alpha_draws(means, np.random.default_rng(0), n_bootstrap=20, n_shuffles=20)
    assert np.isnan(draws.alpha)
    assert "vanishes" in draws.undefined
    rows = np.concatenate([np.zeros((2, 4)), np.ones((2, 4))])
    result = run(rows, {"concept": ["minus", "plus"] * 2, "context": ["a", "a", "b", "b"]})
    (row,) = result.tables["per_task"]
    assert np.isnan(row["alpha"]) and "vanishes" in row["alpha_undefined"]
    assert np.isnan(row["alpha_p_value"])


def test_two_contexts_get_a_corrected_interval_from_the_rows():
    """Two contexts cannot be resampled, but the rows of each cell can: the corrected α of a
    two-context set has an interval, named as such, around the planted cosine."""
    result = run(*planted_cells(0.5, 20, k=2, seed=5), n_bootstrap=300)
    (row,) = result.tables["per_task"]
    assert np.isnan(row["alpha_ci_low"])  # the raw α's interval resamples contexts: none
    assert "row noise redrawn" in row["alpha_corrected_interval"]
    assert row["alpha_corrected_ci_low"] < row["alpha_corrected_ci_high"]
    assert row["alpha_corrected_ci_low"] - 0.05 <= 0.5 <= row["alpha_corrected_ci_high"] + 0.05
    assert row["alpha_corrected"] == pytest.approx(0.5, abs=0.15)


def test_guards_refuse_alpha_inside_its_null_and_an_undefined_corrected_alpha():
    from geomlens.analyses.abstraction.metrics import METRIC_SPECS

    specs = {spec.name: spec for spec in METRIC_SPECS}
    absent = run(*two_contexts(20, shared=False, seed=1), n_shuffles=400)
    words = specs["alpha"].blocked(absent, "x.alpha")
    assert words is not None and "null" in words
    shared = run(*two_contexts(20, shared=True), n_shuffles=400)
    assert specs["alpha"].blocked(shared, "x.alpha") is None
    assert specs["alpha_corrected"].blocked(shared, "x.alpha_corrected") is None
    one_row = run(*planted_cells(0.5, 1))
    words = specs["alpha_corrected"].blocked(one_row, "x.alpha_corrected")
    assert words is not None and "not defined" in words

"""ccgp: a planted linearly transferable concept gives CCGP ≈ 1, a context-specific one CCGP ≈
chance with high within-context accuracy; split schemes; merged halves equal one pass."""

from __future__ import annotations

import numpy as np
import pytest

import geomlens as gl
from geomlens.analyses.ccgp import CCGP
from geomlens.analyses.statistics.concept_state import context_splits
from geomlens.data.dataset import Dataset


def planted(shared: bool, *, k: int = 8, d: int = 48, n: int = 20, seed: int = 0):
    """Concept s = ±1 coded along v_S in every context (shared) or along a direction of the
    context's own (context-specific); each context adds an offset orthogonal to those
    directions."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((d, 2 * k + 1)))
    v_s, own, offsets = basis[:, 0], basis[:, 1 : k + 1], basis[:, k + 1 :]
    rows, concept, context = [], [], []
    for c in range(k):
        direction = v_s if shared else own[:, c]
        for sign, name in ((-1, "minus"), (1, "plus")):
            mean = 3 * offsets[:, c] + 1.5 * sign * direction
            rows.append(mean + 0.3 * rng.standard_normal((n, d)))
            concept += [name] * n
            context += [f"c{c}"] * n
    return np.concatenate(rows).astype(np.float32), {"concept": concept, "context": context}


def test_transferable_concept_generalises_across_contexts():
    rows, data = planted(shared=True)
    result = gl.run("ccgp", gl.attach({"x": rows}), data)
    assert result.metrics["x.ccgp"] > 0.95
    assert result.metrics["x.within_context_accuracy"] > 0.95
    (row,) = result.tables["per_task"]
    assert row["split_scheme"] == "leave one context out" and row["n_splits"] == 8
    assert len(result.tables["splits"]) == 8


def test_context_specific_concept_stays_at_chance_across_contexts():
    rows, data = planted(shared=False)
    result = gl.run("ccgp", gl.attach({"x": rows}), data)
    assert result.metrics["x.within_context_accuracy"] > 0.9
    assert result.metrics["x.ccgp"] == pytest.approx(0.5, abs=0.15)


def test_split_schemes():
    scheme, held = context_splits(["a", "b"], max_splits=20)
    assert scheme == "all balanced splits" and held == [["a"], ["b"]]
    scheme, held = context_splits(list("abcd"), max_splits=20)
    assert len(held) == 6 and all(len(h) == 2 for h in held)
    scheme, held = context_splits(list("abcdefgh"), max_splits=20)
    assert scheme == "leave one context out" and len(held) == 8
    scheme, held = context_splits([f"c{i}" for i in range(30)], max_splits=10)
    assert len(held) == 10 and sorted(sum(held, [])) == sorted(f"c{i}" for i in range(30))
    _, held = context_splits([f"c{i}" for i in range(30)], max_splits=0)
    assert len(held) == 30


def test_two_contexts_train_on_one_test_on_the_other():
    rows, data = planted(shared=True, k=2)
    result = gl.run("ccgp", gl.attach({"x": rows}), data)
    assert [s["held_out"] for s in result.tables["splits"]] == ["c0", "c1"]
    assert result.metrics["x.ccgp"] > 0.95


def test_merged_halves_equal_one_pass():
    rows, data = planted(shared=False, k=6, seed=2)
    adapter = gl.attach({"x": rows})
    dataset = Dataset(num_rows=len(rows), columns=data)
    order = np.random.default_rng(1).permutation(len(rows))
    halves = [CCGP(), CCGP()]
    for analysis, part in zip(halves, np.array_split(order, 2)):
        gl.stream([analysis], adapter, dataset, rows=part, seed=3)
    halves[1].merge(halves[0])
    whole = CCGP()
    gl.stream([whole], adapter, dataset, seed=3)
    assert halves[1].finalize().tables == whole.finalize().tables


def test_result_survives_json_and_plots(tmp_path):
    rows, data = planted(shared=True, k=4)
    result = gl.run("ccgp", gl.attach({"x": rows}), data)
    result.to_json(tmp_path / "ccgp.json")
    loaded = gl.Result.from_json(tmp_path / "ccgp.json")
    loaded.plot(tmp_path / "ccgp.png")
    assert (tmp_path / "ccgp.png").stat().st_size > 0

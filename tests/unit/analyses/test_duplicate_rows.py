"""A row given twice is one observation: ccgp's probes, abstraction's (and linearization-effect's)
class means and split halves, and similarity's g0_across_texts refuse
data holding exact copies (the same activation row and labels), naming the dataset rows.
Before, a copy landed in both the training and the test split (probe accuracy toward 1.0) and
counted as "the same stimulus in another text" (g0_across_texts toward 1.0)."""

from __future__ import annotations

import numpy as np
import pytest

import geomlens as gl
from geomlens.analyses.statistics.duplicates import DuplicateRowsError, duplicate_groups


def noisy_concepts(*, k: int = 4, d: int = 64, n: int = 12, seed: int = 0):
    """A weak concept (much noise): within-context accuracy well below 1."""
    rng = np.random.default_rng(seed)
    rows, concept, context = [], [], []
    direction = rng.standard_normal(d)
    direction /= np.linalg.norm(direction)
    for c in range(k):
        for sign, name in ((-1, "minus"), (1, "plus")):
            rows.append(0.3 * sign * direction + rng.standard_normal((n, d)))
            concept += [name] * n
            context += [f"c{c}"] * n
    return np.concatenate(rows), {"concept": concept, "context": context}


def test_a_copied_row_inflates_the_probe_and_is_refused_naming_the_rows():
    rows, data = noisy_concepts()
    clean = gl.run("ccgp", gl.attach({"x": rows}), data)
    assert clean.metrics["x.within_context_accuracy"] < 0.9
    # What a copy does to an unguarded probe, recomputed with scikit-learn inside one context
    # (more features than rows, as in a concept set): every row given twice lands in both the
    # training and the test folds, and accuracy goes to 1.0.
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    inside = np.asarray(data["context"]) == "c0"
    x, y = rows[inside], np.asarray(data["concept"])[inside]
    folds = StratifiedKFold(4, shuffle=True, random_state=0)
    plain = cross_val_score(LogisticRegression(max_iter=2000), x, y, cv=folds).mean()
    doubled = cross_val_score(
        LogisticRegression(max_iter=2000), np.concatenate([x, x]), np.concatenate([y, y]), cv=folds
    ).mean()
    assert plain < 0.85 and doubled > 0.95, (plain, doubled)
    copied = {name: values + [values[5]] for name, values in data.items()}
    with pytest.raises(DuplicateRowsError) as error:
        gl.run("ccgp", gl.attach({"x": np.concatenate([rows, rows[5:6]])}), copied)
    message = str(error.value)
    assert "\n" not in message
    assert f"5 = {len(rows)}" in message and "remove the 1 extra copies" in message


def test_the_same_activation_under_other_labels_is_not_a_duplicate():
    rows, data = noisy_concepts()
    rows[1] = rows[0]  # same vector, same labels (both "minus", c0): a copy
    with pytest.raises(DuplicateRowsError, match="0 = 1"):
        gl.run("ccgp", gl.attach({"x": rows}), data)
    rows, data = noisy_concepts()
    rows[20] = rows[0]  # same vector, other concept value: contradictory data, not a copy
    result = gl.run("ccgp", gl.attach({"x": rows}), data)
    assert np.isfinite(result.metrics["x.ccgp"])


def test_similarity_refuses_a_copy_that_would_be_the_same_stimulus_in_another_text():
    rng = np.random.default_rng(1)
    coordinates = [float(c) for c in range(6) for _ in range(2)]  # two texts per stimulus
    vectors = rng.standard_normal((len(coordinates), 8))
    result = gl.run("similarity", gl.attach({"x": vectors}), {"coordinate": coordinates})
    assert result.metrics["x.g0_across_texts"] < 0.9
    copied = np.concatenate([vectors, vectors[3:4]])
    with pytest.raises(DuplicateRowsError) as error:
        gl.run("similarity", gl.attach({"x": copied}), {"coordinate": coordinates + [1.0]})
    assert "3 = 12" in str(error.value) and "g0_across_texts" in str(error.value)


def test_duplicate_groups_by_hand():
    vectors = np.asarray([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    labels = np.asarray(["a", "b", "a", "z", "c"])
    assert duplicate_groups(vectors, [labels]) == [[0, 2]]
    assert duplicate_groups(vectors) == [[0, 2, 3], [1, 4]]
    assert duplicate_groups(vectors, index=np.asarray([10, 11, 12, 13, 14])) == [
        [10, 12, 13],
        [11, 14],
    ]


def test_abstraction_refuses_a_copied_row_naming_the_rows():
    """A copy counts twice in its class mean and can fall into both halves of a split (the
    split-half reliability behind the corrected α): refused, as in ccgp."""
    rows, data = noisy_concepts()
    clean = gl.run("abstraction", gl.attach({"x": rows}), data, n_bootstrap=20, n_shuffles=10)
    assert np.isfinite(clean.metrics["x.alpha"])
    copied = {name: values + [values[7]] for name, values in data.items()}
    with pytest.raises(DuplicateRowsError) as error:
        gl.run(
            "abstraction",
            gl.attach({"x": np.concatenate([rows, rows[7:8]])}),
            copied,
            n_bootstrap=20,
            n_shuffles=10,
        )
    message = str(error.value)
    assert message.startswith("abstraction:") and "\n" not in message
    assert f"7 = {len(rows)}" in message and "remove the 1 extra copies" in message
    # The same vector under the other concept value is contradictory data, not a copy.
    rows[20] = rows[0]
    other = gl.run("abstraction", gl.attach({"x": rows}), data, n_bootstrap=20, n_shuffles=10)
    assert np.isfinite(other.metrics["x.alpha"])


def test_linearization_effect_refuses_a_copied_text():
    from helpers.tiny_models import tiny_gpt2

    model, tokenizer = tiny_gpt2()
    columns: dict[str, list[str]] = {"text": [], "concept": [], "context": []}
    for pair in [("king", "queen"), ("man", "woman"), ("boy", "girl"), ("he", "she")]:
        for concept, word in zip(("first", "second"), pair):
            columns["text"].append(f"the [[{word}]] sat")
            columns["concept"].append(concept)
            columns["context"].append("/".join(pair))
    copied = {name: values + [values[2]] for name, values in columns.items()}
    with pytest.raises(DuplicateRowsError) as error:
        gl.run(
            "linearization-effect",
            gl.attach(model, tokenizer=tokenizer),
            copied,
            n_bootstrap=10,
            n_shuffles=5,
        )
    message = str(error.value)
    assert message.startswith("linearization-effect:") and f"2 = {len(columns['text'])}" in message

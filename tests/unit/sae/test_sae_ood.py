"""OOD inputs and the corpus split that sae-features runs on by default."""

import ast

import numpy as np
import pytest

import geomlens as gl
from geomlens.data.corpus import CORPUS_PARTS, corpus_split, stdlib_paragraphs
from geomlens.data.ood import (
    feature_explosion_data,
    python_source_chunks,
    random_token_rows,
    replace_tokens,
)


def test_corpus_parts_are_disjoint_and_cover_the_corpus():
    parts = {name: corpus_split(name) for name in CORPUS_PARTS}
    sets = {name: set(texts) for name, texts in parts.items()}
    assert not sets["calibration"] & sets["heldout"]
    assert not (sets["calibration"] | sets["heldout"]) & sets["training"]
    assert sum(len(t) for t in parts.values()) == len(stdlib_paragraphs())
    assert len(parts["training"]) > 2 * len(parts["heldout"]) > 0
    assert corpus_split("heldout", 3) == parts["heldout"][:3]
    with pytest.raises(ValueError, match="Unknown corpus part 'test'"):
        corpus_split("test")


def test_replacement_keeps_specials_and_replaces_the_asked_fraction():
    special = [0, 1, 2]
    rows = [[1, *range(10, 30), 2], [1, 5, 6, 7, 2, 0, 0]]
    replaced = replace_tokens(rows, 0.15, 50, special_ids=special, seed=3)
    for before, after in zip(rows, replaced):
        before, after = np.array(before), np.array(after)
        assert len(before) == len(after)
        is_special = np.isin(before, special)
        assert (after[is_special] == before[is_special]).all()
        changed = (after != before).sum()
        assert changed == round(0.15 * (~is_special).sum())
        assert not np.isin(after[~is_special], special).any()
    random = random_token_rows(rows, 50, special_ids=special, seed=4)
    assert all(
        (np.array(r) != np.array(b))[~np.isin(b, special)].all() for r, b in zip(random, rows)
    )
    assert replace_tokens(rows, 0.15, 50, special_ids=special, seed=3) == replaced  # seeded
    with pytest.raises(ValueError, match="expected 0 <= fraction <= 1"):
        replace_tokens(rows, 1.5, 50)


def test_python_source_is_code_without_docstrings():
    chunks = python_source_chunks(20)
    assert len(chunks) == 20
    for chunk in chunks:
        tree = ast.parse(chunk)  # real, parseable Python
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)):
                assert ast.get_docstring(node) is None


def test_feature_explosion_data_on_minilm_tokens():
    tokenizer = gl.load().tokenizer
    data = feature_explosion_data(tokenizer, calibration_rows=6, heldout_rows=5, max_tokens=24)
    conditions = np.array(data["condition"])
    counts = {c: int((conditions == c).sum()) for c in dict.fromkeys(data["condition"])}
    assert counts == {
        "calibration": 6, "heldout": 5, "random_tokens": 5, "replaced_15pct": 5, "python_source": 5
    }  # fmt: skip
    rows = data["token_ids"]
    heldout = [r for r, c in zip(rows, conditions) if c == "heldout"]
    randoms = [r for r, c in zip(rows, conditions) if c == "random_tokens"]
    assert [len(r) for r in randoms] == [len(r) for r in heldout]
    assert all(r[0] == tokenizer.cls_token_id and r[-1] == tokenizer.sep_token_id for r in randoms)
    assert all(len(r) <= 24 for r in rows)


def test_every_ood_condition_has_the_heldout_lengths():
    """python_source was cut at max_tokens (every row 64 tokens against a
    held-out median of 21), so its AUROC partly measured length. Every OOD row i now has the
    length of held-out row i."""
    tokenizer = gl.load().tokenizer
    data = feature_explosion_data(
        tokenizer, calibration_rows=4, heldout_rows=12, ood_rows=12, max_tokens=64
    )
    conditions = np.array(data["condition"])
    lengths = {
        c: [len(r) for r, k in zip(data["token_ids"], conditions) if k == c]
        for c in dict.fromkeys(data["condition"])
    }
    assert len(set(lengths["heldout"])) > 3  # the planted case: varied held-out lengths
    for condition in ("random_tokens", "replaced_15pct", "python_source"):
        assert lengths[condition] == lengths["heldout"], condition
    source = [r for r, k in zip(data["token_ids"], conditions) if k == "python_source"]
    assert all(r[0] == tokenizer.cls_token_id and r[-1] == tokenizer.sep_token_id for r in source)
    text = tokenizer.decode(source[0], skip_special_tokens=True)
    assert any(word in text for word in ("import", "def", "class", "=")), text

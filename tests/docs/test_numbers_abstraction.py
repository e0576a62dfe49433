"""scripts/numbers/abstraction.py: the quoted α, CCGP and linearisation numbers follow real
results (tiny BERT, a word-pair set and a crossed set), through the driver's region rewrite."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from helpers.paths import REPO
from helpers.tiny_models import tiny_bert

import geomlens as gl

pytestmark = pytest.mark.slow  # three runs on a tiny model, one with tangent calibration

ROOT = REPO
PAIRS = [("king", "queen"), ("man", "woman"), ("boy", "girl"), ("he", "she"), ("cat", "dog")]
CROSSED = {"red": (["cat", "dog"], ["house", "mat"]), "blue": (["fox", "bird"], ["tree", "city"])}


def concepts() -> dict[str, list[str]]:
    columns: dict[str, list[str]] = {"text": [], "concept": [], "context": [], "task": []}

    def add(text, concept, context, task):
        for column, value in zip(columns, (text, concept, context, task)):
            columns[column].append(value)

    for pair in PAIRS:
        for concept, word in zip(("male", "female"), pair):
            add(f"the [[{word}]] sat", concept, "/".join(pair), "gender")
    for colour, (animals, things) in CROSSED.items():
        for concept, words in (("animal", animals), ("artefact", things)):
            for word in words:
                add(f"a {colour} [[{word}]]", concept, colour, "animacy-by-colour")
    return columns


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results():
    model, tokenizer = tiny_bert()
    adapter = gl.attach(model, tokenizer=tokenizer)
    data = concepts()
    alpha = {"n_bootstrap": 50, "n_shuffles": 20}
    options = {**alpha, "folds": 2}
    runs = {
        "abstraction": gl.run("abstraction", adapter, data, progress=False, **alpha),
        "ccgp": gl.run("ccgp", adapter, data, progress=False, folds=2),
        "linearization-effect": gl.run(
            "linearization-effect", adapter, data, progress=False, **options
        ),
    }
    runs["linearization-effect:tangent"] = gl.run(
        "linearization-effect", adapter, data, progress=False, mode="tangent",
        calibration_texts=4, **options,
    )  # fmt: skip
    return runs


@pytest.fixture(scope="module")
def numbers():
    sys.path.insert(0, str(ROOT / "scripts" / "numbers"))
    return _load("numbers_abstraction", ROOT / "scripts" / "numbers" / "abstraction.py")


def test_sections_quote_the_results(results, numbers):
    fmt = numbers.fmt
    alpha, effect = results["abstraction"], results["linearization-effect"]
    readme = numbers.readme_paragraph(results)
    # The site mean of the raw α averages the one-row set only, named with its cell size.
    assert "(gender; 1 row per cell)" in readme
    assert fmt(alpha.metrics["blocks.0.hook_resid_post.alpha"]) in readme
    crossed = [r for r in alpha.tables["per_task"] if r["task"] == "animacy-by-colour"]
    assert "`animacy-by-colour` (2 rows per cell" in readme
    assert fmt(max(r["alpha_corrected"] for r in crossed)) in readme
    assert fmt(effect.metrics["summary.alpha_corrected_change"], 3) in readme
    cosine = fmt(effect.metrics["fidelity.output_embedding_cosine"])
    assert f"output-embedding cosine {cosine}" in readme  # the cost beside the α change
    assert fmt(effect.metrics["summary.alpha_change"], 3) in readme
    tangent = numbers.linearization_tangent(results)
    assert "tangent" in tangent
    tangent_cosine = results["linearization-effect:tangent"].metrics[
        "fidelity.output_embedding_cosine"
    ]
    assert fmt(tangent_cosine) in tangent
    table = numbers.ccgp_table(results)
    assert "leave one context out" not in table  # 5 and 2 contexts: all balanced splits
    assert "all balanced splits" in table
    nulls = numbers.null_table(results)
    per_task = {r["task"]: r for r in alpha.tables["per_task"] if r["site"].startswith("blocks.1")}
    assert fmt(per_task["gender"]["alpha_null_p95_within_context"], 3) in nulls


def test_driver_rewrites_the_regions(results, numbers, tmp_path):
    driver = _load("regenerate_numbers_for_abstraction", ROOT / "scripts" / "regenerate_numbers.py")
    doc = tmp_path / "doc.md"
    keys = ["abstraction-readme", "abstraction-alpha", "linearization-identity"]
    doc.write_text("".join(f"<!-- numbers:{k} -->\nold\n<!-- /numbers:{k} -->\n" for k in keys))
    changes = driver.regenerate([doc], numbers.SECTIONS, results)
    assert changes and changes[0].keys == keys
    text = doc.read_text()
    assert "\nold\n" not in text and numbers.alpha_table(results) in text  # the placeholder body

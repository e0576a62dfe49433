"""Planted nulls: on a random-weight causal LM and on concepts whose labels are shuffled, every
reading of the report is a null reading: no regime, no finite ε, no stated direction of a
change ("up"/"down"), and an accuracy at chance reads as at chance.

Both run the report's own code: the causal-LM section (``run_causal_lm_section``, quick) on a
tiny random Llama with SmolLM2's tokenizer (so years split into digits and the concept words
tokenise as on the real model), and the concept analyses on MiniLM with each task's labels
permuted. The section's SAE is cut to a few hundred steps (its readings are nulls at any size:
a random model's pool saturates the dictionary)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

import geomlens as gl
from geomlens.analyses.registry import analysis_class, declaration
from geomlens.report import figures, plan
from geomlens.report.readings import read
from geomlens.theory.resolution import REGIMES

#: A regime named as a finding: "the interference regime", "(in the trade-off part …".
REGIME = re.compile(r"\b(the |in the )(" + "|".join(map(re.escape, REGIMES)) + r")\b")
#: A scale ε given as a number (the guards write "ε = unresolved …", "< d₁ …", "> …").
FINITE_EPSILON = re.compile(r"ε(_fast)? = [\d−-]")
#: A direction stated for a change: counts of sets that rose or fell, a resolved interval.
DIRECTION = re.compile(
    r"rises in|falls in|up or equal in|is resolved at this level|\bgoes (up|down)\b"
)


def null_problems(paragraphs: list[str]) -> list[str]:
    problems = []
    for paragraph in paragraphs:
        for name, pattern in (
            ("a regime", REGIME),
            ("a finite ε", FINITE_EPSILON),
            ("a direction", DIRECTION),
        ):
            if pattern.search(paragraph):
                problems.append(f"{name} in: {paragraph}")
    return problems


@pytest.fixture(scope="module")
def random_lm_section(smollm2_folder, tmp_path_factory):
    from helpers.tiny_models import tiny_llama
    from transformers import AutoTokenizer

    from geomlens.report.runner import run_causal_lm_section

    model, tokenizer = tiny_llama(seed=0, tokenizer=AutoTokenizer.from_pretrained(smollm2_folder))
    adapter = gl.attach(model, tokenizer=tokenizer)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GEOMLENS_SAE_CACHE", str(tmp_path_factory.mktemp("sae-cache")))
        patch.setitem(
            declaration("sae-features").quick,
            "training",
            {"tokens": 1_000, "rows_per_chunk": 64, "passes": 1, "d_sae": 256},
        )
        section = run_causal_lm_section(adapter, quick=True, progress=False)
    folder = tmp_path_factory.mktemp("theory")
    return section, figures.theory_figures(section.results, Path(folder))


def test_every_reading_of_the_section_on_a_random_model_is_null(random_lm_section):
    section, theory = random_lm_section
    assert not [o.error for o in section.outcomes if o.error], "every analysis ran"
    assert set(section.results) == {"similarity", "resolution", "sae-features",
                                    "linearization-effect"}  # fmt: skip
    problems = []
    for name, result in section.results.items():
        problems += null_problems(read(result, analysis_class(name)))
    for figure in theory:
        assert figure.error is None, figure.error
        problems += null_problems(figure.reading)
    assert not problems, "\n".join(problems)


def test_the_random_models_choices_and_probes_read_at_chance(random_lm_section):
    section, theory = random_lm_section
    similarity = read(section.results["similarity"], analysis_class("similarity"))
    assert any("at chance" in p and "not read" in p for p in similarity), similarity
    linearization = " ".join(
        read(section.results["linearization-effect"], analysis_class("linearization-effect"))
    )
    assert "CCGP is at chance before and after" in linearization
    assert "its change is not read" in linearization  # α within its label-shuffle null
    resolution_figure = next(f for f in theory if f.file == "theory-resolution.png")
    assert any("at chance" in p for p in resolution_figure.reading)


def _shuffled_concepts(seed: int = 0) -> dict[str, list[str]]:
    """The shipped English concepts, each task's labels permuted among its rows (a few
    contexts per task, to keep the run short)."""
    from geomlens.data.concepts import english_concepts

    data = english_concepts()
    generator = random.Random(seed)
    rows_of: dict[str, list[int]] = {}
    for index, task in enumerate(data["task"]):
        rows_of.setdefault(task, []).append(index)
    shuffled = {column: list(values) for column, values in data.items()}
    for rows in rows_of.values():
        labels = [data["concept"][i] for i in rows]
        generator.shuffle(labels)
        for i, label in zip(rows, labels):
            shuffled["concept"][i] = label
    assert shuffled["concept"] != data["concept"]
    return shuffled


@pytest.fixture(scope="module")
def shuffled_results(minilm):
    from geomlens.report.runner import run_analyses

    data = _shuffled_concepts()
    planned = [
        (plan.build_analysis(name, True, minilm), data, "shuffled concepts")
        for name in ("abstraction", "ccgp", "linearization-effect")
    ]
    outcomes, _ = run_analyses(minilm, planned, quick=True, seed=0, progress=False)
    assert not [o.error for o in outcomes if o.error]
    return {o.name: o.result for o in outcomes}


def test_every_reading_on_shuffled_concepts_is_null(shuffled_results):
    problems = []
    words = {}
    for name, result in shuffled_results.items():
        words[name] = " ".join(read(result, analysis_class(name)))
        problems += null_problems(read(result, analysis_class(name)))
    assert not problems, "\n".join(problems)
    assert "no shared direction is measured" in words["abstraction"]
    assert "at chance: nothing measured here" in words["ccgp"]
    assert "its change is not read" in words["linearization-effect"], words
    assert "CCGP is at chance before and after" in words["linearization-effect"], words

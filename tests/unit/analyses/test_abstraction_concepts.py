"""The shipped concept sets and the loader of a user's own; the bilingual GPU tutorial on CPU."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter

import pytest
from helpers.paths import REPO
from helpers.tiny_models import tiny_llama

from geomlens.data.concepts import (
    BILINGUAL_LANGUAGES,
    bilingual_concepts,
    english_concepts,
    english_task_names,
    load_concepts,
    translation_table,
    validate_concepts,
)

TUTORIAL = REPO / "tutorials" / "gpu" / "bilingual_abstraction.py"


def contexts_per_task(columns) -> dict[str, int]:
    return {
        task: len({c for t, c in zip(columns["task"], columns["context"]) if t == task})
        for task in dict.fromkeys(columns["task"])
    }


def test_english_sets_have_the_promised_sizes_and_shape():
    columns = english_concepts()
    validate_concepts(columns)
    sizes = contexts_per_task(columns)
    assert set(sizes) == {"gender", "number", "tense", "degree", "animacy-by-colour"}
    assert sizes["gender"] >= 40 and min(sizes[t] for t in ("number", "tense", "degree")) >= 40
    assert sizes["animacy-by-colour"] == 2  # the seed's shape: concept × 2 contexts
    for task in ("gender", "number", "tense", "degree"):
        concepts = Counter(c for t, c in zip(columns["task"], columns["concept"]) if t == task)
        assert len(concepts) == 2 and len(set(concepts.values())) == 1
    assert all(text.count("[[") == 1 and text.count("]]") == 1 for text in columns["text"])
    assert (
        "This is the [[king]]." in columns["text"] and "This is the [[queen]]." in columns["text"]
    )
    assert english_concepts(["tense"])["task"] == ["tense"] * (2 * sizes["tense"])
    with pytest.raises(ValueError, match="Unknown English concept set"):
        english_concepts(["colour"])
    assert english_task_names()[0] == "gender"


def test_translation_table_is_complete_and_bilingual_sets_are_large_enough():
    table = translation_table()
    assert all(all(row[lang].strip() for lang in BILINGUAL_LANGUAGES) for row in table)
    assert len({row["gloss"] for row in table}) == len(table)
    columns = bilingual_concepts()
    validate_concepts(columns)
    sizes = contexts_per_task(columns)
    assert len(sizes) >= 10 and min(sizes.values()) >= 60
    # A word spelled alike in both languages (Spanish and Italian 'casa') is left out.
    es_it = bilingual_concepts(["es-it"])
    assert "[[casa]]" not in es_it["text"]
    assert set(es_it["concept"]) == {"es", "it"}
    assert len(bilingual_concepts([("en", "de")], max_word_pairs=5)["text"]) == 10
    with pytest.raises(ValueError, match="two different languages"):
        bilingual_concepts(["en-xx"])


def test_user_sets_load_from_csv_and_jsonl(tmp_path):
    csv_path = tmp_path / "mine.csv"
    csv_path.write_text(
        "text,concept,context\n[[cat]],one,a\n[[cats]],many,a\n[[dog]],one,b\n[[dogs]],many,b\n",
        encoding="utf-8",
    )
    columns = load_concepts(csv_path)
    assert columns["task"] == ["mine"] * 4 and columns["concept"][1] == "many"
    jsonl_path = tmp_path / "mine.jsonl"
    rows = [
        {"text": "[[he]]", "concept": "m", "context": "pronoun", "task": "gender"},
        {"text": "[[she]]", "concept": "f", "context": "pronoun", "task": "gender"},
        {"text": "[[king]]", "concept": "m", "context": "royal", "task": "gender"},
        {"text": "[[queen]]", "concept": "f", "context": "royal", "task": "gender"},
    ]
    jsonl_path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    assert load_concepts(jsonl_path)["task"] == ["gender"] * 4


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("text,concept\n[[a]],x\n", "lacks column"),
        ("text,concept,context\n[[a]],x,c\n[[b]],y,c\n[[c]],z,d\n[[d]],x,d\n", "exactly two"),
        ("text,concept,context\n[[a]],x,c\n[[b]],y,c\n[[c]],x,d\n", "only one concept value"),
        ("text,concept,context\n[[a]],x,c\n[[b]],y,c\n", "one context"),
    ],
)
def test_bad_user_sets_say_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        load_concepts(path)


@pytest.mark.slow
def test_bilingual_tutorial_runs_on_cpu_with_a_tiny_model(tmp_path):
    model, tokenizer = tiny_llama()  # a gated (SwiGLU) MLP, as SmolLM2's and Gemma's
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    spec = importlib.util.spec_from_file_location("bilingual_abstraction", TUTORIAL)
    tutorial = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tutorial)
    out = tmp_path / "out"
    outcome = tutorial.main(
        ["--model", str(tmp_path / "model"), "--device", "cpu", "--pairs", "en-es", "en-fr",
         "--max-word-pairs", "6", "--calibration-texts", "4", "--cost-texts", "3",
         "--out", str(out)]
    )  # fmt: skip
    results = outcome["results"]
    assert list(results) == ["identity", "tangent"]
    for mode, result in results.items():
        assert result.metrics["summary.n_tasks"] == 2
        assert result.tables["linearization"][0]["layers"] == [0]
        assert result.tables["linearization"][0]["mode"] == mode
        assert result.tables["linearization"][0]["fidelity_measure"] == "lm_loss_change"
    # on held-out paragraphs both replacements change the model's predictions
    for cost in outcome["lm_loss_cost"].values():
        assert cost["tokens"] > 10 and cost["lm_loss_change"] != 0
    assert {p.name for p in out.iterdir()} == {
        "bilingual_abstraction_identity.json",
        "bilingual_abstraction_identity.png",
        "bilingual_abstraction_tangent.json",
        "bilingual_abstraction_tangent.png",
        "bilingual_abstraction.txt",
    }
    text = (out / "bilingual_abstraction.txt").read_text(encoding="utf-8")
    assert "mean α 0.207 → 0.242" in text
    assert "identity at layers [0]" in text and "tangent at layers [0]" in text
    assert "concepts up" in text and "held-out paragraphs" in text

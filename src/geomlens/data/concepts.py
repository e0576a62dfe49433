"""Two-factor concept sets: rows with a marked word, a binary ``concept``, a ``context``, a ``task``.

A *task* is one binary concept (gender, singular/plural, English/Spanish) seen in many *contexts*
(a word pair, a colour, ...). The abstraction and CCGP analyses read the columns ``text``,
``concept``, ``context`` and ``task``; every function here returns them as a mapping of lists,
which ``gl.run`` takes as data directly.

Shipped sets (``data/concepts/``, provenance in the README there):

- :func:`english_concepts`: gender (48 word pairs), number (46), tense (44), degree
  (comparative/superlative, 44), and ``animacy-by-colour``, the seed paper's shape (animal vs
  artefact crossed with red vs blue, 20 words per cell, different words in each colour);
- :func:`bilingual_concepts`: translation concepts over 6 languages (15 language pairs, 68-96
  word pairs each): concept = language, context = the word pair.

:func:`load_concepts` reads a user's own set from CSV or JSONL.
"""

from __future__ import annotations

import csv
import itertools
import json
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

#: The columns every concept set has.
CONCEPT_COLUMNS = ("text", "concept", "context", "task")
BILINGUAL_LANGUAGES = ("en", "es", "fr", "de", "it", "pt")
#: The frame a translation word is shown in: the bare word, marked (no language is favoured).
BILINGUAL_FRAME = "[[{word}]]"


def _package_file(name: str) -> str:
    return (
        resources.files(__package__).joinpath("concepts").joinpath(name).read_text(encoding="utf-8")
    )


def _empty_columns() -> dict[str, list[str]]:
    return {column: [] for column in CONCEPT_COLUMNS}


def _add_row(columns: dict[str, list[str]], text: str, concept: str, context: str, task: str):
    for column, value in zip(CONCEPT_COLUMNS, (text, concept, context, task)):
        columns[column].append(value)


def english_task_names() -> list[str]:
    """Names of the shipped English two-factor sets."""
    return list(json.loads(_package_file("english.json")))


def _crossed_words(spec: Mapping[str, Any], context: str, concept: str) -> list[str]:
    """The words of one cell of a crossed set: ``words[context][concept]`` (different words per
    context, as shipped), or ``words[concept]`` shared by every context."""
    words = spec["words"]
    return list(words[context][concept] if context in words else words[concept])


def english_concepts(tasks: Iterable[str] | None = None) -> dict[str, list[str]]:
    """The shipped English two-factor sets (all of them, or the named ``tasks``).

    Word-pair sets give one row per word, framed by the set's sentence (``"This is the
    [[king]]."``), with context = the pair (``"king/queen"``). The crossed set
    (``animacy-by-colour``) gives one row per word of each colour's own list, with context =
    the colour.
    """
    sets = json.loads(_package_file("english.json"))
    chosen = list(sets) if tasks is None else list(tasks)
    unknown = [t for t in chosen if t not in sets]
    if unknown:
        raise ValueError(f"Unknown English concept set(s) {unknown}; shipped: {list(sets)}.")
    columns = _empty_columns()
    for task in chosen:
        spec = sets[task]
        frame, concepts = spec["frame"], spec["concepts"]
        if "pairs" in spec:
            for pair in spec["pairs"]:
                context = "/".join(pair)
                for concept, word in zip(concepts, pair):
                    _add_row(columns, frame.format(word=word), concept, context, task)
        else:
            for context, concept in itertools.product(spec["contexts"], concepts):
                for word in _crossed_words(spec, context, concept):
                    text = frame.format(word=word, context=context)
                    _add_row(columns, text, concept, context, task)
    return columns


def _spelling_key(word: str) -> str:
    """Lower case without accents: what an uncased tokenizer sees (``día`` == ``dia``)."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def translation_table() -> list[dict[str, str]]:
    """The shipped translation table: one row per English gloss, a column per language."""
    return list(csv.DictReader(_package_file("translations.csv").splitlines()))


def bilingual_concepts(
    language_pairs: Sequence[str | tuple[str, str]] | None = None,
    *,
    max_word_pairs: int | None = None,
) -> dict[str, list[str]]:
    """Translation concepts: task ``"en-es"``, concept = the language, context = the gloss.

    ``language_pairs``: ``"en-es"`` strings or tuples (default: all 15 pairs of en, es, fr, de,
    it, pt). Word pairs spelled the same in both languages up to case and accents (``casa`` in
    Spanish and Italian) are left out: their difference vector is zero by construction.
    ``max_word_pairs`` keeps the first that many word pairs per task (the table's order).
    """
    if language_pairs is None:
        pairs: list[tuple[str, ...]] = list(itertools.combinations(BILINGUAL_LANGUAGES, 2))
    else:
        pairs = [tuple(p.split("-")) if isinstance(p, str) else tuple(p) for p in language_pairs]
    for pair in pairs:
        if len(pair) != 2 or not set(pair) <= set(BILINGUAL_LANGUAGES) or pair[0] == pair[1]:
            raise ValueError(
                f"Language pair {pair!r} is not two different languages of "
                f"{', '.join(BILINGUAL_LANGUAGES)}; write it as 'en-es' or ('en', 'es')."
            )
    table = translation_table()
    columns = _empty_columns()
    for first, second in pairs:
        task = f"{first}-{second}"
        kept = [r for r in table if _spelling_key(r[first]) != _spelling_key(r[second])]
        for row in kept[:max_word_pairs]:
            for language in (first, second):
                text = BILINGUAL_FRAME.format(word=row[language])
                _add_row(columns, text, language, row["gloss"], task)
    return columns


def validate_concepts(columns: Mapping[str, Sequence[Any]], source: str = "the data") -> None:
    """Check a concept set: the columns exist, each task has exactly two concept values, and
    each context of a task shows both (else its difference vector does not exist)."""
    missing = [c for c in ("concept", "context") if c not in columns]
    if missing or ("text" not in columns and "token_ids" not in columns):
        raise ValueError(
            f"{source} needs the columns text (or token_ids), concept and context (task is "
            f"optional); it lacks {missing or ['text']}. Columns given: {sorted(columns)}."
        )
    tasks = columns["task"] if "task" in columns else ["all"] * len(columns["concept"])
    seen: dict[str, dict[str, set[str]]] = {}
    for task, concept, context in zip(tasks, columns["concept"], columns["context"]):
        seen.setdefault(str(task), {}).setdefault(str(context), set()).add(str(concept))
    for task, contexts in seen.items():
        values = set().union(*contexts.values())
        if len(values) != 2:
            raise ValueError(
                f"Task {task!r} in {source} has concept values {sorted(values)}; a concept is "
                "binary, so each task needs exactly two (split the others into their own task)."
            )
        lacking = sorted(c for c, v in contexts.items() if len(v) < 2)
        if lacking:
            raise ValueError(
                f"Task {task!r} in {source}: context(s) {lacking[:5]} show only one concept "
                "value; every context needs rows of both values (or drop those contexts)."
            )
        if len(contexts) < 2:
            raise ValueError(
                f"Task {task!r} in {source} has one context; abstraction compares a concept "
                "across at least two contexts."
            )


def load_concepts(path: str | Path) -> dict[str, list[str]]:
    """A user's concept set from CSV (a header row) or JSONL (one object per line).

    Columns: ``text`` (a ``[[marked]]`` word is pooled over when present), ``concept`` (two
    values per task), ``context``, and optionally ``task`` (default: one task named after the
    file). Values are read as strings.
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"Concept file {path} does not exist.")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".csv":
        records = list(csv.DictReader(text.splitlines()))
    elif path.suffix == ".jsonl":
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        raise ValueError(
            f"Concept file {path} must be .csv (with a header row) or .jsonl (one object per "
            "line), with columns text, concept, context and optionally task."
        )
    if not records:
        raise ValueError(f"Concept file {path} holds no rows.")
    absent = sorted({"text", "concept", "context"} - set(records[0]))
    if absent:
        raise ValueError(
            f"Concept file {path} lacks column(s) {absent}; it needs text, concept, context "
            f"and optionally task. Its columns: {sorted(records[0])}."
        )
    columns = _empty_columns()
    for record in records:
        task = record.get("task") or path.stem
        text, concept, context = (str(record[c]) for c in ("text", "concept", "context"))
        _add_row(columns, text, concept, context, str(task))
    validate_concepts(columns, source=str(path))
    return columns

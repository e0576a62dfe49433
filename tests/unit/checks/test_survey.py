"""Acceptance of the architecture survey: >= 30 model types from tiny configs, each read on every
backend that attaches, against the model's own forward and against the other backend; and the
docs table is the survey's output."""

from __future__ import annotations

import logging

import pytest
from helpers.paths import REPO

from geomlens.checks.survey import (
    BEGIN,
    END,
    SURVEY_MODELS,
    TOLERANCE,
    markdown,
    survey,
    survey_model,
    unavailable,
)

DOC = REPO / "docs" / "architectures.md"
AVAILABLE = [m for m in SURVEY_MODELS if not unavailable(m)]
for model in SURVEY_MODELS:
    if unavailable(model):  # printed, not counted
        print(f"survey: {model.label} skipped: {unavailable(model)}")


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)  # transformers' config chatter about tiny vocabularies
    yield
    logging.disable(logging.NOTSET)


def test_at_least_thirty_model_types_are_surveyed():
    assert len({m.model_type for m in AVAILABLE}) >= 30


@pytest.mark.parametrize("model", AVAILABLE, ids=lambda m: m.label)
def test_every_backend_that_attaches_reads_the_models_own_numbers(model):
    row = survey_model(model)
    assert row.nnsight.attached, row.nnsight.reason  # nnsight reads every surveyed family
    for report in (row.nnsight, row.transformer_lens):
        assert report.module_unchanged, report.backend
        if not report.attached:
            assert report.reason, f"{report.backend} refused without a reason"
            continue
        assert not report.silent, f"{report.backend}: neither offered nor refused: {report.silent}"
        assert all(report.refused.values()), report.backend
        if report.backend == "nnsight":  # nnsight's module is the user's, so always comparable
            assert report.hidden_error is not None, report.hidden_note
        if report.hidden_error is not None:
            assert report.hidden_error <= TOLERANCE, (report.backend, report.hidden_error)
        if report.additivity_error is not None:
            assert report.additivity_error <= 1e-4, (report.backend, report.additivity_error)
    if row.transformer_lens.attached:
        assert row.cross_backend_error is not None and row.cross_backend_error <= TOLERANCE


def test_the_docs_table_is_the_survey():
    rows, _ = survey(AVAILABLE)
    text = DOC.read_text()
    assert BEGIN in text and END in text, f"{DOC} lost its survey markers"
    generated = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert generated == markdown(rows).strip(), (
        "docs/architectures.md is out of date: regenerate its table with "
        "`python -m geomlens.checks.survey`"
    )

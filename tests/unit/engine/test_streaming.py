"""Streamed data: a generator, a line-streamed file and a ``datasets`` IterableDataset give the
same result as the same rows passed as a list, for every built-in analysis; a source that
fails mid-run reaches the caller unchanged with the model clean."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers.tiny_models import tiny_gpt2

import geomlens as gl
from geomlens.analyses.activation_stats import ActivationStats
from geomlens.analyses.example_rows import corpus_rows
from geomlens.analyses.registry import analysis_class, builtin_analyses
from geomlens.data.streaming import StreamedData, stream_file
from geomlens.models.adapter import count_torch_hooks
from geomlens.testing import assert_same_results


@pytest.fixture(scope="module")
def model():
    hf_model, tokenizer = tiny_gpt2()
    return hf_model, gl.attach(hf_model, backend="nnsight", tokenizer=tokenizer)


def write_jsonl(path, rows):
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("name", builtin_analyses())
def test_streamed_sources_equal_a_list(name, model, tmp_path):
    datasets = pytest.importorskip("datasets")
    _, adapter = model
    recipe = analysis_class(name).example
    rows = recipe.rows()

    def go(data):
        return gl.run(name, adapter, data, **recipe.run_options())

    expected = go(rows)
    sources = {
        "generator": (row for row in rows),
        "jsonl file": stream_file(write_jsonl(tmp_path / "rows.jsonl", rows)),
        "IterableDataset": datasets.Dataset.from_list(rows).to_iterable_dataset(),
        "Dataset": datasets.Dataset.from_list(rows),
    }
    for label, source in sources.items():
        result = go(source)
        assert_same_results(result, expected), label
        assert result.provenance["num_examples"] == len(rows), label


def test_texts_and_token_ids_stream_like_lists(model, tmp_path):
    _, adapter = model
    texts = [row["text"] for row in corpus_rows(9)]
    expected = gl.run("activation-stats", adapter, texts, batch_size=4)
    assert_same_results(gl.run("activation-stats", adapter, iter(texts), batch_size=4), expected)
    lines = tmp_path / "texts.txt"
    lines.write_text("\n\n".join(texts) + "\n", encoding="utf-8")  # blank lines are skipped
    assert_same_results(
        gl.run("activation-stats", adapter, stream_file(lines), batch_size=4), expected
    )
    with open(lines, encoding="utf-8") as handle:  # an open file is read line by line
        assert_same_results(gl.run("activation-stats", adapter, handle, batch_size=4), expected)
    ids = [adapter.tokenizer(t)["input_ids"] for t in texts]
    by_list = gl.run("activation-stats", adapter, ids, batch_size=4)
    by_stream = gl.run("activation-stats", adapter, (torch.tensor(i) for i in ids), batch_size=4)
    assert_same_results(by_stream, by_list)


def test_batches_form_as_rows_arrive(model):
    """The engine never reads ahead of the batch it is running."""
    _, adapter = model
    read = []

    def source():
        for i, row in enumerate(corpus_rows(10)):
            read.append(i)
            yield row

    class Watch(ActivationStats):
        name = "watch"

        def update(self, batch):
            # When batch k runs, at most the rows of batches 0..k (+1 row peeked) are read.
            assert len(read) <= batch.index[-1] + 2
            super().update(batch)

    result = gl.run(Watch(), adapter, source(), batch_size=3)
    assert result.provenance["num_examples"] == 10
    assert result.provenance["num_tokens"] == sum(
        len(adapter.tokenizer(r["text"])["input_ids"]) for r in corpus_rows(10)
    )


class SourceFailure(RuntimeError):
    pass


def test_a_failing_source_reaches_the_caller_with_the_model_clean(model):
    hf_model, adapter = model
    before = {k: v.clone() for k, v in hf_model.state_dict().items()}

    def failing():
        yield from corpus_rows(6)
        raise SourceFailure("disk went away")

    with pytest.raises(SourceFailure, match="disk went away"):
        gl.run("activation-stats", adapter, failing(), batch_size=4)
    assert count_torch_hooks(hf_model) == 0
    assert adapter.hook_count() == 0
    assert all(torch.equal(v, before[k]) for k, v in hf_model.state_dict().items())
    assert not hf_model.training


def test_bad_rows_are_named(model):
    _, adapter = model
    with pytest.raises(ValueError, match="Row 2 .*fields"):
        gl.run("activation-stats", adapter, iter([{"text": "a"}, {"text": "b"}, {"txt": "c"}]))
    with pytest.raises(ValueError, match="Row 1 is a float"):
        gl.run("activation-stats", adapter, iter(["the cat", 3.5]))
    with pytest.raises(ValueError, match="yielded no rows"):
        gl.run("activation-stats", adapter, iter([]))
    with pytest.raises(ValueError, match="lacks columns.*concept"):
        gl.run("abstraction", adapter, iter(["the cat"]))
    generator = (r for r in corpus_rows(3))
    streamed = StreamedData(generator)
    gl.run("activation-stats", adapter, streamed)
    with pytest.raises(ValueError, match="already been read"):
        gl.run("activation-stats", adapter, streamed)
    bad = StreamedData(iter(['{"text": 1}']))
    assert bad.first_row() == {"text": '{"text": 1}'}


def test_a_broken_jsonl_line_is_named(model, tmp_path):
    _, adapter = model
    path = tmp_path / "rows.jsonl"
    path.write_text('{"text": "the cat"}\n{"text": oops}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"rows.jsonl:2 is not valid JSON"):
        gl.run("activation-stats", adapter, stream_file(path))
    with pytest.raises(ValueError, match="only .txt"):
        stream_file(tmp_path / "rows.csv")


def test_limit_and_length(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", corpus_rows(7))
    assert stream_file(path).length == 7
    limited = stream_file(path, limit=3)
    assert limited.length == 3
    assert len(list(limited.rows())) == 3
    assert len(list(limited.rows())) == 3  # a file is read afresh by every pass


def test_recorded_activations_take_streamed_labels():
    rng = np.random.default_rng(0)
    activations = rng.normal(size=(10, 5))
    labels = [{"text": f"row {i}", "concept": i % 2} for i in range(10)]
    expected = gl.run("activation-stats", gl.attach({"x": activations}), None, batch_size=3)
    got = gl.run("activation-stats", gl.attach({"x": activations}), iter(labels), batch_size=3)
    assert_same_results(got, expected)

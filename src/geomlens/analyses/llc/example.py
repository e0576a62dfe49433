"""The llc analysis's example: small rows and a short, cheap sampler every contract check runs."""

from __future__ import annotations

from geomlens.analyses.example_rows import corpus_rows
from geomlens.analyses.spec import Example

EXAMPLE = Example(
    corpus_rows,
    options={
        "chains": 2,
        "draws": 4,
        "sgld_batch_size": 4,
        "sequence_length": 8,
        "init_loss_batches": 2,
    },
    site="logits",
    known_failures={
        "cross-backend": "SGLD draws its noise per parameter tensor and TransformerLens holds "
        "the weights in other tensors, so the chains differ: λ̂ agrees within its interval "
        "over chains, not to 1e-4",
    },
)

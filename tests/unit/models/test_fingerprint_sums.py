"""The weights fingerprint's per-tensor sums, taken a block of rows at a time so that no float64
copy of a whole tensor is made, equal the same four sums over the whole tensor in float64."""

import pytest
import torch

import geomlens.models.fingerprint as fingerprint


def _whole(matrix: torch.Tensor) -> torch.Tensor:
    values = matrix.to(torch.float64)
    rows = torch.arange(1, values.shape[0] + 1, dtype=torch.float64)
    columns = torch.arange(1, values.shape[1] + 1, dtype=torch.float64)
    return torch.stack(
        [
            values.sum(),
            (values * values).sum(),
            (values.sum(dim=1) * rows).sum(),
            (values.sum(dim=0) * columns).sum(),
        ]
    )


@pytest.mark.parametrize(
    "matrix",
    [
        torch.randn(1000, 37, generator=torch.Generator().manual_seed(0)),
        torch.randn(1, 5000, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16),
        torch.arange(300).reshape(100, 3),  # an integer buffer (position ids)
        torch.tensor([[True, False, True]]),
    ],
    ids=["float32", "bfloat16-row", "integer", "bool"],
)
def test_blocks_of_rows_give_the_whole_tensors_sums(matrix, monkeypatch):
    monkeypatch.setattr(fingerprint, "CHUNK_ELEMENTS", 100)  # many blocks, a ragged last one
    blocked = fingerprint._four_sums(matrix)
    whole = _whole(matrix)
    scale = whole.abs().max() + 1.0
    assert torch.allclose(blocked, whole, rtol=1e-12, atol=1e-12 * float(scale))


def test_a_permutation_of_rows_still_changes_the_sums(monkeypatch):
    monkeypatch.setattr(fingerprint, "CHUNK_ELEMENTS", 64)
    matrix = torch.randn(50, 8, generator=torch.Generator().manual_seed(2))
    swapped = matrix[torch.tensor([1, 0, *range(2, 50)])]
    assert not torch.equal(fingerprint._four_sums(matrix), fingerprint._four_sums(swapped))

"""One way to slice a dataset, keeping every part of a row: texts or token ids, named model
inputs (pixel values, images) and columns. ``geomlens run --limit`` and the report's quick
subsets both go through it (they used to drop named inputs)."""

import numpy as np
import pytest
import torch

from geomlens.cli.data import first_rows
from geomlens.data.dataset import Dataset, select_rows
from geomlens.report.plan import subset

PIXELS = torch.arange(5 * 3 * 2 * 2, dtype=torch.float32).reshape(5, 3, 2, 2)


def with_named_inputs() -> Dataset:
    return Dataset(
        texts=[f"a picture of thing {i}" for i in range(5)],
        inputs={"pixel_values": PIXELS, "images": [f"image{i}.png" for i in range(5)]},
        columns={"label": np.arange(5) * 10},
    )


@pytest.mark.parametrize(
    "cut",
    [
        lambda data: select_rows(data, [3, 1]),
        lambda data: subset(data, np.array([3, 1])),
        lambda data: select_rows(first_rows(data, 4), [3, 1]),
    ],
    ids=["select_rows", "report-subset", "cli-first-rows"],
)
def test_a_slice_keeps_texts_named_inputs_and_columns(cut):
    part = cut(with_named_inputs())
    assert part.texts == ["a picture of thing 3", "a picture of thing 1"]
    assert torch.equal(part.inputs["pixel_values"], PIXELS[[3, 1]])
    assert part.inputs["images"] == ["image3.png", "image1.png"]
    assert part.columns["label"].tolist() == [30, 10]


def test_the_cli_limit_keeps_named_inputs_alone():
    images_only = Dataset(inputs={"pixel_values": PIXELS}, columns={"label": np.arange(5)})
    part = first_rows(images_only, 2)
    assert len(part) == 2 and torch.equal(part.inputs["pixel_values"], PIXELS[:2])
    assert part.describe_source().endswith("first 2")


def test_token_ids_and_recorded_rows_are_sliced_too():
    ids = Dataset(token_ids=[[1, 2], [3], [4, 5, 6]], columns={"c": np.array([7, 8, 9])})
    assert select_rows(ids, [2, 0]).token_ids == [[4, 5, 6], [1, 2]]
    recorded = select_rows(Dataset(num_rows=6, columns={"c": np.arange(6)}), [5, 4, 0])
    assert len(recorded) == 3 and recorded.columns["c"].tolist() == [5, 4, 0]

"""Named model inputs beside (or instead of) text: pixel values, any tensor input, image files.

A :class:`~geomlens.data.dataset.Dataset` may carry ``inputs``: named model inputs with one entry
per example, e.g. ``{"pixel_values": array [N, C, H, W]}`` for a vision model or ``{"x": ...}``
for a plain torch module, or ``{"images": [paths or PIL images]}`` that a Hugging Face processor
turns into the model's inputs (with the texts, for a vision-language model). Batches are sliced
by row like texts, so batching, devices and provenance work the same way.

A batch without tokens (images or tensors only) has no token axis: its attention mask is
``[B, 1]`` and every captured activation is one row per example, ``[B, 1, D]`` with the
module's output flattened (a conv map ``[C, H, W]`` becomes ``C·H·W`` numbers), so every
analysis sees one vector per example.
"""

from __future__ import annotations

import inspect
import os
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from geomlens.data.named_inputs import (
    IMAGES,
    INPUT_KEYS,
    check_named_inputs,
    named_inputs_of,
    take_rows,
)
from geomlens.inputs.encoding import (
    ModelInputs,
    PaddingSide,
    encode_texts,
    encode_token_ids,
    strip_span_marker,
)

if TYPE_CHECKING:
    from geomlens.data.dataset import Dataset

__all__ = ["IMAGES", "INPUT_KEYS", "check_named_inputs", "encode_named_inputs", "named_inputs_of"]


def _image(value: Any) -> Any:
    if isinstance(value, (str, os.PathLike)):
        from PIL import Image

        with Image.open(value) as image:
            return image.convert("RGB")
    return value


def encode_named_inputs(
    adapter: Any,
    dataset: Dataset,
    index: np.ndarray,
    *,
    padding_side: PaddingSide = "right",
    max_length: int | None = None,
) -> ModelInputs:
    """One batch of rows ``index`` of a dataset with named inputs: each sliced by row; images
    (and texts) through the adapter's processor, texts otherwise through its tokenizer."""
    index = np.asarray(index)
    batch = {name: take_rows(values, index) for name, values in (dataset.inputs or {}).items()}
    processor = getattr(adapter, "processor", None)
    texts = dataset.texts
    batch_texts = None if texts is None else [texts[i] for i in index]
    if IMAGES in batch:
        if processor is None:
            raise ValueError(
                f"The data holds {IMAGES!r} (image files or PIL images), which need a processor "
                f"to become model inputs; attach model {adapter.model_id!r} with one: "
                "gl.attach(model, processor=AutoProcessor.from_pretrained(...)), or pass the "
                "pixel values yourself as inputs={'pixel_values': array}."
            )
        images = [_image(v) for v in batch.pop(IMAGES)]
        call: dict[str, Any] = {"images": images, "return_tensors": "pt"}
        if batch_texts is not None:
            plain = [strip_span_marker(t)[0] for t in batch_texts]
            call.update(text=plain, padding=True, padding_side=padding_side)
            if max_length is not None:
                call.update(truncation=True, max_length=max_length)
        made = dict(processor(**call))
        input_ids = made.pop("input_ids", None)
        mask = made.pop("attention_mask", None)
        extra = {**made, **batch}
        if input_ids is None:
            return _tokenless(index, extra, padding_side)
        # The model derives positions itself (multimodal rotary positions, image tokens), as its
        # processor expects, so none are passed.
        return ModelInputs(
            index=index,
            input_ids=input_ids,
            attention_mask=mask.bool() if mask is not None else torch.ones_like(input_ids).bool(),
            padding_side=padding_side,
            extra=extra,
        )
    if batch_texts is not None:
        tokens = encode_texts(
            adapter.tokenizer,
            batch_texts,
            index,
            padding_side=padding_side,
            max_length=max_length,
        )
        tokens.extra = batch
        return tokens
    if dataset.token_ids is not None:
        rows = [
            dataset.token_ids[i][:max_length] if max_length else dataset.token_ids[i] for i in index
        ]
        tokens = encode_token_ids(
            rows, index, pad_id=adapter.pad_token_id, padding_side=padding_side
        )
        tokens.extra = batch
        return tokens
    return _tokenless(index, batch, padding_side)


def _tokenless(index: np.ndarray, extra: dict[str, Any], padding_side: PaddingSide) -> ModelInputs:
    mask = torch.ones((len(index), 1), dtype=torch.bool)
    return ModelInputs(index=index, attention_mask=mask, padding_side=padding_side, extra=extra)


def forward_kwargs(
    inputs: ModelInputs, forward: Any, model_id: str, dtype: torch.dtype | None = None
) -> dict[str, Any]:
    """The keyword arguments of one forward (the model class's ``forward`` function) on a batch
    with named inputs.

    Names the forward accepts go by name; a single named input that it does not accept (a plain
    module's ``forward(x)`` given ``pixel_values``) goes to the forward's first parameter.
    Floating-point inputs are cast to ``dtype`` (the model's), so float64 arrays work.
    """
    parameters = inspect.signature(forward).parameters
    named = list(parameters.values())[1:]  # ``forward`` is the class's function: skip self
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in named)
    kwargs: dict[str, Any] = {}
    if inputs.input_ids is not None:
        kwargs["input_ids"] = inputs.input_ids
        kwargs["attention_mask"] = inputs.attention_mask.long()
    for name, value in inputs.extra.items():
        if dtype is not None and isinstance(value, torch.Tensor) and value.is_floating_point():
            value = value.to(dtype)
        if name in parameters or takes_any:
            kwargs[name] = value
        elif len(inputs.extra) == 1 and not kwargs and named:
            kwargs[named[0].name] = value
        else:
            accepted = ", ".join(p.name for p in named)
            raise ValueError(
                f"Model {model_id!r} takes no input named {name!r}; its forward takes "
                f"({accepted}). Name the data's inputs after them."
            )
    if "use_cache" in parameters:
        kwargs["use_cache"] = False
    return kwargs


def one_row_per_example(activation: torch.Tensor) -> torch.Tensor:
    """``[B, ...]`` → ``[B, 1, D]``: a tokenless example's activation as one flattened row."""
    return activation.reshape(activation.shape[0], 1, -1)

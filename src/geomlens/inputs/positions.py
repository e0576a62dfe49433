"""Explain the IndexError a model raises when an input is longer than its position table.

A model with learned absolute positions (GPT-2, BERT) fails deep inside its embedding with
``IndexError: index out of range in self`` when a batch holds more tokens than it has positions.
The engine turns that into an error saying how long the input was, what the model takes, and
how to truncate.
"""

from __future__ import annotations

from typing import Any


def max_positions(adapter: Any) -> int | None:
    """The number of positions the adapter's model takes, or None when its config says not."""
    return adapter.max_positions


def explain_index_error(error: IndexError, adapter: Any, tokens: int) -> BaseException:
    """A ValueError naming the input length and the model's limit when ``tokens`` exceeds it;
    otherwise ``error`` itself (an IndexError with another cause is not ours to explain)."""
    limit = max_positions(adapter)
    if limit is None or tokens <= limit:
        return error
    return ValueError(
        f"An input of this batch has {tokens} tokens but model {adapter.model_id!r} takes at "
        f"most {limit} positions. Truncate with max_length={limit} (CLI: --max-length {limit}) "
        "or give shorter texts."
    )

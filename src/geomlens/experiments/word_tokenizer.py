"""A word-level fast tokenizer over a fixed word list: the tokenizer of the tiny language models
that geomlens trains itself (the two-factor LM) and of the tests' tiny models."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: Ids 0-3, in this order, before the words.
SPECIAL_TOKENS = ("<pad>", "<unk>", "<bos>", "<eos>")


def word_level_tokenizer(words: Iterable[str], *, lowercase: bool = False) -> Any:
    """A ``PreTrainedTokenizerFast`` splitting on whitespace and punctuation: ids 0-3 are
    :data:`SPECIAL_TOKENS`, then ``words`` in order (a repeat keeps its first id); any other
    word is ``<unk>``. ``lowercase``: lower-case the text before splitting."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(dict.fromkeys([*SPECIAL_TOKENS, *words]))}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    if lowercase:
        backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<bos>",
        eos_token="<eos>",
    )

"""Shipped multiple-choice sets for behavioural similarity, and chat rendering of prompts.

Real tokenizers break the naive protocol in two ways. Digit-splitting tokenizers (SmolLM2,
Gemma, Llama 3) write " 1760" as five tokens, and years such as 1760 and 1910 share their
first token, so a year option has no one logit to read: the ``years`` set therefore names its
options by letters ("A: 1760" on its own line, scored on " A") and shows each trial in every
rotation of its options, so that a model's preference for a letter or a position cancels in
the averages. The ``months`` set names its options by value: month names are one token
(" January") on the common tokenizers (GPT-2, Llama, SmolLM2, Gemma), so no label is needed.

Instruct models are asked in their own chat template (the tokenizer's ``chat_template``) when
they have one: the question goes in a user turn, and the scored answer is the first token of
the assistant's turn (so the options lose their leading space). Every prompt records how it
was written (columns ``labels`` and ``prompt_format``), and the result of ``similarity``
states it.

The questions and the year range are written for geomlens (the year range is the one the
representational ``years`` set uses); the month names come from ``stimuli/months.txt``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from geomlens.data.prompts import choice_prompts
from geomlens.data.stimuli import shipped_lines

#: The shipped sets and what they hold (``similarity --option choice_set=NAME``).
CHOICE_SETS = {
    "years": "years 1500-2000 every 10, options labelled A, B, ... (any tokenizer)",
    "months": "the twelve months on a circle, options by name (single tokens)",
}
#: What the user turn ends with in a chat template, in place of the plain prompt's "Answer:".
CHAT_INSTRUCTION = "Reply with the answer only."
PROMPT_FORMATS = ("plain", "chat")


def shipped_choice_set(
    name: str = "years",
    *,
    tokenizer: Any = None,
    chat: bool | None = None,
    candidates: tuple[int, ...] = (2, 4),
    trials: int = 12,
    seed: int = 0,
) -> Any:
    """A shipped choice set as a Dataset for ``similarity`` with ``mode="behavioural"``.

    ``trials`` drawn trials per test and per n (each shown in all n rotations of its
    options). ``chat``: wrap the prompts in ``tokenizer``'s chat template (None: when the
    tokenizer has one; True without a template is an error).
    """
    if name == "years":
        data = choice_prompts(
            list(range(1500, 2001, 10)),
            candidates=candidates,
            trials=trials,
            labels="letters",
            rotations=True,
            seed=seed,
        )
    elif name == "months":
        data = choice_prompts(
            shipped_lines("months.txt"),
            coordinates=range(12),
            metric="circular:12",
            candidates=candidates,
            trials=trials,
            similarity_template="Which month is closest to {probe}: {options}? Answer:",
            identification_template="Which month is {probe}: {options}? Answer:",
            rotations=True,
            seed=seed,
        )
    else:
        raise ValueError(f"No shipped choice set {name!r}; there are {sorted(CHOICE_SETS)}.")
    data.source = f"geomlens choice set {name!r}"
    use_chat = has_chat_template(tokenizer) if chat is None else chat
    return in_chat_template(data, tokenizer) if use_chat else plain_format(data)


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def plain_format(data: Any) -> Any:
    """Record that the prompts are plain text (no chat template)."""
    data.columns["prompt_format"] = np.asarray(["plain"] * len(data))
    return data


def in_chat_template(data: Any, tokenizer: Any, instruction: str = CHAT_INSTRUCTION) -> Any:
    """The prompts of ``data`` as user turns of ``tokenizer``'s chat template, answered at the
    start of the assistant's turn.

    A trailing "Answer:" becomes ``instruction``; the scored options lose their leading
    whitespace (the assistant's first token starts a line). When the template writes the
    tokenizer's BOS token and the tokenizer adds it again when encoding, the written one is
    dropped so that the model sees one BOS.
    """
    from geomlens.data.dataset import Dataset

    if not has_chat_template(tokenizer):
        raise ValueError(
            "chat=True needs a tokenizer with a chat template (tokenizer.chat_template); this "
            "one has none. Use chat=None (use it when there is one) or chat=False."
        )
    bos: str = getattr(tokenizer, "bos_token", None) or ""
    adds_bos = bool(bos) and _adds_bos(tokenizer)
    texts = []
    for text in data.texts:
        question = text.rstrip()
        if question.endswith("Answer:"):
            question = question[: -len("Answer:")].rstrip()
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": f"{question}\n{instruction}"}],
            add_generation_prompt=True,
            tokenize=False,
        )
        if adds_bos and rendered.startswith(bos):
            rendered = rendered[len(bos) :]
        texts.append(rendered)
    columns = dict(data.columns)
    options = np.empty(len(texts), dtype=object)
    options[:] = [[str(o).lstrip() for o in row] for row in data.columns["options"]]
    columns["options"] = options
    columns["prompt_format"] = np.asarray(["chat"] * len(texts))
    return Dataset(texts=texts, columns=columns, source=data.source)


def _adds_bos(tokenizer: Any) -> bool:
    ids = tokenizer("a")["input_ids"]
    return bool(ids) and ids[0] == tokenizer.bos_token_id

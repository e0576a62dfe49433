"""Out-of-distribution inputs built in: random token ids, partly replaced text, Python source.

Feature explosion (docs/sae.md) is measured by comparing in-distribution English with inputs
the model was not trained to read. Three kinds ship, from far to near:

- ``random_tokens``: every ordinary token replaced by a uniformly drawn vocabulary id;
- ``replaced_15pct`` (any fraction): that fraction of a text's ordinary tokens replaced;
- ``python_source``: real code, the source of Python's standard library (another domain).

Replacements keep special tokens ([CLS], [SEP], BOS, ...) where they were and never draw a
special id, so the inputs differ from English only in their ordinary tokens and the lengths
match the texts they were made from.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Modules whose source (code, not prose) makes the other-domain condition.
SOURCE_MODULES = (
    "argparse", "ast", "calendar", "collections", "configparser", "csv", "dataclasses",
    "difflib", "email.message", "fractions", "functools", "heapq", "json.decoder", "logging",
    "pathlib", "pprint", "shutil", "statistics", "string", "tarfile", "textwrap", "zipfile",
)  # fmt: skip


def replace_tokens(
    rows: Sequence[Sequence[int]],
    fraction: float,
    vocab_size: int,
    *,
    special_ids: Sequence[int] = (),
    seed: int = 0,
) -> list[list[int]]:
    """Replace ``fraction`` of each row's ordinary tokens by uniformly drawn ordinary ids.

    The number replaced per row is ``round(fraction * n_ordinary)``; a replaced token always
    changes (the draw excludes the original id), so ``fraction=1`` gives uniform random token
    ids of the same length and with the same special tokens as the row.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(
            f"fraction is a share of tokens: expected 0 <= fraction <= 1, got {fraction}"
        )
    special = {int(i) for i in special_ids}
    pool = np.array([i for i in range(vocab_size) if i not in special], dtype=np.int64)
    if len(pool) < 2:
        raise ValueError(
            f"A vocabulary of {vocab_size} ids with {len(special)} special ids leaves fewer than "
            "two ordinary ids to draw from."
        )
    rng = np.random.default_rng(seed)
    replaced = []
    for row in rows:
        ids = np.asarray(row, dtype=np.int64).copy()
        ordinary = np.flatnonzero(~np.isin(ids, list(special)))
        count = int(round(fraction * len(ordinary)))
        chosen = rng.choice(ordinary, size=count, replace=False) if count else ordinary[:0]
        for position in chosen:
            draw = ids[position]
            while draw == ids[position]:
                draw = pool[rng.integers(len(pool))]
            ids[position] = draw
        replaced.append(ids.tolist())
    return replaced


def random_token_rows(
    rows: Sequence[Sequence[int]],
    vocab_size: int,
    *,
    special_ids: Sequence[int] = (),
    seed: int = 0,
) -> list[list[int]]:
    """Uniform random token ids shaped like ``rows`` (same lengths, same special tokens)."""
    return replace_tokens(rows, 1.0, vocab_size, special_ids=special_ids, seed=seed)


def python_source_chunks(limit: int | None = None, *, min_chars: int = 300) -> list[str]:
    """Chunks of standard-library source code, docstrings removed (so the text is code, not
    prose), consecutive top-level statements joined up to about ``min_chars`` characters each,
    in a fixed module order."""
    chunks: list[str] = []
    for name in SOURCE_MODULES:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(inspect.getsource(importlib.import_module(name)))
        except (ImportError, OSError, TypeError, SyntaxError):
            continue
        _strip_docstrings(tree)
        current: list[str] = []
        for statement in tree.body:
            current.append(ast.unparse(statement))
            if sum(len(c) for c in current) >= min_chars:
                chunks.append("\n".join(current))
                current = []
                if limit is not None and len(chunks) >= limit:
                    return chunks
    return chunks


def _strip_docstrings(tree: ast.AST) -> None:
    """Drop the docstring statement of the module and of every class and function in place."""
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        first = body[0] if body else None
        if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):
            node.body = body[1:] or [ast.Pass()]


def feature_explosion_data(
    tokenizer: Any,
    *,
    calibration_rows: int,
    heldout_rows: int,
    max_tokens: int,
    ood_rows: int | None = None,
    seed: int = 0,
) -> dict[str, list]:
    """Token ids, a ``condition`` column and a ``source_row`` column for feature-explosion runs
    (docs/sae.md).

    ``calibration`` and ``heldout``: disjoint parts of the bundled English corpus. Every OOD set
    is as long as the held-out set, row for row, so that the whole negative set of each AUROC is
    length-matched and no score can tell the conditions apart by length alone:
    ``random_tokens`` and ``replaced_15pct`` are made from the held-out rows themselves (row i
    from held-out row i: same length, same special tokens), ``python_source`` is
    standard-library code cut to the held-out lengths (row i as long as held-out row i).
    ``source_row``: for a held-out row its own number, for a row made from one the number of
    that held-out row (the pairs a paired comparison reads), −1 for the rest. ``ood_rows``, if
    given, must equal ``heldout_rows``. Every row is truncated to ``max_tokens`` tokens by
    ``tokenizer`` (special tokens included).
    """
    from geomlens.data.corpus import corpus_split

    if ood_rows is not None and ood_rows != heldout_rows:
        raise ValueError(
            f"ood_rows={ood_rows} differs from heldout_rows={heldout_rows}: every held-out row "
            "is a negative of each OOD AUROC, so each OOD set is made from (or length-matched "
            "to) all of them; leave ood_rows out or set it to heldout_rows."
        )

    def encode(texts: list[str]) -> list[list[int]]:
        ids = tokenizer(texts, truncation=True, max_length=max_tokens)["input_ids"]
        return [list(map(int, row)) for row in ids]

    heldout = encode(corpus_split("heldout", heldout_rows))
    special = list(getattr(tokenizer, "all_special_ids", []) or [])
    vocab = len(tokenizer)
    conditions = {
        "calibration": encode(corpus_split("calibration", calibration_rows)),
        "heldout": heldout,
        "random_tokens": random_token_rows(heldout, vocab, special_ids=special, seed=seed + 1),
        "replaced_15pct": replace_tokens(heldout, 0.15, vocab, special_ids=special, seed=seed + 2),
        "python_source": length_matched_source(tokenizer, [len(row) for row in heldout]),
    }
    paired = ("heldout", "random_tokens", "replaced_15pct")
    return {
        "token_ids": [row for part in conditions.values() for row in part],
        "condition": [name for name, part in conditions.items() for _ in part],
        "source_row": [
            i if name in paired else -1
            for name, part in conditions.items()
            for i in range(len(part))
        ],
    }


def length_matched_source(tokenizer: Any, lengths: Sequence[int]) -> list[list[int]]:
    """Standard-library code as token ids, row i exactly ``lengths[i]`` tokens long (special
    tokens included, as ``tokenizer`` adds them): consecutive chunks of
    :func:`python_source_chunks`, a chunk too short for its length joined with the next ones."""
    chunks = iter(python_source_chunks())
    rows = []
    for length in lengths:
        text = ""
        ids: list[int] = []
        while len(ids) < length:
            piece = next(chunks, None)
            if piece is None:
                raise ValueError(
                    f"The standard-library source ran out before a row of {length} tokens; "
                    "ask for fewer or shorter out-of-distribution rows."
                )
            text = f"{text}\n{piece}" if text else piece
            ids = tokenizer(text, truncation=True, max_length=length)["input_ids"]
        rows.append(list(map(int, ids)))
    return rows

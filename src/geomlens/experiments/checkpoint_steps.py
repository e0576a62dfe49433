"""Which training steps a series keeps: ``every:K`` and ``log:N`` specifications.

The same words thin an existing series (``Series.select("log:40")``) and choose the steps an
experiment saves (``--checkpoints log:40``), so that both read alike.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def parse_spec(spec: str) -> tuple[str, int]:
    """``("every", K)`` or ``("log", N)`` from ``"every:K"`` / ``"log:N"`` (K, N ≥ 1)."""
    kind, _, number = str(spec).partition(":")
    if kind not in ("every", "log") or not number.strip().isdigit() or int(number) < 1:
        raise ValueError(
            f"Unknown checkpoint selection {spec!r}; use 'log:N' (about N log-spaced steps) or "
            "'every:K' (every K-th step), e.g. 'log:40' or 'every:10'."
        )
    return kind, int(number)


def spec_steps(spec: str, last_step: int) -> list[int]:
    """The steps 0..``last_step`` that ``spec`` keeps, first and last included.

    ``every:K``: 0, K, 2K, … and the last step. ``log:N``: 0 and about N − 1 steps spaced
    evenly in log(step) from 1 to the last (rounding merges the repeats among the first ones).
    """
    if last_step < 0:
        raise ValueError(f"expected a last step >= 0, got {last_step}")
    kind, number = parse_spec(spec)
    if kind == "every":
        steps = set(range(0, last_step + 1, number))
    else:
        # More than one target per step only repeats steps (and log:10**12 would not fit in
        # memory): at most last_step of them.
        count = max(min(number - 1, last_step), 1)
        steps = {0} | {int(round(s)) for s in np.geomspace(1, max(last_step, 1), count)}
    steps.add(last_step)
    return sorted(s for s in steps if 0 <= s <= last_step)


def check_saved_steps(spec: str, last_step: int, unit: str = "steps") -> None:
    """Refuse, before a run starts, a ``--checkpoints`` selection that asks for more
    checkpoints than the run has ``unit`` (``log:N`` with N above ``last_step + 1``)."""
    kind, number = parse_spec(spec)
    if kind == "log" and number > last_step + 1:
        raise ValueError(
            f"--checkpoints {spec} asks for {number} checkpoints, but a run of {last_step} "
            f"{unit} has only {last_step + 1} to save; give log:N with N <= {last_step + 1}, or "
            "every:K."
        )


def thin_indices(steps: Sequence[int], spec: str) -> list[int]:
    """Indices of the entries of an ordered series (by ``steps``) that ``spec`` keeps.

    ``every:K`` keeps every K-th checkpoint (the first and last always). ``log:N`` keeps N
    checkpoints (all of them when there are N or fewer), the first and last included, spread
    as evenly in log(1 + step) as the series allows: the one nearest to each of N evenly
    spaced points in log(1 + step), then, where two points chose the same checkpoint, the one
    farthest (in log(1 + step)) from those already kept, until N are kept.
    """
    if not steps:
        return []
    kind, number = parse_spec(spec)
    last = len(steps) - 1
    if kind == "every":
        return sorted(set(range(0, len(steps), number)) | {last})
    if len(steps) <= number:
        return list(range(len(steps)))
    positions = np.log1p(np.asarray(steps, dtype=float))
    targets = np.linspace(positions[0], positions[-1], number)
    chosen = {int(np.argmin(np.abs(positions - target))) for target in targets} | {0, last}
    while len(chosen) < number:
        kept = positions[sorted(chosen)]
        gaps = np.min(np.abs(positions[:, None] - kept[None, :]), axis=1)
        gaps[sorted(chosen)] = -1.0
        chosen.add(int(np.argmax(gaps)))
    return sorted(chosen)

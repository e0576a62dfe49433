"""Planted concept activations with a known abstraction cosine (SPEC §2.1 geometry)."""

from __future__ import annotations

import numpy as np


def planted_many_contexts(
    alpha: float,
    *,
    k: int = 16,
    d: int = 48,
    n: int = 30,
    noise: float = 0.2,
    offset: float = 1.0,
    seed: int = 1,
):
    """u_c = a v_S + b w_c with w_c orthonormal and orthogonal to v_S: every pair has cosine
    a²/(a² + b²) = α. Each context also gets its own random offset (``offset`` × a standard
    normal vector)."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((d, k + 1)))
    v_s, w = basis[:, 0], basis[:, 1:]
    a = 2.0 * np.sqrt(alpha)
    b = 2.0 * np.sqrt(1 - alpha)
    rows, concept, context = [], [], []
    for c in range(k):
        shift = offset * rng.standard_normal(d)
        u = a * v_s + b * w[:, c]
        for sign, name in ((-0.5, "minus"), (0.5, "plus")):
            rows.append(shift + sign * u + noise * rng.standard_normal((n, d)))
            concept += [name] * n
            context += [f"context{c:02d}"] * n
    return np.concatenate(rows).astype(np.float32), concept, context

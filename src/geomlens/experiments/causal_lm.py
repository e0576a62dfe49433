"""The papers' causal-LM protocols as functions: behavioural choices and gated-MLP linearisation.

``behavioural_choices`` asks a causal LM the shipped multiple-choice questions
(:mod:`geomlens.data.choice_sets`: years with letter-labelled options in every rotation, in the
model's chat template when it has one) and returns the ``similarity`` result in behavioural
mode; :func:`choice_summary` reads p_S and p_I (n = 2 and every n measured) off it with chance
and 95% intervals, and a sentence saying whether they are above chance.

``gated_mlp_linearisation`` is the abstraction paper's protocol: bilingual translation concepts
(concept = language, context = word pair; shipped in ``data/concepts``), α and CCGP measured
with and without replacing the MLP activation of the penultimate layer (the gate branch of a
gated MLP) by the identity or its tangent at the mean pre-activation. The analysis' own LM-loss
change is measured on the concept words (one to three tokens each); :func:`lm_loss_cost` measures
the cost where it means something, on held-out paragraphs of the bundled English corpus;
:func:`linearisation_summary` gives the headline per mode with a paired bootstrap interval on
the mean α change over concepts.

Both are what ``tutorials/gpu/birth_years.py`` / ``bilingual_abstraction.py`` and the report's
causal-LM section call; they take an attached adapter (``geomlens.load``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from geomlens.data.choice_sets import shipped_choice_set
from geomlens.data.concepts import bilingual_concepts
from geomlens.data.corpus import corpus_split, stdlib_paragraphs
from geomlens.data.dataset import Dataset
from geomlens.engine import run
from geomlens.models.adapter import Adapter
from geomlens.results import Result

#: The abstraction paper's numbers (Gemma 4 E2B, 18 concepts): α base → linearised (identity).
ABSTRACTION_SEED = {"alpha_base": 0.207, "alpha_linearized": 0.242, "up": "18/18"}
#: The resolution paper's birth-year resolution on 2-7B models, in years.
RESOLUTION_SEED = (70, 80)
LINEARISATION_MODES = ("identity", "tangent")


def behavioural_choices(
    adapter: Adapter,
    *,
    choice_set: str = "years",
    chat: bool | None = None,
    candidates: tuple[int, ...] = (2, 4),
    trials: int = 12,
    batch_size: int = 4,
    seed: int = 0,
    progress: bool = False,
) -> Result:
    """``similarity`` (behavioural) on a shipped choice set: p_S^n, p_I^n and g(d) from the
    model's own next-token choices. ``trials`` drawn trials per test and n, each shown in all
    n rotations (so ``trials · Σn · 2`` prompts)."""
    data = shipped_choice_set(
        choice_set,
        tokenizer=adapter.tokenizer,
        chat=chat,
        candidates=candidates,
        trials=trials,
        seed=seed,
    )
    result = run(
        "similarity",
        adapter,
        data,
        mode="behavioural",
        batch_size=batch_size,
        seed=seed,
        progress=progress,
    )
    assert isinstance(result, Result)  # one analysis: one Result
    return result


def choice_summary(result: Result) -> dict[str, Any]:
    """p_S and p_I (n = 2), each n's rows, the prompt format and a one-line reading."""
    rows = result.tables["choice_accuracy"]
    pick = {(r["test"], r["n"]): r for r in rows}
    similarity, identification = pick.get(("similarity", 2)), pick.get(("identification", 2))

    def said(name: str, row: dict[str, Any]) -> str:
        where = "above" if row["above_chance"] else "not above"
        return (
            f"{name}^{row['n']} = {row['accuracy']:.3f} [{row['ci_low']:.3f}, "
            f"{row['ci_high']:.3f}] ({where} chance {row['chance']:.2f})"
        )

    text = "; ".join(
        said("p_S" if r["test"] == "similarity" else "p_I", r)
        for r in sorted(rows, key=lambda r: (r["test"] != "similarity", r["n"]))
    )
    return {
        "p_similarity": similarity["accuracy"] if similarity else float("nan"),
        "p_identification": identification["accuracy"] if identification else float("nan"),
        "rows": rows,
        "prompts": result.tables.get("prompts", []),
        "position_preference": result.tables.get("position_preference", []),
        "text": text,
    }


def gated_mlp_linearisation(
    adapter: Adapter,
    *,
    modes: Sequence[str] = LINEARISATION_MODES,
    pairs: Sequence[str] | None = None,
    max_word_pairs: int | None = None,
    layers: list[int] | None = None,
    calibration_texts: int = 64,
    batch_size: int = 32,
    progress: bool = False,
) -> dict[str, Result]:
    """``linearization-effect`` on the bilingual concepts, once per mode, at the penultimate
    layer unless ``layers`` say otherwise; measured at that layer's output and the last
    layer's (the paper's protocol). Returns the result per mode."""
    unknown = [m for m in modes if m not in LINEARISATION_MODES]
    if unknown or not modes:
        raise ValueError(f"modes must be some of {LINEARISATION_MODES}; got {list(modes)}.")
    layers = list(layers) if layers else [adapter.n_layers - 2]
    deepest = max(layer % adapter.n_layers for layer in layers)
    last = adapter.n_layers - 1
    sites = [f"blocks.{layer}.hook_resid_post" for layer in sorted({deepest, last})]
    data = bilingual_concepts(pairs, max_word_pairs=max_word_pairs)

    def one(mode: str) -> Result:
        result = run(
            "linearization-effect",
            adapter,
            data,
            site=sites,
            layers=layers,
            mode=mode,
            calibration_texts=calibration_texts,
            batch_size=batch_size,
            progress=progress,
        )
        assert isinstance(result, Result)  # one analysis: one Result
        return result

    return {mode: one(mode) for mode in modes}


def linearisation_summary(result: Result, seed: int = 0) -> dict[str, Any]:
    """Mean α base → linearised at the summary site, concepts up, a 95% paired bootstrap
    interval of the mean α change over concepts, CCGP, and the LM-loss cost (nats/token)."""
    m = result.metrics
    site = result.tables["linearization"][0]["summary_site"]
    change = np.array(
        [r["alpha_change"] for r in result.tables["comparison"] if r["site"] == site], float
    )
    change = change[np.isfinite(change)]
    low = high = float("nan")
    if len(change) >= 2:
        rng = np.random.default_rng(seed)
        means = change[rng.integers(len(change), size=(2000, len(change)))].mean(axis=1)
        low, high = (float(q) for q in np.quantile(means, [0.025, 0.975]))
    n_tasks = int(m["summary.n_tasks"])
    loss = m.get("fidelity.lm_loss_change", float("nan"))
    text = (
        f"{result.tables['linearization'][0]['mode']} at layers "
        f"{result.tables['linearization'][0]['layers']}, measured at {site}: mean α "
        f"{m['summary.alpha_base']:.3f} → {m['summary.alpha_linearized']:.3f} (change "
        f"{change.mean() if len(change) else float('nan'):+.3f} [{low:+.3f}, {high:+.3f}]), "
        f"{int(m['summary.tasks_alpha_up'])}/{n_tasks} concepts up; CCGP "
        f"{m['summary.ccgp_base']:.3f} → {m['summary.ccgp_linearized']:.3f}; LM loss "
        f"{loss:+.3f} nats/token"
    )
    return {
        "site": site,
        "alpha_base": m["summary.alpha_base"],
        "alpha_linearized": m["summary.alpha_linearized"],
        "alpha_change_ci": (low, high),
        "tasks_alpha_up": int(m["summary.tasks_alpha_up"]),
        "n_tasks": n_tasks,
        "ccgp_base": m["summary.ccgp_base"],
        "ccgp_linearized": m["summary.ccgp_linearized"],
        "lm_loss_change": loss,
        "text": text,
    }


def lm_loss_cost(
    adapter: Adapter,
    *,
    layers: list[int] | None = None,
    mode: str = "identity",
    texts: Sequence[str] | None = None,
    calibration_texts: int = 64,
    max_length: int = 128,
    batch_size: int = 8,
) -> dict[str, float]:
    """Next-token loss (nats per token) with and without the linearisation, on ``texts``
    (with ``uniform_loss``, log V nats: a uniform guess over the ``vocab_size`` tokens)
    (default: 16 held-out paragraphs of the bundled corpus, disjoint from the calibration
    paragraphs that give the tangent's x₀)."""
    if mode not in LINEARISATION_MODES:
        raise ValueError(f"mode must be one of {LINEARISATION_MODES}; got {mode!r}.")
    layers = list(layers) if layers else [adapter.n_layers - 2]
    texts = list(texts) if texts is not None else corpus_split("heldout", 16)
    calibration = stdlib_paragraphs(calibration_texts) if mode == "tangent" else None
    data = Dataset(texts=texts)
    totals = {"base": [0.0, 0], "linearized": [0.0, 0]}
    vocabulary = 0
    for start in range(0, len(texts), batch_size):
        index = np.arange(start, min(start + batch_size, len(texts)))
        inputs = adapter.encode(data, index, max_length=max_length)
        runs = {"base": adapter.capture(inputs, ["logits"])["logits"]}
        with adapter.linearize(layers, mode, calibration):
            runs["linearized"] = adapter.capture(inputs, ["logits"])["logits"]
        ids, mask = inputs.input_ids, inputs.attention_mask.bool()
        if ids is None:
            raise ValueError("The LM loss needs token ids (a text model's inputs).")
        pairs = (mask[:, :-1] & mask[:, 1:]).to("cpu")
        for condition, logits in runs.items():
            vocabulary = int(logits.shape[-1])
            losses = F.cross_entropy(
                logits[:, :-1].transpose(1, 2).to(torch.float64).cpu(),
                ids[:, 1:].cpu(),
                reduction="none",
            )
            totals[condition][0] += float(losses[pairs].sum())
            totals[condition][1] += int(pairs.sum())
    base = totals["base"][0] / max(totals["base"][1], 1)
    linearized = totals["linearized"][0] / max(totals["linearized"][1], 1)
    return {
        "lm_loss_base": base,
        "lm_loss_linearized": linearized,
        "lm_loss_change": linearized - base,
        "tokens": float(totals["base"][1]),
        "texts": float(len(texts)),
        # The reference every loss is read against: a uniform guess over the vocabulary,
        # log V nats per token; a loss above it is a failed measurement, not a finding.
        "vocab_size": float(vocabulary),
        "uniform_loss": float(np.log(vocabulary)) if vocabulary > 1 else float("nan"),
    }

"""Birth-year resolution of a causal LM: the resolution paper's LLM protocol, with geomlens.

Each prompt lists n people with birth years drawn from [800, 1600) and asks either "Who was
born closest to {p}?" (similarity test) or "Who was born in {p}?" (identification test). The
model's next-token probabilities of the names, renormalised over the n names, are its choice
probabilities D_i (``similarity`` in behavioural mode). From them the script reports the
measured p_S^n and p_I^n for every n, recovers g(d) up to scale from log(D_i / D_j), and fits
it with the four families of ``resolution`` (step, linear, exponential, Gaussian; chosen by
AIC) to give the model's resolution ε in years. The paper reports about 70-80 years for
gemma-2-2b-it, Llama-3.2-3B and Qwen2.5-7B. See docs/similarity.md.

    python tutorials/gpu/birth_years.py --model google/gemma-2-2b-it --device cuda
    python tutorials/gpu/birth_years.py --model PATH --device cpu --n-max 4 --trials 3   # tiny

It also predicts p_S^n and p_I^n from the recovered g under the Luce rule: a model whose
choices follow one stationary g matches them. Instruct models are asked in their own chat
template (``--chat auto``, the default, uses it when the tokenizer has one).

The closing line is a verdict, not just a number: when no similarity accuracy's 95% interval
lies above chance (1/n) the choices carry no distance information and no ε is reported (the
recovered g is noise; small models near chance at small n give NaN or a scale anywhere); when
the best family's ε falls outside the distances measured, or families that fit equally well
(AIC within 2) disagree on ε by more than a factor of 2, ε is "not determined by these data".
Writes ``birth_years.json`` (the similarity result), ``birth_years_fits.json`` (ε per family,
the Luce-rule prediction, the verdict) and ``birth_years.png`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

import geomlens as gl
from geomlens.analyses.resolution.profile_fits import FAMILIES, chosen_fit, fit_family, fitted_g
from geomlens.atomic_files import atomic_save_figure, atomic_write_text
from geomlens.data import stimuli
from geomlens.data.choice_sets import has_chat_template, in_chat_template
from geomlens.data.prompts import birth_year_prompts
from geomlens.theory.finite_sets import evaluate

#: Families fitting equally well (AIC within this) must agree on ε within this factor.
EQUAL_AIC = 2.0
AGREEMENT_FACTOR = 2.0


def single_token_names(tokenizer, names: list[str], prefix: str = " ") -> list[str]:
    """The names whose option text (prefix + name) is one token with a first token of its own."""
    kept, seen = [], set()
    for name in names:
        ids = tokenizer(prefix + name, add_special_tokens=False)["input_ids"]
        if len(ids) == 1 and ids[0] not in seen and ids[0] != tokenizer.unk_token_id:
            kept.append(name)
            seen.add(ids[0])
    return kept


def candidate_counts(n_max: int, n_step: int) -> list[int]:
    """2, 2 + step, ... up to n_max (always including n_max)."""
    counts = list(range(2, n_max + 1, n_step))
    if counts[-1] != n_max:
        counts.append(n_max)
    return counts


def fit_behavioural_profile(rows: list[dict]) -> list[dict]:
    """Every family fitted to the recovered g(d) (each bin weighted by its option count).

    The fits are anchored at g(0) = 1, where the recovered g is normalised when the
    identification prompts give it a d = 0 bin."""
    distance = np.array([r["distance"] for r in rows])
    mean = np.array([r["mean"] for r in rows])
    count = np.array([r["count"] for r in rows], dtype=float)
    fits = [fit_family(f, distance, mean, count, 0.0) for f in FAMILIES]
    best = chosen_fit(fits)
    return [
        {
            "family": f.family,
            "epsilon": f.epsilon,
            "half_width": f.half_width,
            "delta": f.delta,
            "level": f.level,
            "epsilon_fast": f.epsilon_fast,
            "fast_share": f.fast_share,
            "aic": f.aic,
            "chosen": f is best,
        }
        for f in fits
    ]


def resolution_verdict(accuracy: list[dict], fits: list[dict], distances: np.ndarray) -> dict:
    """Whether these choices resolve a scale ε, and the sentence that says so.

    ``accuracy`` are the result's choice_accuracy rows (with chance and 95% intervals),
    ``fits`` those of :func:`fit_behavioural_profile`, ``distances`` the recovered g's bins.
    """
    similarity = [r for r in accuracy if r["test"] == "similarity"]
    measured = "; ".join(
        f"p_S^{r['n']} = {r['accuracy']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}], "
        f"chance {r['chance']:.3f}"
        for r in similarity
    )
    if not any(r["ci_low"] > r["chance"] for r in similarity):
        return {
            "resolved": False,
            "epsilon": float("nan"),
            "reason": "chance",
            "text": f"too close to chance to read a resolution ({measured}): no interval lies "
            "above chance, so these choices cannot be told from ones that ignore distance, "
            "the g(d) recovered from them cannot be told from noise, and no ε is reported "
            "(more trials narrow the intervals)",
        }
    chosen = next(f for f in fits if f["chosen"])
    positive = distances[distances > 0]
    low, high = float(positive.min()), float(positive.max())
    # The half-width (where g is halfway from 1 to its floor) means the same for every
    # family; ε marks a different point of each curve, so families are compared on it.
    width = chosen["half_width"]
    if not np.isfinite(width) or not low <= width <= high:
        return {
            "resolved": False,
            "epsilon": float("nan"),
            "reason": "outside",
            "text": f"above chance ({measured}) but ε is not determined by these data: the "
            f"best family ({chosen['family']}) puts its half-width at {width:.4g} years, "
            f"outside the distances measured [{low:.0f}, {high:.0f}]",
        }
    rivals = [
        f["half_width"]
        for f in fits
        if np.isfinite(f["aic"]) and f["aic"] - chosen["aic"] < EQUAL_AIC
    ]
    if not all(np.isfinite(rivals)) or max(rivals) > AGREEMENT_FACTOR * min(rivals):
        return {
            "resolved": False,
            "epsilon": float("nan"),
            "reason": "families disagree",
            "text": f"above chance ({measured}) but ε is not determined by these data: "
            f"families fitting equally well (AIC within {EQUAL_AIC:g}) put the half-width "
            f"anywhere from {min(rivals):.4g} to {max(rivals):.4g} years",
        }
    return {
        "resolved": True,
        "epsilon": float(chosen["epsilon"]),
        "reason": "",
        "text": f"resolution ε = {chosen['epsilon']:.1f} years, half-width {width:.1f} years "
        f"({chosen['family']}, Δ = {chosen['delta']:.3f}); {measured}",
    }


def luce_prediction(
    rows: list[dict], counts: list[int], low: int = 800, high: int = 1600, seed: int = 0
) -> list[dict]:
    """p_S^n and p_I^n that the model's own recovered g predicts under the Luce rule.

    Birth years on a 5-year grid over [low, high), g interpolated from the recovered bins,
    trials of distinct stimuli as in the prompts. A model whose choices follow a stationary
    g with the Luce rule matches its measured accuracies; a gap says how far it is from that.
    """
    years = np.arange(low, high, 5, dtype=float)
    distances = np.abs(np.subtract.outer(years, years))
    d = np.array([r["distance"] for r in rows])
    g = np.clip(np.array([r["mean"] for r in rows]), 0.0, None)
    similarity = np.interp(distances, d, g)
    predicted = []
    for n in counts:
        accuracy = evaluate(
            distances,
            similarity,
            n,
            draws="distinct",
            method="monte_carlo",
            samples=20_000,
            seed=seed,
        )
        predicted.append({"n": n, "p_similarity": accuracy.p_s, "p_identification": accuracy.p_i})
    return predicted


def plot(
    result: gl.Result, fits: list[dict], predicted: list[dict], path: Path, model: str
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (ax_g, ax_n) = plt.subplots(1, 2, figsize=(11, 4))
    rows = result.tables["g_of_d"]
    d = np.array([r["distance"] for r in rows])
    ax_g.errorbar(d, [r["mean"] for r in rows], [r["std"] for r in rows], fmt="o", ms=3)
    grid = np.linspace(0, d.max(), 300)
    for fit in fits:
        if not np.isfinite(fit["epsilon"]):
            continue
        parameters = (fit[k] for k in ("epsilon", "level", "epsilon_fast", "fast_share"))
        g = fitted_g(fit["family"], *parameters)(grid)
        style = "-" if fit["chosen"] else ":"
        ax_g.plot(grid, g, style, label=f"{fit['family']} ε = {fit['epsilon']:.0f}")
    ax_g.set_xlabel("|birth year − probe year|")
    ax_g.set_ylabel("recovered g(d) (up to scale)")
    ax_g.legend(fontsize=7)
    for test, marker in (("similarity", "o-"), ("identification", "s-")):
        mine = [r for r in result.tables["choice_accuracy"] if r["test"] == test]
        ax_n.errorbar(
            [r["n"] for r in mine],
            [r["accuracy"] for r in mine],
            [r["se"] for r in mine],
            fmt=marker,
            ms=3,
            label=test,
        )
    for key, test in (("p_similarity", "similarity"), ("p_identification", "identification")):
        ax_n.plot(
            [p["n"] for p in predicted],
            [p[key] for p in predicted],
            "--",
            lw=0.8,
            label=f"{test}: Luce rule with the recovered g",
        )
    n = np.array(sorted({r["n"] for r in result.tables["choice_accuracy"]}))
    ax_n.plot(n, 1 / n, "k:", lw=0.8, label="chance 1/n")
    ax_n.set_xlabel("people listed n")
    ax_n.set_ylabel("accuracy (mean D of the right name)")
    ax_n.legend(fontsize=7)
    figure.suptitle(f"birth-year protocol · {model}")
    figure.tight_layout()
    atomic_save_figure(figure, path, dpi=120)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="google/gemma-2-2b-it", help="HF name or local path.")
    parser.add_argument("--device", default="cuda", help="cuda, cpu, ...")
    parser.add_argument("--backend", default="nnsight", help="nnsight or transformer-lens.")
    parser.add_argument("--dtype", default="float32", help="float32, bfloat16, float16.")
    parser.add_argument("--n-max", type=int, default=98, help="Most people per prompt.")
    parser.add_argument("--n-step", type=int, default=8, help="Step between people counts.")
    parser.add_argument("--trials", type=int, default=30, help="Prompts per test and n.")
    parser.add_argument("--bins", type=int, default=40, help="Distance bins of g(d).")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--chat",
        choices=("auto", "on", "off"),
        default="auto",
        help="Ask in the tokenizer's chat template (auto: when it has one).",
    )
    parser.add_argument("--out", type=Path, default=Path("birth_years"), help="Output folder.")
    args = parser.parse_args(argv)

    adapter = gl.load(args.model, backend=args.backend, device=args.device, dtype=args.dtype)
    chat = has_chat_template(adapter.tokenizer) if args.chat == "auto" else args.chat == "on"
    # In a chat template the answer starts the assistant's turn: names without a space.
    names = single_token_names(adapter.tokenizer, stimuli.first_names(), "" if chat else " ")
    n_max = min(args.n_max, len(names))
    if n_max < 2:
        raise SystemExit(
            f"Only {len(names)} of the shipped first names are single tokens for {args.model}; "
            "the protocol needs at least 2."
        )
    if n_max < args.n_max:
        print(
            f"note: only {len(names)} of the shipped first names are single tokens for "
            f"{args.model}; n goes up to {n_max} instead of {args.n_max}."
        )
    counts = candidate_counts(n_max, args.n_step)
    data = birth_year_prompts(names, counts, args.trials, seed=args.seed)
    if chat:
        data = in_chat_template(data, adapter.tokenizer)
    result = gl.run(
        "similarity",
        adapter,
        data,
        mode="behavioural",
        bins=args.bins,
        batch_size=args.batch_size,
        seed=args.seed,
        progress=True,
    )
    fits = fit_behavioural_profile(result.tables["g_of_d"])
    predicted = luce_prediction(result.tables["g_of_d"], counts, seed=args.seed)
    distances = np.array([r["distance"] for r in result.tables["g_of_d"]])
    verdict = resolution_verdict(result.tables["choice_accuracy"], fits, distances)
    args.out.mkdir(parents=True, exist_ok=True)
    result.to_json(args.out / "birth_years.json")
    summary = {"fits": fits, "luce_prediction": predicted, "verdict": verdict, "chat": chat}
    atomic_write_text(args.out / "birth_years_fits.json", json.dumps(summary, indent=2) + "\n")
    plot(result, fits, predicted, args.out / "birth_years.png", args.model)

    print(f"model {args.model}: {len(data.texts)} prompts, n in {counts}, chat template: {chat}")
    expected = {
        (t, p["n"]): p[f"p_{t}"] for p in predicted for t in ("similarity", "identification")
    }
    for row in result.tables["choice_accuracy"]:
        print(
            f"  {row['test']:>14} n={row['n']:>3}: {row['accuracy']:.3f} "
            f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}], chance {row['chance']:.3f}"
            f"  (Luce rule with the recovered g: {expected[row['test'], row['n']]:.3f})"
        )
    for fit in fits:
        mark = "*" if fit["chosen"] else " "
        print(
            f"  {mark} {fit['family']:>11}: ε = {fit['epsilon']:.1f} years, Δ = {fit['delta']:.3f}"
        )
    print(f"{verdict['text']}. Paper (2-7B models): ~70-80 years.")
    return {"result": result, "fits": fits, "luce_prediction": predicted, "verdict": verdict}


if __name__ == "__main__":
    main()

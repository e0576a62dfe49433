"""Quoted numbers of `sae-features` (README.md, docs/sae.md), read from its result by the metric
names docs/sae.md documents: k both ways (every token, the SSD paper's; content tokens,
sae-lens's), AUROC with its score interval and the two raw-activation baselines', the SAE's quality and its pool."""

from __future__ import annotations

from typing import Any

from _format import finite, fmt, table

ANALYSES = ("sae-features",)

OOD_ORDER = ("random_tokens", "replaced_15pct", "python_source")
LABELS = {
    "random_tokens": "random tokens",
    "replaced_15pct": "15 % of tokens replaced",
    "python_source": "Python source",
}


def _site(result: Any) -> str:
    return next(row["site"] for row in result.tables["ood"])


def _metric(result: Any, name: str) -> Any:
    return result.metrics.get(f"{_site(result)}.{name}")


def _auroc(result: Any, condition: str, way: str = "content") -> str:
    value = _metric(result, f"auroc_{way}.{condition}")
    low = _metric(result, f"auroc_{way}_ci_low.{condition}")
    high = _metric(result, f"auroc_{way}_ci_high.{condition}")
    return f"{fmt(value)} [{fmt(low)}, {fmt(high)}]"


def _baseline(result: Any, condition: str, score: str) -> str:
    value = _metric(result, f"auroc_{score}.{condition}")
    low = _metric(result, f"auroc_{score}_ci_low.{condition}")
    high = _metric(result, f"auroc_{score}_ci_high.{condition}")
    return f"{fmt(value)} [{fmt(low)}, {fmt(high)}]"


def readme(results: dict[str, Any]) -> str:
    """The README's sentence: k on held-out text and each OOD set with its AUROC and interval."""
    result = results["sae-features"]
    m = lambda name: _metric(result, name)  # noqa: E731
    parts = [
        f"{fmt(m(f'mean_k_content.{c}'), 0, integer=True)} on {LABELS.get(c, c)} "
        f"(AUROC {_auroc(result, c)}; activation norm {_baseline(result, c, 'norm')}, "
        f"Mahalanobis {_baseline(result, c, 'mahalanobis')})"
        for c in OOD_ORDER
        if finite(m(f"mean_k_content.{c}"))
    ]
    return (
        f"On MiniLM with the cached SAE ({fmt(m('dictionary_size'), integer=True)} latents at "
        f"`{_site(result)}`; explained variance {fmt(m('explained_variance'))}, L0 "
        f"{fmt(m('l0'), 1)}): mean k {fmt(m('mean_k_content.heldout'), 0, integer=True)} on "
        f"held-out English without [CLS]/[SEP], " + ", ".join(parts) + " (95 % Newcombe "
        "score intervals; every OOD set has the lengths of all the held-out rows, the random "
        "and replaced tokens are compared with the rows they came from, paired); the fixed latent shuffle "
        f"raises the splice fidelity loss from {fmt(m('epsilon_loss'))} to "
        f"{fmt(m('epsilon_loss_shuffled'))}. The pool holds P = {fmt(m('pool_size'), integer=True)}"
        f" of {fmt(m('dictionary_size'), integer=True)} latents"
        + (" (saturated: SSD says nothing here)" if m("pool_saturated") else "")
        + ". MiniLM has no LM head, so the bound itself is reported on causal LMs only."
    )


def docs_table(results: dict[str, Any]) -> str:
    """docs/sae.md's table: per condition, lengths, k both ways, AUROCs with intervals, η̂, ε̂."""
    result = results["sae-features"]
    rows = []
    for row in result.tables["ood"]:
        condition = row["condition"]
        rows.append(
            [
                condition,
                str(row["inputs"]),
                fmt(row.get("median_tokens"), integer=True),
                fmt(row.get("mean_k_all"), 1),
                fmt(row.get("max_k_all"), integer=True),
                fmt(row.get("mean_k_content"), 1),
                fmt(row.get("max_k_content"), integer=True),
                _auroc(result, condition, "all") if "auroc_mean_k" in row else "",
                _auroc(result, condition) if "auroc_mean_k_content" in row else "",
                _baseline(result, condition, "norm") if "auroc_norm" in row else "",
                _baseline(result, condition, "mahalanobis") if "auroc_mahalanobis" in row else "",
                fmt(row.get("eta")) if "eta" in row else "",
                fmt(row.get("epsilon_loss"), 3) if "epsilon_loss" in row else "",
                fmt(row.get("epsilon_loss_shuffled"), 3) if "epsilon_loss" in row else "",
            ]
        )
    header = [
        "condition", "inputs", "median tokens", "k all", "max k all", "k content",
        "max k content", "AUROC all [95 %]", "AUROC content [95 %]", "AUROC norm [95 %]",
        "AUROC Mahalanobis [95 %]", "η̂", "ε̂ (1 − cos)",
        "shuffled",
    ]  # fmt: skip
    m = lambda name: _metric(result, name)  # noqa: E731
    quality = (
        f"SAE quality on held-out content tokens: explained variance "
        f"{fmt(m('explained_variance'))}, L0 {fmt(m('l0'), 1)}, dead latents "
        f"{fmt(m('dead_latents'), integer=True)} of {fmt(m('dictionary_size'), integer=True)}; "
        f"decoder column norms {fmt(m('decoder_norm_min'))}–{fmt(m('decoder_norm_max'))} "
        f"(spread {fmt(m('decoder_norm_spread'))}); pool P = {fmt(m('pool_size'), integer=True)}"
        f", SSD = {fmt(m('ssd'), 0, integer=True)}"
        + (" — saturated (P within 5 % of m)." if m("pool_saturated") else ".")
    )
    return table(header, rows) + "\n\n" + quality


SECTIONS = {"sae-features-readme": readme, "sae-features-table": docs_table}

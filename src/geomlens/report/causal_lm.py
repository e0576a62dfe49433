"""The report's causal-LM section: what the papers claim about language models, measured on a
real one (SmolLM2-135M-Instruct, offline) beside the encoder analyses on MiniLM.

Three claims need what an encoder does not have. Behavioural similarity needs the model's own
choices between options (its next-token logits): it gives g(d) from choices and the measured
(p_S, p_I). The SSD generalisation bound needs an LM head (the risk is a next-token loss), so on
MiniLM it is not reported at all. Linearising a *gated* MLP (SwiGLU, as in the seed's Gemma)
and its cost in LM loss needs a causal LM with one. Representational resolution of years on
the same model places its layers on the (p_S, p_I) front beside its choices.

Why a section of the default report rather than ``--model smollm2-135m-instruct`` alone: the
encoder analyses keep their MiniLM numbers (quoted in the README, comparable across releases,
and cheap: MiniLM has 6 layers of width 384, SmolLM2 30 of 576), and the causal-LM claims get
the model they need, so one default page answers both within the time budget.
``geomlens report --model smollm2-135m-instruct`` still runs every analysis on SmolLM2 alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from geomlens.models.attach import BUNDLED_MINILM_NAMES
from geomlens.results import Result

#: The causal LM of the default report (an embedded model: see geomlens.models.embedded_lms).
DEFAULT_CAUSAL_LM = "smollm2-135m-instruct"
#: Folder of the section's files inside the report folder.
SECTION_FOLDER = "causal-lm"


@dataclass(frozen=True)
class SectionAnalysis:
    """One analysis of the section: its registered name, the options that make it the papers'
    protocol on a causal LM, the claim it measures (one sentence on the page), its data when
    not the analysis's default (``data(adapter)``), and what is measured after it with the
    same model (``after(adapter, result, quick)``: more metrics for its result)."""

    name: str
    options: Callable[[Any], dict[str, Any]]
    claim: str
    data: Callable[[Any, bool], Any] | None = None
    after: Callable[[Any, Result, bool], dict[str, float]] | None = None
    #: Options that replace ``options``' in a quick run (``quick_options(adapter)``).
    quick_options: Callable[[Any], dict[str, Any]] | None = None

    def run_options(self, adapter: Any, quick: bool) -> dict[str, Any]:
        """The options the section runs the analysis with (a quick run's replace some)."""
        options = self.options(adapter)
        if quick and self.quick_options is not None:
            options = {**options, **self.quick_options(adapter)}
        return options


def _spread_layers(adapter: Any, count: int) -> list[str]:
    """``count`` residual sites spread evenly from the first block to the last (a 30-layer
    model's every layer would cost the report minutes of fits and probes for little more)."""
    last = adapter.n_layers - 1
    layers = sorted({round(i * last / (count - 1)) for i in range(count)})
    return [f"blocks.{layer}.hook_resid_post" for layer in layers]


def _output_of_penultimate_and_last(adapter: Any) -> list[str]:
    """Where seed 003 measures a linearised penultimate layer: its output and the last one's."""
    return [
        f"blocks.{adapter.n_layers - 2}.hook_resid_post",
        f"blocks.{adapter.n_layers - 1}.hook_resid_post",
    ]


#: Word pairs per language pair in the section (all 15 pairs of six languages): 15 · 24 · 2 =
#: 720 rows instead of the table's 2,772, each run twice (base and linearised) through a
#: 30-layer model, to keep the default report within its time budget on two CPU cores.
SECTION_WORD_PAIRS = 24
#: Rows each pass of a quick section keeps at most (the encoder's quick passes keep 64): a row
#: through SmolLM2 (30 layers of width 576, a 49,152-token head) costs several MiniLM rows, and
#: ``--quick`` has two minutes for everything on two CPU cores.
QUICK_CAUSAL_LM_ROWS = 32
#: A quick section's language pairs for the linearisation: English with each other language
#: (5 of the 15 pairs).
QUICK_LANGUAGE_PAIRS = ("en-es", "en-fr", "en-de", "en-it", "en-pt")
#: Held-out paragraphs of a quick section's LM-loss cost (the full section's: 16).
QUICK_HELDOUT_PARAGRAPHS = 2


def quick_note(sae_training: dict[str, Any] | None) -> str:
    """What a quick section cut, in words, for the page (``sae_training``: the training
    overrides sae-features ran with; empty when it reused the full report's cached SAE)."""
    from geomlens.data.concepts import BILINGUAL_LANGUAGES

    all_pairs = len(BILINGUAL_LANGUAGES) * (len(BILINGUAL_LANGUAGES) - 1) // 2
    if sae_training:
        tokens = sae_training.get("tokens")
        sae = (
            f"a small quick SAE ({tokens:,} training tokens, cached apart from the full report's)"
            if tokens
            else f"a quick SAE (training {sae_training}, cached apart from the full report's)"
        )
    else:
        sae = "the full report's cached SAE"
    return (
        f"A quick run: each pass of this section kept at most about {QUICK_CAUSAL_LM_ROWS} rows "
        "(whole trials and contexts, every test and condition), the linearisation ran on "
        f"{len(QUICK_LANGUAGE_PAIRS)} of the {all_pairs} language pairs and its LM-loss cost on "
        f"{QUICK_HELDOUT_PARAGRAPHS} held-out paragraphs, and sae-features used {sae}. The "
        "numbers are a first look; `geomlens report` without --quick runs the whole section."
    )


def _bilingual_concepts(adapter: Any, quick: bool) -> Any:
    """Seed 003's concepts: a word's language across translation pairs (shipped)."""
    from geomlens.data.concepts import bilingual_concepts

    pairs = QUICK_LANGUAGE_PAIRS if quick else None
    return bilingual_concepts(pairs, max_word_pairs=SECTION_WORD_PAIRS)


def _heldout_lm_loss(adapter: Any, result: Result, quick: bool) -> dict[str, float]:
    """The linearisation's cost in next-token loss on held-out English paragraphs (the
    analysis's own is on its concept words, one to three tokens each)."""
    from geomlens.experiments.causal_lm import lm_loss_cost

    linearization = result.tables["linearization"][0]
    cost = lm_loss_cost(
        adapter,
        layers=list(linearization["layers"]),
        mode=linearization["mode"],
        texts=None if not quick else _heldout_paragraphs(QUICK_HELDOUT_PARAGRAPHS),
    )
    return {f"heldout.{key}": value for key, value in cost.items()}


def _heldout_paragraphs(count: int) -> list[str]:
    from geomlens.data.corpus import corpus_split

    return corpus_split("heldout", count)


#: The section's analyses, in page order.
CAUSAL_LM_ANALYSES: tuple[SectionAnalysis, ...] = (
    SectionAnalysis(
        "similarity",
        lambda adapter: {"mode": "behavioural"},
        "Behavioural similarity: g(d) and the measured (p_S, p_I) from the model's own choices "
        "between labelled options.",
    ),
    SectionAnalysis(
        "resolution",
        lambda adapter: {"site": _spread_layers(adapter, 6)},
        "Representational resolution of years: ε by layer and each layer's (p_S, p_I) against "
        "the universal front.",
    ),
    SectionAnalysis(
        "sae-features",
        lambda adapter: {},
        "Feature explosion and the SSD generalisation bound from the model's real next-token "
        "logits, in both published forms, with the sample size N* where it stops being vacuous.",
    ),
    SectionAnalysis(
        "linearization-effect",
        lambda adapter: {"mode": "identity", "site": _output_of_penultimate_and_last(adapter)},
        "The gated MLP of the penultimate layer linearised (φ(x) → x) on the bilingual "
        "concepts (a word's language across translation pairs): α and CCGP before and after, "
        "and the cost in next-token loss on held-out English, in nats beside a uniform guess's.",
        data=_bilingual_concepts,
        after=_heldout_lm_loss,
    ),
)


@dataclass
class CausalLMSection:
    """What the section ran: on which model, each analysis's outcome, its provenance; or why it
    could not run (``unavailable``: e.g. the package with the model's GGUF is not installed)."""

    model: str
    outcomes: list[Any] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)
    unavailable: str | None = None
    #: In a quick run, what the section cut (shown on the page); None in a full run.
    quick_note: str | None = None

    @property
    def results(self) -> dict[str, Result]:
        return {o.name: o.result for o in self.outcomes if o.result is not None}

    @property
    def failed(self) -> list[Any]:
        return [o for o in self.outcomes if o.error is not None or o.figure_error]

    def claims(self) -> dict[str, str]:
        return {spec.name: spec.claim for spec in CAUSAL_LM_ANALYSES}


def section_model(model: Any, analyses: Any, causal_lm: str | None) -> str | None:
    """The causal LM the section runs on: ``causal_lm`` when given ("none" turns it off), else
    the default one for the default report only (the bundled MiniLM, no --analysis): a report
    on a model the user named is about that model."""
    if causal_lm is not None:
        return None if causal_lm.lower() == "none" else causal_lm
    default_model = model is None or (isinstance(model, str) and model in BUNDLED_MINILM_NAMES)
    return DEFAULT_CAUSAL_LM if default_model and not analyses else None


__all__ = [
    "CAUSAL_LM_ANALYSES",
    "DEFAULT_CAUSAL_LM",
    "QUICK_CAUSAL_LM_ROWS",
    "SECTION_FOLDER",
    "CausalLMSection",
    "SectionAnalysis",
    "section_model",
]

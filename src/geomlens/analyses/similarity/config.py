"""similarity's options (resolution builds its own on :class:`SimilarityConfig`)."""

from __future__ import annotations

from dataclasses import dataclass

from geomlens.analyses.declaration import AnalysisConfig, option
from geomlens.data.choice_sets import CHOICE_SETS
from geomlens.data.distances import parse_metric

SIMILARITIES = ("centred-cosine", "cosine", "negative-distance")
MODES = ("representational", "behavioural")
#: Up to this many distinct distances, g(d) has one bin per distance; past it, a distance
#: keeps its own bin while it holds 1/MAX_DISTINCT_BINS of the pairs (behavioural: of the
#: options' distances to their probes; see :mod:`~geomlens.analyses.similarity.binning`).
MAX_DISTINCT_BINS = 128


@dataclass
class SimilarityConfig(AnalysisConfig):
    site: str | list[str] | None = option(
        None, "Site(s); default: every blocks.{L}.hook_resid_post (behavioural: 'logits')."
    )
    pooling: str | None = option(
        None,
        "'span' / 'mean' / 'last' / 'first'; default: 'span' when texts mark a [[word]], "
        "else 'mean'.",
    )
    similarity: str = option(
        "centred-cosine",
        "'centred-cosine' (stimulus-set mean subtracted), 'cosine' or 'negative-distance'.",
    )
    metric: str | None = option(
        None,
        "Stimulus metric: 'absolute', 'circular:PERIOD', 'euclidean' (default: the data's "
        "'metric' column, else absolute for numbers and euclidean for coordinate lists).",
    )
    bins: int | None = option(
        None,
        "Distance bins of g(d) (N: N equal-width bins); default: one per distinct distance, "
        f"pooling only distances with under 1/{MAX_DISTINCT_BINS} of the pairs (behavioural: "
        "of the options' distances to their probes).",
    )
    full_matrix: bool = option(False, "Also return the stimulus similarity matrix as a table.")
    mode: str = option(
        "representational",
        "'representational' (pooled activations) or 'behavioural' (option logits of "
        "multiple-choice prompts; needs a model with an LM head).",
    )
    first_token: bool = option(
        False,
        "Behavioural: score an option that is several tokens by its first token (otherwise "
        "such options are refused).",
    )
    choice_set: str = option(
        "years",
        "Behavioural, without data: the shipped choice set, 'years' (1500-2000, options "
        "labelled A, B, ...) or 'months' (month names, single tokens).",
        choices=tuple(CHOICE_SETS),
    )
    chat_template: bool | None = option(
        None,
        "Behavioural, without data: ask in the tokenizer's chat template (default: when it "
        "has one, i.e. for instruct models).",
    )

    def __post_init__(self) -> None:
        if self.similarity not in SIMILARITIES:
            raise ValueError(f"similarity must be one of {SIMILARITIES}; got {self.similarity!r}.")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}; got {self.mode!r}.")
        if self.metric is not None:
            parse_metric(self.metric)
        if self.bins is not None and (not isinstance(self.bins, int) or self.bins < 1):
            raise ValueError(f"bins must be a positive integer or None; got {self.bins!r}.")

"""similarity: a model's similarity function g(d) over a stimulus space (docs/similarity.md).

Representational mode: every row's representation h(x) is pooled at each site (the marked
``[[span]]`` when there is one, else the mean over tokens); rows that share a coordinate are one
stimulus (their mean). The similarity of two stimuli is the cosine of their representations,
the *centred* cosine (the stimulus-set mean subtracted first; the default), or the negative
Euclidean distance. g(d) is the mean similarity of stimulus pairs binned by their distance d
under the stimulus metric, with std and count per bin.

The similarity matrix needs every pair, so the state keeps the pooled [N, d] per site (N rows
of a stimulus set, thousands at most) and builds the matrix in ``finalize``; all sites are
captured in one pass.

Behavioural mode (``mode="behavioural"``, generative models): each row is a multiple-choice
prompt (see :func:`geomlens.data.prompts.choice_prompts`); the next-token logits of the option
tokens, renormalised over the options, give the choice probabilities D_i, from which p_S^n and
p_I^n are measured directly and g is recovered up to scale (see
:mod:`geomlens.analyses.similarity.choices`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from geomlens.analyses.base import Analysis, Batch
from geomlens.analyses.similarity.choices import LOGITS_SITE, ChoiceRecords
from geomlens.analyses.similarity.pooled import PooledRows, StimulusRepresentations
from geomlens.analyses.statistics.duplicates import refuse_duplicates
from geomlens.analyses.words.metric_words import shared_stimulus_range
from geomlens.data.choice_sets import shipped_choice_set
from geomlens.data.distances import Metric, parse_metric
from geomlens.data.stimuli import default_years
from geomlens.formatting import distance_unit, layer_label
from geomlens.hooks.sites import LAST_LOGITS_SITE
from geomlens.models.adapter import Adapter
from geomlens.results import Result

from . import DECLARATION
from .binning import distance_bins
from .config import SimilarityConfig
from .stimulus_range import range_metrics


@dataclass
class SiteSimilarity:
    """One site's stimuli: coordinates, their distance matrix and similarity matrix.

    ``across_texts`` is the similarity at d = 0 across different texts of the same stimulus
    (see :func:`across_texts`); NaN when no stimulus has two or more rows."""

    site: str
    coordinates: np.ndarray
    distances: np.ndarray
    similarity: np.ndarray
    across_texts: AcrossTexts | None = None


class Similarity(Analysis, declaration=DECLARATION):
    """The similarity function g(d) of a model's representations (or choices) over stimuli."""

    config: SimilarityConfig

    def __init__(self, config: SimilarityConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        self.pooled = PooledRows()
        self.choices = ChoiceRecords()
        self.data_metric: str | None = None

    # -- protocol -----------------------------------------------------------------------------
    def sites(self, adapter: Adapter) -> list[str]:
        site = self.config.site
        if site is not None:
            return [site] if isinstance(site, str) else list(site)
        if self.config.mode == "behavioural":
            if LOGITS_SITE not in adapter.sites():
                raise ValueError(
                    f"Behavioural similarity reads the model's output logits (site "
                    f"{LOGITS_SITE!r}), which {adapter.model_id!r} does not offer: it has no LM "
                    "head. Use a causal LM, or mode='representational'."
                )
            # The last real token's logits, made inside the pass: [B, vocab], never [B, T, vocab].
            return [LAST_LOGITS_SITE if adapter.makes_head_sites else LOGITS_SITE]
        defaults = adapter.residual_sites()
        return defaults or adapter.sites()

    def required_columns(self) -> tuple[str, ...]:
        if self.config.mode == "behavioural":
            return ChoiceRecords.REQUIRED_COLUMNS
        return ("coordinate",)

    def default_data(self, adapter: Adapter) -> Any:
        """Every year 1901–2000 in three templates (300 texts); behavioural: the shipped choice
        set the choice-set option names (see docs/similarity.md).

        The texts are :func:`geomlens.data.stimuli.default_years`; the choice sets live in
        :mod:`geomlens.data.choice_sets`."""
        if self.config.mode == "behavioural":
            return shipped_choice_set(
                self.config.choice_set,
                tokenizer=adapter.tokenizer,
                chat=self.config.chat_template,
            )
        return default_years().as_data()

    def update(self, batch: Batch) -> None:
        if "metric" in batch.columns and self.data_metric is None:
            self.data_metric = str(batch.columns["metric"][0])
        if self.config.mode == "behavioural":
            (site,) = self.sites(self._run_context().adapter)
            self.choices.add(
                batch, site, self._run_context().adapter.tokenizer, self.config.first_token
            )
            return
        pooling = self.config.pooling or ("span" if batch.inputs.span_mask is not None else "mean")
        for site in self.sites(self._run_context().adapter):
            self.pooled.add(site, batch.index, batch.pooled(site, pooling))
        self.pooled.add_coordinates(batch.index, batch.columns["coordinate"])

    def merge(self, other: Analysis) -> None:
        self._check_mergeable(other)
        assert isinstance(other, Similarity)
        self.pooled.merge(other.pooled)
        self.choices.merge(other.choices)
        self.data_metric = self.data_metric or other.data_metric

    def finalize(self) -> Result:
        if self.config.mode == "behavioural":
            result = self.choices.finalize(self.name, self.metric(), self.config.bins)
            result.tables["metric"] = self.metric_table()
            return result
        metrics: dict[str, float] = {}
        profile_rows: list[dict[str, Any]] = []
        matrix_rows: list[dict[str, Any]] = []
        for measured in self.site_similarities():
            rows = g_of_d(measured.distances, measured.similarity, self.config.bins)
            profile_rows.extend({"site": measured.site, **row} for row in rows)
            metrics.update(profile_metrics(measured.site, rows, len(measured.coordinates)))
            metrics.update(across_text_metrics(measured))
            metrics.update(range_metrics(measured.site, measured.coordinates))
            if self.config.full_matrix:
                matrix_rows.extend(similarity_table(measured))
        tables = {"g_of_d": profile_rows, "metric": self.metric_table()}
        if self.config.full_matrix:
            tables["similarity_matrix"] = matrix_rows
        return Result(self.name, metrics=metrics, tables=tables)

    # -- shared with resolution ---------------------------------------------------------------
    def metric(self, coordinates: np.ndarray | None = None) -> Metric:
        """The metric in force: the option, else the data's ``metric`` column, else by the
        coordinates' shape (euclidean for lists of numbers, absolute for numbers)."""
        if self.config.metric is not None:
            return self.config.metric
        if self.data_metric is not None:
            return self.data_metric
        return "euclidean" if coordinates is not None and coordinates.ndim == 2 else "absolute"

    def metric_table(self) -> list[dict[str, str]]:
        """Which metric the result used and where it came from (option, data or default)."""
        if self.config.metric is not None:
            source = "option"
        elif self.data_metric is not None:
            source = "data"
        else:
            source = "default"
        coordinates = self.pooled.row_coordinates()[1] if self.pooled else None
        return [{"metric": str(self.metric(coordinates)), "from": source}]

    def site_similarities(self, similarity: str | None = None) -> list[SiteSimilarity]:
        """Per site: the stimuli (rows grouped by coordinate) and their similarity matrix
        (``similarity``: one of :data:`SIMILARITIES`, default the configured one)."""
        how = similarity or self.config.similarity
        if not self.pooled:
            raise ValueError(f"{self.name} saw no data; give stimuli with a 'coordinate' column.")
        measured = []
        for site in self.pooled.sites():
            stimuli = self.pooled.stimuli(site)
            if len(stimuli.coordinates) < 3:
                raise ValueError(
                    f"{self.name} needs at least 3 distinct coordinates; got "
                    f"{len(stimuli.coordinates)}. Give stimuli at several positions."
                )
            # A metric the user chose is kept (a mismatch with the coordinates is reported,
            # not silently replaced); by default lists of numbers are positions (euclidean).
            metric = parse_metric(self.metric(stimuli.coordinates))
            distances = np.round(metric(stimuli.coordinates), 12)
            matrix = similarity_matrix(stimuli.vectors, how)
            if stimuli.row_vectors is not None:  # a copy would be "the same stimulus, another text"
                refuse_duplicates(
                    self.name,
                    site,
                    stimuli.row_vectors,
                    [stimuli.coordinates[stimuli.stimulus_of_row]]
                    if stimuli.stimulus_of_row is not None
                    else [],
                    stimuli.row_index,
                    effect="each copy would count as its stimulus seen in another text, pulling "
                    "g0_across_texts toward 1",
                )
            texts = across_texts(stimuli, how)
            measured.append(SiteSimilarity(site, stimuli.coordinates, distances, matrix, texts))
        return measured

    # -- figure -------------------------------------------------------------------------------
    @classmethod
    def plot(cls, result: Result, **kwargs: Any) -> Any:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        if "choice_accuracy" in result.tables:
            figure, (ax_g, ax_n) = plt.subplots(1, 2, figsize=(11, 4))
            plot_choice_accuracy(ax_n, result.tables["choice_accuracy"])
        else:
            figure, ax_g = plt.subplots(figsize=(6.5, 4))
        plot_profiles(ax_g, result.tables["g_of_d"], unit=distance_unit(result))
        behavioural = (
            result.config.get("mode") == "behavioural" or "choice_accuracy" in result.tables
        )
        # The quantity drawn, named: from choices it is a choice similarity, not a cosine.
        ax_g.set_ylabel(
            "g(d) measured from the model's choices (not a cosine)"
            if behavioural
            else f"g(d), {result.config.get('similarity', 'centred-cosine')} of the representations"
        )
        sites = {r["site"] for r in result.tables["g_of_d"]}
        span = shared_stimulus_range(result, sites)  # the range its g(d) holds for
        over = f" · over {span}" if span else ""
        figure.suptitle(f"similarity · {result.provenance.get('model_id', '')}{over}")
        figure.tight_layout()
        return figure


# ---------------------------------------------------------------------------------------------
# Matrices and profiles (pure functions, shared with resolution)


def similarity_matrix(vectors: np.ndarray, how: str) -> np.ndarray:
    """[S, S] similarity of stimulus representations ``vectors`` [S, d]."""
    if how == "negative-distance":
        # |a - b|^2 = |a|^2 + |b|^2 - 2 a.b: an [S, S] Gram instead of an [S, S, d] difference.
        squared = (vectors**2).sum(axis=1)
        gram = vectors @ vectors.T
        distance2 = np.maximum(squared[:, None] + squared[None, :] - 2 * gram, 0.0)
        np.fill_diagonal(distance2, 0.0)
        return -np.sqrt(distance2)
    if how == "centred-cosine":
        vectors = vectors - vectors.mean(axis=0, keepdims=True)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError(
            "A stimulus has a zero representation (after centring, if asked), so its cosine is "
            "undefined; use similarity='cosine' or more distinct stimuli."
        )
    unit = vectors / norms
    return np.clip(unit @ unit.T, -1.0, 1.0)


@dataclass(frozen=True)
class AcrossTexts:
    """g at d = 0 across texts: the mean similarity of two rows of the same stimulus in
    different texts (the same year in two templates), its std and the number of row pairs."""

    mean: float
    std: float
    pairs: int


def across_texts(stimuli: StimulusRepresentations, how: str) -> AcrossTexts:
    """The similarity of a stimulus with itself in another text, averaged over row pairs.

    The diagonal of the stimulus matrix is 1 by construction (a stimulus with itself, its
    texts averaged); this is the same stimulus seen in a different context, so 1 minus it
    tells how much of g's first drop the text alone makes. Rows are centred with the same
    mean as the stimulus matrix (the mean of the stimulus vectors), so the numbers compare.
    """
    nan = AcrossTexts(float("nan"), float("nan"), 0)
    if stimuli.row_vectors is None or stimuli.stimulus_of_row is None:
        return nan
    owner = stimuli.stimulus_of_row
    rows, cols = np.triu_indices(len(owner), k=1)
    same = owner[rows] == owner[cols]
    if not same.any():
        return nan
    rows, cols = rows[same], cols[same]
    vectors = stimuli.row_vectors
    if how == "negative-distance":
        values = -np.linalg.norm(vectors[rows] - vectors[cols], axis=1)
    else:
        if how == "centred-cosine":
            vectors = vectors - stimuli.vectors.mean(axis=0, keepdims=True)
        norms = np.linalg.norm(vectors, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            values = (vectors[rows] * vectors[cols]).sum(axis=1) / (norms[rows] * norms[cols])
    return AcrossTexts(float(np.mean(values)), float(np.std(values)), int(len(values)))


def across_text_metrics(measured: SiteSimilarity) -> dict[str, float]:
    """``g0_across_texts`` (and its pair count) beside the diagonal's g(0) = 1."""
    texts = measured.across_texts or AcrossTexts(float("nan"), float("nan"), 0)
    return {
        f"{measured.site}.g0_across_texts": texts.mean,
        f"{measured.site}.g0_across_texts_std": texts.std,
        f"{measured.site}.g0_across_texts_pairs": float(texts.pairs),
    }


def binned_pairs(
    distances: np.ndarray, similarity: np.ndarray, edges: np.ndarray, pairs: tuple | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per bin: mean distance, mean and sum of squared deviations of similarity, pair count.

    ``pairs`` (row, column index arrays) default to every pair i < j.
    """
    rows, cols = np.triu_indices_from(distances, k=1) if pairs is None else pairs
    d, s = distances[rows, cols], similarity[rows, cols]
    which = np.digitize(d, edges[1:-1])
    size = len(edges) - 1
    count = np.bincount(which, minlength=size).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_d = np.bincount(which, weights=d, minlength=size) / count
        mean_s = np.bincount(which, weights=s, minlength=size) / count
    squares = np.bincount(which, weights=(s - np.nan_to_num(mean_s)[which]) ** 2, minlength=size)
    return mean_d, mean_s, squares, count


def g_of_d(
    distances: np.ndarray, similarity: np.ndarray, bins: int | None
) -> list[dict[str, float]]:
    """Rows (distance, mean, std, count) of the binned similarity profile, non-empty bins."""
    edges = distance_bins(distances, bins)
    mean_d, mean_s, squares, count = binned_pairs(distances, similarity, edges)
    keep = count > 0
    std = np.sqrt(squares[keep] / count[keep])
    low, high = bin_ranges(distances, edges)
    return [
        {
            "distance": float(d),
            "mean": float(m),
            "std": float(sd),
            "count": int(c),
            "distance_low": float(a),
            "distance_high": float(b),
        }
        for d, m, sd, c, a, b in zip(
            mean_d[keep], mean_s[keep], std, count[keep], low[keep], high[keep]
        )
    ]


def bin_ranges(distances: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The smallest and largest pair distance in each bin (NaN in an empty one): the bins
    used, in the result (a bin of one distinct distance has the two equal)."""
    d = distances[np.triu_indices_from(distances, k=1)]
    which = np.digitize(d, edges[1:-1])
    size = len(edges) - 1
    low, high = np.full(size, np.inf), np.full(size, -np.inf)
    np.minimum.at(low, which, d)
    np.maximum.at(high, which, d)
    empty = np.isinf(low)
    low[empty], high[empty] = np.nan, np.nan
    return low, high


def profile_metrics(site: str, rows: list[dict[str, float]], stimuli: int) -> dict[str, float]:
    """Flat summaries of one site's g(d): nearest and farthest bins, first zero crossing."""
    means = np.array([r["mean"] for r in rows])
    distances = np.array([r["distance"] for r in rows])
    below = np.nonzero(means <= 0)[0]
    return {
        f"{site}.stimuli": float(stimuli),
        f"{site}.g_nearest": float(means[0]),
        f"{site}.g_nearest_pairs": float(rows[0]["count"]),
        f"{site}.g_farthest": float(means[-1]),
        f"{site}.g_farthest_pairs": float(rows[-1]["count"]),
        f"{site}.zero_crossing": float(distances[below[0]]) if len(below) else float("nan"),
    }


def similarity_table(measured: SiteSimilarity) -> list[dict[str, Any]]:
    coordinates = measured.coordinates.tolist()
    size = len(coordinates)
    return [
        {
            "site": measured.site,
            "stimulus_a": coordinates[i],
            "stimulus_b": coordinates[j],
            "distance": float(measured.distances[i, j]),
            "similarity": float(measured.similarity[i, j]),
        }
        for i in range(size)
        for j in range(size)
    ]


#: The shaded band around each g(d) in words: it is the spread of the pairs, not an interval.
BAND_LABEL = "shaded: ±1 SD of the pair similarities at each d (spread, not a confidence interval)"


def plot_profiles(
    ax: Any,
    rows: list[dict[str, Any]],
    normalise: dict[str, float] | None = None,
    unit: str = "",
) -> None:
    """g(d) per site, coloured from first to last layer, with ±1 SD bands (labelled as such);
    ``unit``: the stimuli's coordinate unit, for the distance axis."""
    import matplotlib.pyplot as plt

    sites = list(dict.fromkeys(r["site"] for r in rows))
    colours = plt.cm.viridis(np.linspace(0, 0.9, max(len(sites), 1)))
    for number, (site, colour) in enumerate(zip(sites, colours)):
        mine = [r for r in rows if r["site"] == site]
        scale = (normalise or {}).get(site, 1.0)
        d = np.array([r["distance"] for r in mine])
        m = np.array([r["mean"] for r in mine]) / scale
        sd = np.array([r["std"] for r in mine]) / abs(scale)
        # The site in words (never its hook name): "layer 3", "output logits".
        ax.plot(d, m, "o", ms=2.5, color=colour, label=layer_label(site).split(",")[0])
        # The band labelled once, so any legend drawn later (resolution redraws it) names it.
        band = BAND_LABEL if number == 0 else None
        ax.fill_between(d, m - sd, m + sd, color=colour, alpha=0.08, lw=0, label=band)
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_xlabel(f"stimulus distance d ({unit})" if unit else "stimulus distance d")
    ax.legend(fontsize=6, ncol=2)


def plot_choice_accuracy(ax: Any, rows: list[dict[str, Any]]) -> None:
    """Accuracy of the model's choices against the number of candidates n (whole numbers on
    the axis), with chance 1/n drawn: a point on that line measured nothing."""
    counts = sorted({int(r["n"]) for r in rows})
    for test, marker in (("similarity", "o-"), ("identification", "s-")):
        mine = sorted((r for r in rows if r["test"] == test), key=lambda r: r["n"])
        if mine:
            ax.plot([r["n"] for r in mine], [r["accuracy"] for r in mine], marker, label=test)
    if counts:
        ax.plot(counts, [1.0 / n for n in counts], "k--", lw=0.8, label="chance, 1/n")
        ax.set_xticks(counts)
        ax.set_xlim(counts[0] - 0.5, counts[-1] + 0.5)
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel("candidates offered per trial, n")
    ax.set_ylabel("accuracy of the model's choices (mean D of the right answer)")
    ax.legend(fontsize=7, loc="upper right")

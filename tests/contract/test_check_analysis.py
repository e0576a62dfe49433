"""``geomlens.testing.check_analysis``: the example plugin keeps the analysis contract (every
registered analysis runs the same checks one by one in tests/contract/), and planted breaches
of it (a merge that drops a count, a kept batch tensor, a host read per batch, a plot that reads
what JSON loses or draws nothing, a state that does not round-trip, a finalize that spends the
state, a merge that changes the other instance or takes another config, a merge that raises,
a reading that formats its own numbers or names a hook in prose)
are each caught and named, and a check that raises leaves the others running."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from helpers import planted_readings
from helpers.tiny_models import tiny_gpt2

import geomlens as gl
from geomlens.analyses.base import Analysis, AnalysisConfig, Batch, option
from geomlens.analyses.registry import analysis_class
from geomlens.analyses.words.reading_words import metric_value
from geomlens.results import Result
from geomlens.testing import CHECKS, AnalysisContractError, check_analysis

SITE = "blocks.1.hook_resid_post"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "geomlens-anisotropy" / "src"


@pytest.fixture(scope="module")
def adapter():
    model, tokenizer = tiny_gpt2()
    return gl.attach(model, backend="nnsight", tokenizer=tokenizer)


TEXTS = [row["text"] for row in analysis_class("activation-stats").example.rows()][:16]
#: What check_analysis passes on one backend (cross-backend needs a second one).
ONE_BACKEND = [check.name for check in CHECKS if check.name != "cross-backend"]


def test_the_example_plugin_keeps_the_contract(adapter, monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    spec = importlib.util.find_spec("geomlens_anisotropy")
    assert spec is not None and str(EXAMPLE) in str(spec.origin)
    module = sys.modules.get("geomlens_anisotropy") or importlib.import_module(
        "geomlens_anisotropy"
    )
    assert check_analysis(module.Anisotropy, adapter, TEXTS, site=SITE)


@dataclass
class _SumsConfig(AnalysisConfig):
    pooling: str = option("mean", "How the tokens of a row are pooled.", choices=("mean", "last"))


class _Sums(Analysis):
    """A correct little analysis (mean norm of the pooled rows) to plant faults in."""

    name = "test-check-analysis-sums"
    Config = _SumsConfig

    def __init__(self, config=None, **overrides):
        super().__init__(config, **overrides)
        self.total, self.count = 0.0, 0

    def sites(self, adapter):
        return [SITE]

    def update(self, batch: Batch) -> None:
        pooled = batch.pooled(SITE, self.config.pooling).detach().to(torch.float64)
        self.total = self.total + pooled.norm(dim=-1).sum()  # stays on the device
        self.count += pooled.shape[0]

    def merge(self, other: Analysis) -> None:
        self._check_mergeable(other)
        self.total += other.total
        self.count += other.count

    def finalize(self) -> Result:
        return Result(self.name, metrics={"mean_norm": float(self.total) / self.count})

    @classmethod
    def plot(cls, result: Result, **kwargs):
        from matplotlib.figure import Figure

        figure = Figure()
        figure.subplots().bar(["mean norm"], [result.metrics["mean_norm"]])
        return figure

    @staticmethod
    def reading(result: Result) -> list[str]:
        return [f"The mean norm is {metric_value(result, 'mean_norm')}."]


class _MergeDropsACount(_Sums):
    def merge(self, other: Analysis) -> None:
        self._check_mergeable(other)
        self.total += other.total  # the other half's count is lost


class _KeepsTheBatch(_Sums):
    def update(self, batch: Batch) -> None:
        super().update(batch)
        self.last = batch.activations[SITE]  # holds the model's activations past the batch


class _PlotReadsTheInstance(_Sums):
    def finalize(self) -> Result:
        result = super().finalize()
        result.extra = self.count  # not a field of Result: JSON does not keep it
        return result

    @classmethod
    def plot(cls, result: Result, **kwargs):
        return super().plot(Result(result.analysis, metrics={"mean_norm": result.extra}))


class _StateLosesTheTotal(_Sums):
    def state_dict(self):
        return {"count": self.count}


class _ReadsPerBatch(_Sums):
    def update(self, batch: Batch) -> None:
        super().update(batch)
        self.last_norm = float(self.total)  # a host read in every batch


class _NoFigure(_Sums):
    plot = Analysis.plot


class _BlankFigure(_Sums):
    """Draws a figure with axes and nothing on them: a blank figure is no figure."""

    @classmethod
    def plot(cls, result, **kwargs):
        from matplotlib.figure import Figure

        figure = Figure()
        figure.subplots()
        return figure


class _FinalizeSpendsTheState(_Sums):
    def finalize(self) -> Result:
        result = super().finalize()
        self.count = 0  # the state is spent: a second finalize divides by zero
        return result


class _MergeEmptiesTheOther(_Sums):
    def merge(self, other: Analysis) -> None:
        super().merge(other)
        other.total, other.count = 0.0, 0  # "moves" the other's state instead of reading it


class _MergeWithoutConfigCheck(_Sums):
    def merge(self, other: Analysis) -> None:
        self.total += other.total  # takes any config's state
        self.count += other.count


class _ReadingFormatsItself(_Sums):
    reading = staticmethod(planted_readings.formats_its_own_number)


class _ReadingNamesAHook(_Sums):
    @staticmethod
    def reading(result: Result) -> list[str]:
        return [f"At {SITE} the mean norm is {metric_value(result, 'mean_norm')}."]


def test_a_correct_analysis_passes(adapter):
    assert check_analysis(_Sums, adapter, TEXTS) == ONE_BACKEND


ALSO_BROKEN = {
    "merge": ("two-processes", "merge-three-parts", "merge-empty"),
    "state": ("resume", "two-processes"),
}


@pytest.mark.parametrize(
    ("planted", "check", "detail"),
    [
        (_MergeDropsACount, "merge", "metric mean_norm"),
        (_KeepsTheBatch, "no-batch-tensor-kept", "tensor(s) of a finished batch"),
        (_PlotReadsTheInstance, "plot-from-json", "read back from JSON failed"),
        (_StateLosesTheTotal, "state", "resumed from state_dict"),
        (_ReadsPerBatch, "no-host-read-per-batch", "read tensors back to the host"),
        (_NoFigure, "plot-from-json", "draws no figure"),
        (_BlankFigure, "plot-from-json", "nothing drawn"),
        (_FinalizeSpendsTheState, "finalize-twice", "a second finalize() raised"),
        (_MergeEmptiesTheOther, "merge-leaves-other", "changed the other instance's state"),
        (_MergeWithoutConfigCheck, "merge-checks-config", "another config (pooling='last')"),
        (_ReadingFormatsItself, "reading-through-metrics", "imports number"),
        (_ReadingNamesAHook, "reading-through-metrics", "identifier"),
    ],
    ids=[
        "merge-drops-a-count",
        "keeps-a-batch-tensor",
        "plot-reads-the-instance",
        "state",
        "reads-per-batch",
        "no-figure",
        "blank-figure",
        "finalize-spends-the-state",
        "merge-empties-the-other",
        "merge-without-config-check",
        "reading-formats-itself",
        "reading-names-a-hook",
    ],  # fmt: skip
)
def test_a_planted_breach_is_named(adapter, planted, check, detail):
    with pytest.raises(AnalysisContractError) as caught:
        check_analysis(planted, adapter, TEXTS)
    lines = [line for line in str(caught.value).splitlines() if line.startswith("- ")]
    # Only the planted breach, named by its check (and by the checks built on the same method:
    # two processes gather state_dict and merge, a checkpoint holds state_dict).
    assert lines[0].startswith(f"- {check}:") and detail in lines[0]
    named = {line[2:].split(":")[0] for line in lines}
    assert check in named and named <= {check, *ALSO_BROKEN.get(check, ())}, lines
    assert caught.value.failed == [line[2:].split(":")[0] for line in lines]
    assert set(caught.value.passed) == set(ONE_BACKEND) - named


class _MergeRaises(_Sums):
    def merge(self, other: Analysis) -> None:
        raise RuntimeError("merge is broken")


class _MergeRaisesOnAnEmptyOther(_Sums):
    def merge(self, other: Analysis) -> None:
        self._check_mergeable(other)
        if not other.count:
            raise RuntimeError("nothing to merge")
        super().merge(other)


#: The checks that merge states (two processes merge the ranks' states).
MERGING = ["merge", "merge-three-parts", "merge-empty", "merge-leaves-other",
           "merge-checks-config", "two-processes"]  # fmt: skip


def test_a_merge_that_raises_fails_its_checks_and_the_others_still_run(adapter):
    with pytest.raises(AnalysisContractError) as caught:
        check_analysis(_MergeRaises, adapter, TEXTS)
    message = str(caught.value)
    assert sorted(caught.value.failed) == sorted(MERGING), message
    assert "- merge: raised RuntimeError: merge is broken" in message
    assert "- merge-checks-config:" in message and "RuntimeError" in message
    assert caught.value.passed == [name for name in ONE_BACKEND if name not in MERGING]
    assert f"Passed: {', '.join(caught.value.passed)}." in message


def test_a_merge_that_raises_on_an_empty_other_fails_one_check(adapter):
    with pytest.raises(AnalysisContractError) as caught:
        check_analysis(_MergeRaisesOnAnEmptyOther, adapter, TEXTS)
    assert caught.value.failed == ["merge-empty"]
    assert "merge-empty: raised RuntimeError: nothing to merge" in str(caught.value)
    assert caught.value.passed == [name for name in ONE_BACKEND if name != "merge-empty"]


def test_data_too_small_to_split_is_refused(adapter):
    with pytest.raises(ValueError, match="at least 4 rows"):
        check_analysis(_Sums, adapter, TEXTS[:3])

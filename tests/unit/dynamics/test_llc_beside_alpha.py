"""λ̂(t) beside α(t): ``gl.sweep(["abstraction", "llc"], …)`` on the tiny GPT-2 run puts the
local learning coefficient on the same time axis as α, and its λ̂ at each checkpoint is
devinterp's ``llc`` called here directly on that checkpoint's Hugging Face model, on sequences
this test packs from the tokenizer itself, with the same seed and settings written out. Skipped,
saying so, where devinterp is not installed (CI installs the extra)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

import geomlens as gl
from geomlens.experiments import two_factor_lm

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("devinterp") is None,
    reason='needs devinterp: pip install "geomlens[devinterp]"',
)

#: A short, cheap sampler (the test compares numbers, it does not tune the estimate).
SAMPLER = {
    "chains": 2,
    "draws": 6,
    "burnin_steps": 1,
    "step_size": 3e-4,
    "localization": 50.0,
    "n_beta": 3.0,
    "sgld_batch_size": 4,
    "sequence_length": 8,
    "init_loss_batches": 2,
    "sampler_seed": 11,
}


def reference_sequences(tokenizer, texts: list[str], length: int) -> torch.Tensor:
    """The texts' tokens (the ``[[span]]`` marks taken out), one after the other, cut into
    sequences of ``length``: written here from the tokenizer, not with llc's packing."""
    stream: list[int] = []
    for text in texts:
        stream += tokenizer(text.replace("[[", "").replace("]]", ""))["input_ids"]
    count = len(stream) // length
    return torch.tensor(stream[: count * length]).reshape(count, length)


def test_the_sweeps_llc_is_devinterps_estimate_at_every_checkpoint(tiny_lm_run, tmp_path):
    from datasets import Dataset
    from devinterp.slt.llc import llc
    from transformers import AutoTokenizer, GPT2LMHeadModel

    data = two_factor_lm.concept_data()
    series = gl.series(tiny_lm_run, select="log:4")
    outcome = gl.sweep(["abstraction", "llc"], series, data, progress=False, figures=False,
                       n_bootstrap=0, n_shuffles=0, **SAMPLER)  # fmt: skip
    ours = {r["checkpoint"]: r for r in outcome.rows if r["analysis"] == "llc"}
    assert set(ours) == {c.label for c in series}
    assert {r["site"] for r in ours.values()} == {"summary"}
    alpha_times = {r["time"] for r in outcome.rows if r["metric"] == "alpha"}
    assert {r["time"] for r in ours.values()} == alpha_times  # one time axis
    values = []
    for checkpoint in series:
        folder = tiny_lm_run / checkpoint.label
        model = GPT2LMHeadModel.from_pretrained(folder)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        sequences = reference_sequences(tokenizer, data["text"], SAMPLER["sequence_length"])
        dataset = Dataset.from_dict({"input_ids": sequences.tolist()}).with_format("torch")
        expected = llc(
            model, dataset, {}, lr=3e-4, n_beta=3.0, num_chains=2, num_draws=6,
            num_burnin_steps=1, batch_size=4, num_init_loss_batches=2, localization=50.0,
            init_seed=11, device="cpu", output_path=tmp_path / f"{checkpoint.label}.zarr",
        )  # fmt: skip
        per_chain = np.asarray(expected["llc_per_chain"].values, dtype=float)
        row = ours[checkpoint.label]
        assert row["value"] == pytest.approx(float(per_chain.mean()), rel=1e-6, abs=1e-9)
        measured = outcome.results[checkpoint.label]["llc"]
        assert measured.metrics["summary.llc_std"] == pytest.approx(
            float(per_chain.std()), abs=1e-9
        )
        assert measured.metrics["summary.sequences"] == len(sequences)
        assert row["ci_low"] < row["value"] < row["ci_high"]
        values.append(row["value"])
    assert len(set(values)) == len(values)  # each checkpoint its own estimate
    # α's figure draws λ̂(t) on a right-hand scale of its own time axis.
    from geomlens.dynamics.figures import analysis_figure

    figure = analysis_figure(outcome, "abstraction", {})
    (scale,) = [axis for axis in figure.axes if axis.get_ylabel().startswith("LLC")]
    drawn = dict(zip(*scale.lines[0].get_data()))
    assert drawn == pytest.approx({r["time"]: r["value"] for r in ours.values()})

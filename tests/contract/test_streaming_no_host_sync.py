"""The GPU path: the engine's loop and activation-stats' update never read a device value back
to the host per batch. Checked on PyTorch's ``meta`` device, where tensors have shapes but no
values, so any ``.item()``, ``bool(tensor)``, ``.cpu()`` or boolean-mask selection fails. That
every analysis's own update reads nothing back is the contract's ``no-host-read-per-batch``
check (tests/contract/)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import geomlens as gl
from geomlens.analyses.activation_stats import ActivationStats
from geomlens.engine import stream
from geomlens.models.recorded import RecordedAdapter
from geomlens.stats import StreamingMoments

SITE = "blocks.0.hook_resid_post"


class CountBatches(gl.Analysis):
    """Runs after activation-stats in each batch: a read there stops the run before this."""

    name = "count-batches"

    def __init__(self) -> None:
        super().__init__()
        self.batches = 0

    def sites(self, adapter):
        return [SITE]

    def update(self, batch):
        self.batches += 1

    def merge(self, other):
        self.batches += other.batches

    def finalize(self):
        return gl.Result(self.name, metrics={"batches": float(self.batches)})


def test_the_hot_loop_reads_nothing_back():
    rng = np.random.default_rng(0)
    activations = torch.as_tensor(rng.normal(size=(20, 5, 4)), dtype=torch.float32)
    mask = torch.arange(5) < torch.as_tensor(rng.integers(1, 6, size=20))[:, None]
    adapter = RecordedAdapter({SITE: activations}, attention_mask=mask, device="meta")
    analysis, counter = ActivationStats(), CountBatches()
    try:
        stream([analysis, counter], adapter, gl.Dataset(num_rows=20), batch_size=6, progress=False)
    except RuntimeError as error:  # reads once the loop is over are fine (the NaN check's)
        assert "meta" in str(error)
    assert counter.batches == 4  # every batch ran: nothing was read back inside the loop
    assert analysis.moments[SITE].mean.device.type == "meta"
    with pytest.raises(NotImplementedError):  # the check has teeth: selecting rows must read
        activations.to("meta")[mask.to("meta")]


@pytest.mark.parametrize("select", [False, True], ids=["device-path", "cpu-path"])
def test_masked_moments_equal_selected_rows(select):
    """Both ways of updating (where-masked, as on an accelerator; rows selected, as on a CPU)
    give the statistics of the real rows, with NaN in the padding left out."""
    rng = np.random.default_rng(1)
    values = torch.as_tensor(rng.normal(size=(30, 3)))
    mask = torch.as_tensor(rng.random(30) < 0.6)
    padded = values.clone()
    padded[~mask] = torch.nan  # padding may hold anything: it must never reach a statistic
    masked, selected = StreamingMoments(), StreamingMoments()
    for part in torch.arange(30).split(7):
        masked.update_masked(padded[part], mask[part], select=select)
        selected.update(values[part][mask[part]])
    masked.update_masked(  # no real row at all
        values[:4], torch.zeros(4, dtype=torch.bool), select=select
    )
    assert float(masked.count) == selected.count == int(mask.sum())
    torch.testing.assert_close(masked.mean, values[mask].mean(0), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(
        masked.variance(), values[mask].var(0, correction=0), rtol=1e-12, atol=1e-12
    )
    torch.testing.assert_close(masked.minimum, values[mask].amin(0))
    torch.testing.assert_close(masked.maximum, values[mask].amax(0))
    with pytest.raises(ValueError, match="rows \\[n, d\\] and a mask \\[n\\]"):
        masked.update_masked(values, mask[:3])


def test_pooled_rows_stay_on_the_device_until_finalize():
    """similarity and resolution keep each batch's pooled vectors where they were computed
    (here the meta device, which cannot be read); a real device's rows come back in finalize."""
    from geomlens.analyses.similarity.pooled import PooledRows

    rows = PooledRows()
    rows.add("site", np.arange(3), torch.zeros(3, 4, device="meta"))  # reading would raise
    assert rows.chunks["site"][0][1].device.type == "meta"
    values = torch.arange(12.0).reshape(3, 4)
    real = PooledRows()
    real.add("site", np.array([2, 0, 1]), values)
    real.add_coordinates(np.array([2, 0, 1]), np.array([5.0, 3.0, 4.0]))
    stimuli = real.stimuli("site")
    np.testing.assert_array_equal(stimuli.vectors, values[[1, 2, 0]].double().numpy())


def test_concept_and_sae_states_stay_on_the_device_until_finalize():
    """abstraction's class-mean sums and ccgp's rows, and sae-features' counts, fill on the
    meta device, which cannot be read: a read per batch would raise."""
    from geomlens.analyses.abstraction import Abstraction
    from geomlens.analyses.ccgp import CCGP
    from geomlens.analyses.sae_features.counting import SiteState, count_active
    from geomlens.inputs.content_tokens import TokenSelection

    rng = np.random.default_rng(2)
    activations = torch.as_tensor(rng.normal(size=(24, 5, 4)), dtype=torch.float32)
    mask = torch.arange(5) < torch.as_tensor(rng.integers(1, 6, size=24))[:, None]
    adapter = RecordedAdapter({SITE: activations}, attention_mask=mask, device="meta")
    columns = {"concept": np.arange(24) % 2, "context": np.arange(24) // 6}
    alpha, probe, counter = Abstraction(site=SITE), CCGP(site=SITE), CountBatches()
    try:
        stream([alpha, probe, counter], adapter, gl.Dataset(num_rows=24, columns=columns),
               batch_size=5, progress=False)  # fmt: skip
    except RuntimeError as error:
        assert "meta" in str(error)
    assert counter.batches == 5
    assert alpha.state.sums[SITE].device.type == "meta"
    assert {chunk.device.type for chunk in probe.state.rows[SITE]} == {"meta"}

    state, m = SiteState.empty(7), 7
    latents = torch.zeros(3, 5, m, device="meta")
    real = torch.ones(3, 5, dtype=torch.bool, device="meta")
    selection = TokenSelection(real=real, special=real & False, sink=real & False)
    conditions = np.array(["calibration", "heldout", "noise"])
    count_active(state, latents, selection, conditions, threshold=0.0, pool_top_k=2)
    assert state.first_seen.device.type == "meta"
    assert state.conditions["noise"].pending_latents[0].device.type == "meta"

"""The engine on recorded activations: planted statistics, merging, streaming, errors."""

import gc
import weakref

import numpy as np
import pytest
import torch

import geomlens as gl
from geomlens.analyses.activation_stats import ActivationStats
from geomlens.data.dataset import as_dataset
from geomlens.engine import stream
from geomlens.models.recorded import RecordedAdapter

SITE = "blocks.0.hook_resid_post"


@pytest.fixture
def planted():
    rng = np.random.default_rng(0)
    scales = np.linspace(0.5, 3.0, 6)
    data = rng.normal(loc=2.0, scale=scales, size=(400, 6)).astype(np.float32)
    data[:, 5] = -np.abs(data[:, 5])  # one unit that never fires
    return data


def test_activation_stats_matches_numpy(planted):
    result = gl.run("activation-stats", {SITE: planted}, batch_size=33)
    assert result[f"{SITE}.mean_variance"] == pytest.approx(
        planted.astype(np.float64).var(0).mean(), rel=1e-9
    )
    assert result[f"{SITE}.mean_norm"] == pytest.approx(
        np.linalg.norm(planted.astype(np.float64), axis=1).mean(), rel=1e-9
    )
    assert result[f"{SITE}.dead_fraction"] == pytest.approx(1 / 6)
    means = [row["mean"] for row in result.tables["per_dimension"]]
    np.testing.assert_allclose(means, planted.astype(np.float64).mean(0), rtol=1e-9)
    assert result.provenance["backend"] == "recorded"
    assert result.provenance["versions"]["torch"]


def test_merge_of_disjoint_halves_equals_one_run(planted):
    adapter = RecordedAdapter({SITE: planted})
    dataset = as_dataset(None, num_rows=len(planted))
    whole, first, second = ActivationStats(), ActivationStats(), ActivationStats()
    stream([whole], adapter, dataset, batch_size=50)
    stream([first], adapter, dataset, batch_size=17, rows=np.arange(0, 123))
    stream([second], adapter, dataset, batch_size=64, rows=np.arange(123, 400))
    first.merge(second)
    a, b = whole.finalize(), first.finalize()
    for key in a.metrics:
        assert b.metrics[key] == pytest.approx(a.metrics[key], rel=1e-12)


def test_merge_refuses_other_config(planted):
    with pytest.raises(ValueError, match="same config"):
        ActivationStats(pooling="mean").merge(ActivationStats())


def test_three_dimensional_recordings_respect_the_mask():
    acts = np.zeros((2, 3, 4), dtype=np.float32)
    acts[0, :2] = 1.0
    acts[1, :1] = 3.0
    acts[0, 2] = 100.0  # padding: must be ignored
    mask = np.array([[1, 1, 0], [1, 0, 0]], dtype=bool)
    adapter = gl.attach({SITE: acts}, attention_mask=mask)
    result = gl.run("activation-stats", adapter, pooling="mean")
    assert result[f"{SITE}.mean_norm"] == pytest.approx((2.0 + 6.0) / 2)


def test_engine_keeps_no_activation_of_a_finished_batch(planted):
    refs = []

    class Spy(ActivationStats):
        name = "spy"

        def update(self, batch):
            super().update(batch)
            refs.extend(weakref.ref(t) for t in batch.activations.values())

    adapter = RecordedAdapter({SITE: torch.as_tensor(planted)})
    dataset = as_dataset(None, num_rows=len(planted))
    stream([Spy()], adapter, dataset, batch_size=40)
    gc.collect()
    assert len(refs) == 10
    assert all(r() is None for r in refs)


def test_labels_travel_with_rows(planted):
    seen = []

    class Spy(ActivationStats):
        name = "spy-labels"

        def update(self, batch):
            super().update(batch)
            seen.extend(batch.columns["label"].tolist())

    labels = np.arange(len(planted)) % 7
    gl.run(Spy, {SITE: planted}, {"label": labels}, batch_size=64)
    assert seen == labels.tolist()


def test_missing_columns_and_bad_shapes_are_explained(planted):
    class NeedsLabel(ActivationStats):
        name = "needs-label"

        def required_columns(self):
            return ("concept",)

    with pytest.raises(ValueError, match="needs-label needs \\['concept'\\]"):
        gl.run(NeedsLabel, {SITE: planted})
    with pytest.raises(ValueError, match="one row per example"):
        gl.attach({SITE: planted, "other": planted[:10]})
    with pytest.raises(ValueError, match="float array"):
        gl.attach({SITE: np.zeros(5)})
    with pytest.raises(ValueError, match="400 examples"):
        gl.run("activation-stats", {SITE: planted}, {"label": [1, 2, 3]})
    with pytest.raises(ValueError, match="not options of"):
        gl.run("activation-stats", {SITE: planted}, nonsense=1)
    with pytest.raises(ValueError, match="Unknown site"):
        gl.run("activation-stats", {SITE: planted}, site="blocks.9.hook_resid_post")


def test_fused_run_reads_each_batch_once(planted):
    """Two analyses on two sites: one capture per batch, covering both sites."""
    other_site = "blocks.1.hook_resid_post"
    adapter = RecordedAdapter({SITE: planted, other_site: planted * 2})
    calls = []
    original = adapter.capture

    def counting(inputs, sites):
        calls.append(list(sites))
        return original(inputs, sites)

    adapter.capture = counting

    class Second(ActivationStats):
        name = "second-stats"

    results = gl.run([ActivationStats(site=SITE), Second(site=other_site)], adapter, batch_size=100)
    assert calls == [[SITE, other_site]] * 4
    assert results["second-stats"][f"{other_site}.mean_norm"] == pytest.approx(
        2 * results["activation-stats"][f"{SITE}.mean_norm"]
    )

"""What each analysis of a fused pass cost: measured per analysis, not the pass split evenly."""

from __future__ import annotations

import time

import numpy as np
import pytest

import geomlens as gl
from geomlens.analyses.registry import ANALYSES

SITE = "blocks.0.hook_resid_post"
SLEEP = 0.05
BATCHES = 4


def _planted(name: str, update_sleep: float, finalize_sleep: float):
    class Planted(gl.Analysis):
        """Sleeps a known time in update and finalize."""

        def sites(self, adapter):
            return [SITE]

        def update(self, batch):
            time.sleep(update_sleep)

        def merge(self, other):
            pass

        def finalize(self):
            time.sleep(finalize_sleep)
            return gl.Result(self.name, metrics={"summary.value": 1.0})

    gl.register_analysis(name)(Planted)
    return name


@pytest.fixture
def planted_pair():
    names = [
        _planted("test-cost-slow-update", SLEEP, 0.0),
        _planted("test-cost-slow-end", 0.0, 3 * SLEEP),
    ]
    yield names
    for name in names:
        ANALYSES.remove(name)


def test_each_analysis_reports_its_own_cost(planted_pair):
    slow_update, slow_end = planted_pair
    activations = {SITE: np.zeros((BATCHES * 8, 4), dtype=np.float32)}
    results = gl.run(planted_pair, activations, batch_size=8, progress=False)
    updating, ending = results[slow_update].provenance, results[slow_end].provenance
    # Lower bounds only (a sleep lasts at least its time): the time lands where it was spent.
    assert updating["update_seconds"] >= BATCHES * SLEEP
    assert ending["finalize_seconds"] >= 3 * SLEEP
    assert updating["shared_pass_seconds"] == ending["shared_pass_seconds"]
    for provenance in (updating, ending):
        own = provenance["update_seconds"] + provenance["finalize_seconds"]
        assert provenance["cost_seconds"] >= own
    # An even split of the pass would give the two the same update time; they differ.
    assert updating["update_seconds"] > ending["update_seconds"] + BATCHES * SLEEP / 2


def test_setup_time_is_counted_where_it_was_spent():
    """An analysis that prepares before its first batch (sae-features training its SAE) is
    charged for it: the time is in its setup_seconds and its cost, not lost."""

    class SlowSetup(gl.Analysis):
        """Sleeps a known time in setup."""

        def setup(self, context):
            super().setup(context)
            time.sleep(3 * SLEEP)

        def sites(self, adapter):
            return [SITE]

        def update(self, batch):
            pass

        def merge(self, other):
            pass

        def finalize(self):
            return gl.Result(self.name, metrics={"summary.value": 1.0})

    gl.register_analysis("test-cost-slow-setup")(SlowSetup)
    try:
        activations = {SITE: np.zeros((BATCHES * 8, 4), dtype=np.float32)}
        results = gl.run(["test-cost-slow-setup"], activations, batch_size=8, progress=False)
    finally:
        ANALYSES.remove("test-cost-slow-setup")
    provenance = results["test-cost-slow-setup"].provenance
    assert provenance["setup_seconds"] >= 3 * SLEEP
    assert provenance["cost_seconds"] >= provenance["setup_seconds"]

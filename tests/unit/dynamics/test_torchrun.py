"""`torchrun --nproc-per-node 2 -m geomlens sweep`: the ranks share the checkpoints through
claim files and rank 0 writes the same table as one process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import geomlens as gl
from geomlens.experiments import abstraction_dynamics as experiment


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_two_ranks_give_one_process_table(tmp_path):
    run = tmp_path / "run"
    experiment.train(experiment.AbstractionDynamicsConfig(steps=400, checkpoints="every:20"), run)
    alone = tmp_path / "alone"
    gl.sweep("abstraction", run, out=alone, progress=False, n_bootstrap=0, n_shuffles=0)
    shared = tmp_path / "shared"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
        "--master-port", str(free_port()), "-m", "geomlens", "sweep", "abstraction",
        "--series", str(run), "--out", str(shared),
        "--option", "n_bootstrap=0", "--option", "n_shuffles=0",
    ]  # fmt: skip
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("measured 21 of 21 checkpoints (0 cached)") == 1  # rank 0 reports
    for name in ("trajectory.csv", "trajectory.json"):
        assert (shared / name).read_bytes() == (alone / name).read_bytes()
    ranks = {
        gl.Result.from_json(path).provenance["sweep"]["rank"]
        for path in (shared / "checkpoints").rglob("abstraction.json")
    }
    assert ranks == {0, 1}
    assert not (shared / ".claims").exists()

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


def two_nodes(run, base, split: str) -> list[dict]:
    """Two ranks in one gloo group, each sweeping into its own folder; what each said."""
    import json

    import torch.multiprocessing as mp
    from helpers.sweep_nodes import sweep_on_own_folder

    mp.start_processes(sweep_on_own_folder, args=(2, free_port(), str(run), str(base), split),
                       nprocs=2, start_method="fork")  # fmt: skip
    return [json.loads((base / f"rank-{rank}.json").read_text()) for rank in (0, 1)]


def test_nodes_without_a_shared_folder_measure_each_checkpoint_once(tiny_lm_run, tmp_path):
    from geomlens.experiments import two_factor_lm

    chosen = gl.series(tiny_lm_run, select="log:6")
    alone = tmp_path / "alone"
    gl.sweep("abstraction", chosen, two_factor_lm.concept_data(), out=alone, progress=False,
             figures=False, n_bootstrap=0, n_shuffles=0)  # fmt: skip
    said = two_nodes(tiny_lm_run, tmp_path, "auto")  # auto: the folders differ, so by rank
    first, second = (set(s["measured"]) for s in said)
    assert not first & second and first | second == {c.label for c in chosen}
    assert first and second
    # Rank 0's folder holds the whole sweep (the other node's Results sent to it); the other
    # node's folder holds its own checkpoints only, and both ranks returned the whole table.
    for name in ("trajectory.csv", "trajectory.json"):
        assert (tmp_path / "node-0" / name).read_bytes() == (alone / name).read_bytes()
    kept = {p.parent.name for p in (tmp_path / "node-1" / "checkpoints").rglob("abstraction.json")}
    assert kept == second
    assert said[0]["rows"] == said[1]["rows"] > 0
    assert not (tmp_path / "node-0" / ".claims").exists()
    assert not (tmp_path / "node-1" / ".claims").exists()
    # Rerun on the same nodes: each rank finds its own checkpoints cached in its own folder.
    table = (tmp_path / "node-0" / "trajectory.csv").read_bytes()
    again = two_nodes(tiny_lm_run, tmp_path, "auto")
    assert [a["measured"] for a in again] == [[], []]
    assert (tmp_path / "node-0" / "trajectory.csv").read_bytes() == table


def test_claims_on_folders_the_ranks_do_not_share_are_refused(tiny_lm_run, tmp_path):
    said = two_nodes(tiny_lm_run, tmp_path, "claims")
    for answer in said:
        assert "--split claims needs an --out every rank sees" in answer["error"]
        assert "rank(s) 1" in answer["error"] and "\n" not in answer["error"]
    assert not list((tmp_path / "node-1").rglob("*.json"))


def test_an_unknown_split_is_refused_before_the_series_is_read(tmp_path):
    from typer.testing import CliRunner

    from geomlens.cli import app

    done = CliRunner().invoke(app, ["sweep", "abstraction", "--series", str(tmp_path / "none"),
                                    "--out", str(tmp_path / "out"), "--split", "nodes"])  # fmt: skip
    assert done.exit_code == 2
    assert done.output.strip() == (
        "error: --split must be one of auto, by-rank, claims; got 'nodes'."
    )
    assert not (tmp_path / "out").exists()

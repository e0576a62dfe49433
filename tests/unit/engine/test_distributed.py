"""Data-parallel runs: a 2-process gloo job on CPU gives the single-process result (metrics
within 1e-6, tables equal) for every built-in analysis's example, on sized and streamed data
(the contract's ``two-processes`` check runs any analysis's sized example, tests/contract/)."""

from __future__ import annotations

import socket

import pytest
import torch.multiprocessing as mp
from helpers.distributed_worker import run_recipes
from helpers.tiny_models import tiny_gpt2

import geomlens as gl
from geomlens.analyses.registry import analysis_class, builtin_analyses
from geomlens.engine.distributed import Shard
from geomlens.testing import assert_same_results


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def two_process_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("ranks")
    checkpoint = out / "ckpt"
    # fork: the ranks inherit the imported libraries instead of importing them again (~10 s each)
    mp.start_processes(
        run_recipes, args=(2, free_port(), str(out), str(checkpoint)), nprocs=2, start_method="fork"
    )
    return out


@pytest.fixture(scope="module")
def adapter():
    hf_model, tokenizer = tiny_gpt2()
    return gl.attach(hf_model, backend="nnsight", tokenizer=tokenizer)


STATS = analysis_class("activation-stats").example


@pytest.mark.parametrize("name", builtin_analyses())
def test_two_ranks_equal_one_process(name, two_process_results, adapter):
    recipe = analysis_class(name).example
    expected = gl.run(name, adapter, recipe.rows(), **recipe.run_options())
    for kind in ("sized", "streamed"):
        got = gl.Result.from_json(two_process_results / f"{name}.{kind}.json")
        assert_same_results(got, expected, tolerance=1e-6)
        assert got.provenance["world_size"] == 2
        assert got.provenance["num_examples"] == len(recipe.rows())


def test_each_rank_checkpoints_its_own_shard(two_process_results, adapter):
    files = sorted(p.name for p in (two_process_results / "ckpt").iterdir())
    assert files == ["state-rank0-of-2.pt", "state-rank1-of-2.pt"]
    expected = gl.run("activation-stats", adapter, STATS.rows(), batch_size=3)
    got = gl.Result.from_json(two_process_results / "checkpointed.json")
    assert_same_results(got, expected)
    # One process cannot resume a 2-rank checkpoint: it would skip the other rank's rows.
    with pytest.raises(ValueError, match="another number of ranks"):
        gl.run("activation-stats", adapter, STATS.rows(), batch_size=3,
               checkpoint=two_process_results / "ckpt")  # fmt: skip


def test_two_ranks_resume_an_interrupted_stream(two_process_results, adapter):
    expected = gl.run("activation-stats", adapter, STATS.rows(), batch_size=3)
    got = gl.Result.from_json(two_process_results / "resumed.json")
    assert_same_results(got, expected)
    files = sorted(p.name for p in (two_process_results / "interrupted").iterdir())
    assert files == ["state-rank0-of-2.pt", "state-rank1-of-2.pt"]


@pytest.mark.parametrize("batches", [0, 1, 2, 5, 7])
def test_blocks_split_batches_disjointly_in_order(batches):
    for world in (1, 2, 3, 4):
        blocks = [Shard(rank, world).block(batches) for rank in range(world)]
        assert [b for block in blocks for b in block] == list(range(batches))
        assert max(map(len, blocks)) - min(map(len, blocks)) <= 1
        dealt = [
            [b for b in range(batches) if Shard(r, world).owns_streamed(b)] for r in range(world)
        ]
        assert sorted(b for d in dealt for b in d) == list(range(batches))


def test_distributed_true_outside_a_group_is_explained(adapter):
    with pytest.raises(ValueError, match="initialised torch.distributed process group"):
        gl.run("activation-stats", adapter, ["the cat"], distributed=True)


def test_torchrun_cli_equals_one_process(tmp_path, adapter):
    """``torchrun --nproc-per-node 2 -m geomlens run`` on a streamed .jsonl file, with a
    checkpoint: rank 0 writes the single-process result, rank 1 writes nothing."""
    import json
    import os
    import subprocess
    import sys

    from geomlens.data.streaming import stream_file

    hf_model, tokenizer = tiny_gpt2()
    hf_model.save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    rows = STATS.rows()
    data = tmp_path / "rows.jsonl"
    data.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
    out = tmp_path / "out" / "result.json"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
        "--master-port", str(free_port()), "-m", "geomlens", "run", "activation-stats",
        "--model", str(tmp_path / "tiny"), "--data", str(data), "--batch-size", "4",
        "--out", str(out), "--checkpoint", str(tmp_path / "ckpt"), "--checkpoint-every", "1",
    ]  # fmt: skip
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in out.parent.iterdir()) == ["result.json"]
    expected = gl.run(
        "activation-stats", gl.load(tmp_path / "tiny"), stream_file(data), batch_size=4
    )
    got = gl.Result.from_json(out)
    assert_same_results(got, expected)
    assert got.provenance["world_size"] == 2
    assert len(list((tmp_path / "ckpt").iterdir())) == 2


def test_device_map_and_max_memory_pass_through_to_loading(tmp_path):
    hf_model, tokenizer = tiny_gpt2()
    hf_model.save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    rows = STATS.rows()
    expected = gl.run("activation-stats", gl.load(tmp_path / "tiny"), rows, batch_size=4)
    placed = gl.load(tmp_path / "tiny", device_map="cpu", max_memory={"cpu": "1GiB"})
    assert_same_results(gl.run("activation-stats", placed, rows, batch_size=4), expected)
    # The limits reach accelerate: with no room in memory, the weights are offloaded to disk.
    starved = gl.load(tmp_path / "tiny", device_map="auto", max_memory={"cpu": "1KiB"})
    assert any(p.device.type == "meta" for p in starved.model.parameters())
    with pytest.raises(ValueError, match="nnsight backend only"):
        gl.load(tmp_path / "tiny", backend="transformer-lens", device_map="auto")
    with pytest.raises(ValueError, match="either device or device_map"):
        gl.load(tmp_path / "tiny", device="cpu", device_map="auto")
    with pytest.raises(ValueError, match="max_memory needs a device_map"):
        gl.load(tmp_path / "tiny", max_memory={"cpu": "1GiB"})

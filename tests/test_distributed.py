"""Data-parallel runs: a 2-process gloo job on CPU gives the single-process result (metrics
within 1e-6, tables equal) for every built-in analysis, on sized and streamed data."""

from __future__ import annotations

import socket

import pytest
import torch.multiprocessing as mp
from helpers.distributed_worker import run_recipes
from helpers.recipes import RECIPES, assert_same_results
from helpers.tiny_models import tiny_gpt2

import geomlens as gl
from geomlens.distributed import Shard


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


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_two_ranks_equal_one_process(name, two_process_results, adapter):
    recipe = RECIPES[name]
    expected = gl.run(name, adapter, recipe.rows(), batch_size=recipe.batch_size, **recipe.options)
    for kind in ("sized", "streamed"):
        got = gl.Result.from_json(two_process_results / f"{name}.{kind}.json")
        assert_same_results(got, expected, tolerance=1e-6)
        assert got.provenance["world_size"] == 2
        assert got.provenance["num_examples"] == len(recipe.rows())


def test_each_rank_checkpoints_its_own_shard(two_process_results, adapter):
    files = sorted(p.name for p in (two_process_results / "ckpt").iterdir())
    assert files == ["state-rank0-of-2.pt", "state-rank1-of-2.pt"]
    expected = gl.run("activation-stats", adapter, RECIPES["activation-stats"].rows(), batch_size=3)
    got = gl.Result.from_json(two_process_results / "checkpointed.json")
    assert_same_results(got, expected)
    # One process cannot resume a 2-rank checkpoint: it would skip the other rank's rows.
    with pytest.raises(ValueError, match="another number of ranks"):
        gl.run("activation-stats", adapter, RECIPES["activation-stats"].rows(), batch_size=3,
               checkpoint=two_process_results / "ckpt")  # fmt: skip


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

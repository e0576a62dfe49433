"""The body of one rank of the 2-process gloo tests (importable, as torch spawn requires)."""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path

import torch
import torch.distributed as dist


class Interrupted(RuntimeError):
    pass


def failing(rows: list, at: int):
    for number, row in enumerate(rows):
        if number == at:
            raise Interrupted(f"stopped at row {number}")
        yield row


def run_recipes(rank: int, world_size: int, port: int, out: str, checkpoint: str) -> None:
    """Run every recipe on sized and streamed rows in a gloo group; rank 0 writes the results."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # two ranks on a shared CPU
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        from helpers.tiny_models import tiny_gpt2

        import geomlens as gl
        from geomlens.analyses.registry import analysis_class, builtin_analyses, declaration

        hf_model, tokenizer = tiny_gpt2()
        adapter = gl.attach(hf_model, backend="nnsight", tokenizer=tokenizer)
        for name in builtin_analyses():
            if declaration(name).missing():  # its optional extra is not installed here
                continue
            recipe = analysis_class(name).example
            rows = recipe.rows()
            options = recipe.run_options()
            sized = gl.run(name, adapter, rows, **options)
            streamed = gl.run(name, adapter, (row for row in rows), **options)
            if rank == 0:
                sized.to_json(Path(out) / f"{name}.sized.json")
                streamed.to_json(Path(out) / f"{name}.streamed.json")
            else:  # every rank returns rank 0's results
                # NaN-aware: an undefined metric (NaN) is the same NaN after the round trip.
                again = gl.Result.from_json(sized.to_json()).metrics
                assert set(again) == set(sized.metrics)
                assert all(
                    again[k] == v or (math.isnan(v) and math.isnan(again[k]))
                    for k, v in sized.metrics.items()
                )
        checked = gl.run("activation-stats", adapter, analysis_class("activation-stats").example.rows(),
                         batch_size=3, checkpoint=checkpoint, checkpoint_every=1)  # fmt: skip
        if rank == 0:
            checked.to_json(Path(out) / "checkpointed.json")
        # Interrupted mid-stream on both ranks (each reads the whole source), then resumed.
        rows = analysis_class("activation-stats").example.rows()
        resumable = Path(checkpoint).with_name("interrupted")
        with contextlib.suppress(Interrupted):
            gl.run("activation-stats", adapter, failing(rows, 13), batch_size=3,
                   checkpoint=resumable, checkpoint_every=1)  # fmt: skip
        resumed = gl.run("activation-stats", adapter, iter(rows), batch_size=3,
                         checkpoint=resumable, checkpoint_every=1)  # fmt: skip
        if rank == 0:
            resumed.to_json(Path(out) / "resumed.json")
    finally:
        dist.destroy_process_group()

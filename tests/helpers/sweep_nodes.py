"""A rank of a two-node sweep without a shared filesystem: each process sweeps into its own
folder (``BASE/node-<rank>``, as each node's local disk would be) in one gloo group, and
writes what it measured and the rows it returned beside the folders."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch.distributed as dist


def sweep_on_own_folder(rank: int, world: int, port: int, run: str, base: str, split: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # two ranks on a shared CPU
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        import geomlens as gl
        from geomlens.experiments import two_factor_lm

        answer: dict = {}
        try:
            outcome = gl.sweep(
                "abstraction", gl.series(run, select="log:6"), two_factor_lm.concept_data(),
                out=Path(base) / f"node-{rank}", progress=False, figures=False, split=split,
                n_bootstrap=0, n_shuffles=0,
            )  # fmt: skip
            answer = {"measured": [label for label, _ in outcome.measured],
                      "rows": len(outcome.rows)}  # fmt: skip
        except ValueError as error:
            answer = {"error": str(error)}
        (Path(base) / f"rank-{rank}.json").write_text(json.dumps(answer))
    finally:
        dist.destroy_process_group()

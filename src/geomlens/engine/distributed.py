"""Data-parallel runs on torch.distributed: disjoint shards per rank, states folded on rank 0.

Inside an initialised process group (``torchrun --nproc-per-node K -m geomlens run …``, or a
user's own ``init_process_group``) ``gl.run`` gives each rank a disjoint shard of the batches,
each rank updates its own analyses, the states are gathered to rank 0 and folded with each
analysis's ``merge`` in rank order, rank 0 finalises, and every rank returns the same results.

Batches are formed exactly as in one process (rows ``[b·B, (b+1)·B)`` make batch ``b``), so
padding and batch composition never depend on the number of ranks. Sized data gives each rank
one contiguous block of batches, so folding in rank order sees the rows in their original
order; streamed data of unknown length deals batches round-robin (every rank reads the source
and keeps batch ``b`` when ``b % K`` is its rank).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Shard:
    """Which batches this process runs: rank ``rank`` of ``world_size``."""

    rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def block(self, num_batches: int) -> range:
        """This rank's contiguous block of ``num_batches`` sized batches (sizes differ by ≤ 1)."""
        base, extra = divmod(num_batches, self.world_size)
        start = self.rank * base + min(self.rank, extra)
        return range(start, start + base + (1 if self.rank < extra else 0))

    def owns_streamed(self, batch_number: int) -> bool:
        """Whether streamed batch ``batch_number`` is this rank's (round-robin)."""
        return batch_number % self.world_size == self.rank


#: The shard of a run outside any process group: every batch.
SINGLE_PROCESS = Shard()


def current_shard() -> Shard:
    """This process's shard: its rank in an initialised process group, else the whole data."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return Shard(dist.get_rank(), dist.get_world_size())
    return SINGLE_PROCESS


def init_from_environment() -> Shard:
    """Join the process group ``torchrun`` describes in the environment (``WORLD_SIZE``,
    ``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR``): nccl when CUDA is available, gloo otherwise.
    Outside torchrun, or when a group is already initialised, nothing is started."""
    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
            dist.init_process_group("nccl")
        else:
            dist.init_process_group("gloo")
    return current_shard()


def local_device(device: str | None) -> str | None:
    """Under torchrun, ``cuda`` means this process's own GPU (``cuda:LOCAL_RANK``)."""
    if device == "cuda" and "LOCAL_RANK" in os.environ:
        return f"cuda:{int(os.environ['LOCAL_RANK'])}"
    return device


def to_bytes(obj: Any) -> bytes:
    """Serialise analysis states (tensors on any device included) for sending or saving."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def from_bytes(data: bytes, device: torch.device | str) -> Any:
    """Inverse of :func:`to_bytes`, with every tensor moved to ``device``."""
    return torch.load(io.BytesIO(data), map_location=device, weights_only=False)


def gather_to_main(obj: Any, shard: Shard, device: torch.device | str) -> list[Any] | None:
    """Every rank's ``obj`` on rank 0 (in rank order); None on the other ranks.

    Objects travel as ``torch.save`` bytes so that a rank's CUDA tensors arrive on rank 0's
    device; this is the only synchronisation of the run besides the final broadcast.
    """
    import torch.distributed as dist

    if shard.world_size == 1:
        return [obj]
    received: list[bytes] | None = [b""] * shard.world_size if shard.is_main else None
    dist.gather_object(to_bytes(obj), received, dst=0)
    if received is None:
        return None
    return [from_bytes(data, device) for data in received]


def broadcast_from_main(obj: Any, shard: Shard) -> Any:
    """Rank 0's ``obj`` on every rank."""
    import torch.distributed as dist

    if shard.world_size == 1:
        return obj
    holder = [obj if shard.is_main else None]
    dist.broadcast_object_list(holder, src=0)
    return holder[0]

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

import os
from dataclasses import dataclass
from typing import Any

import torch

from geomlens.plain_state import from_bytes, to_bytes


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


def _wire_device() -> torch.device:
    """Where the process group's collectives take tensors: this rank's GPU for nccl."""
    import torch.distributed as dist

    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _as_tensor(data: bytes, length: int, device: torch.device) -> torch.Tensor:
    padded = bytearray(data) + bytes(length - len(data))
    return (
        torch.frombuffer(padded, dtype=torch.uint8).to(device)
        if length
        else torch.zeros(0, dtype=torch.uint8, device=device)
    )


def gather_to_main(obj: Any, shard: Shard, device: torch.device | str) -> list[Any] | None:
    """Every rank's ``obj`` on rank 0 (in rank order); None on the other ranks.

    Objects travel as plain-state bytes (:mod:`geomlens.plain_state`: tensors and plain data,
    read with ``weights_only=True``, never an arbitrary pickle) in uint8 tensors, so that a
    rank's CUDA tensors arrive on rank 0's device; this is the only synchronisation of the run
    besides the final broadcast.
    """
    import torch.distributed as dist

    if shard.world_size == 1:
        return [obj]
    wire = _wire_device()
    data = to_bytes(obj)
    sizes = [torch.zeros((), dtype=torch.long, device=wire) for _ in range(shard.world_size)]
    dist.all_gather(sizes, torch.tensor(len(data), dtype=torch.long, device=wire))
    longest = max(int(size) for size in sizes)
    mine = _as_tensor(data, longest, wire)
    received = (
        [torch.empty(longest, dtype=torch.uint8, device=wire) for _ in sizes]
        if shard.is_main
        else None
    )
    dist.gather(mine, received, dst=0)
    if received is None:
        return None
    return [
        from_bytes(tensor[: int(size)].cpu().numpy().tobytes(), device, f"rank {rank}'s state")
        for rank, (tensor, size) in enumerate(zip(received, sizes))
    ]


def broadcast_from_main(obj: Any, shard: Shard) -> Any:
    """Rank 0's ``obj`` on every rank (as plain-state bytes, like :func:`gather_to_main`)."""
    import torch.distributed as dist

    if shard.world_size == 1:
        return obj
    wire = _wire_device()
    data = to_bytes(obj) if shard.is_main else b""
    size = torch.tensor(len(data), dtype=torch.long, device=wire)
    dist.broadcast(size, src=0)
    payload = (
        _as_tensor(data, int(size), wire)
        if shard.is_main
        else torch.empty(int(size), dtype=torch.uint8, device=wire)
    )
    dist.broadcast(payload, src=0)
    if shard.is_main:
        return obj
    return from_bytes(payload.cpu().numpy().tobytes(), "cpu", "rank 0's results")

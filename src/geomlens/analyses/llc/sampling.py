"""The data as devinterp samples them, and one call of devinterp's estimator.

The rows' real tokens, in row order, are cut into sequences of one length (devinterp's loss is
the next-token cross-entropy of every position of a full sequence: no padding, no mask). The
sampler runs on a copy of the model, so the user's weights, hooks and train/eval modes are never
touched; the global random generators (torch's, NumPy's, Python's), which devinterp seeds, are
restored after it.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import math
import random
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .config import LLCConfig


@dataclass(frozen=True)
class Estimate:
    """What devinterp's estimator gave: λ̂ per chain, the loss at the origin, and each chain's
    mean loss per SGLD step."""

    per_chain: list[float]
    init_loss: float
    loss_trace: list[list[float]]
    n_beta: float


def pack(rows: Sequence[torch.Tensor], length: int) -> torch.Tensor:
    """``[n, length]``: the tokens of ``rows`` (each the real tokens of one row, in row order)
    one after the other, cut into sequences of ``length`` tokens (the remainder is dropped)."""
    stream = torch.cat([r.reshape(-1).to("cpu", torch.long) for r in rows]) if rows else None
    count = 0 if stream is None else stream.numel() // length
    if stream is None or count == 0:
        return torch.empty(0, length, dtype=torch.long)
    return stream[: count * length].reshape(count, length)


def default_n_beta(batch_size: int) -> float:
    """devinterp's usual inverse temperature for a batch of ``batch_size``: B / ln B."""
    return batch_size / math.log(batch_size)


def sampler_arguments(config: LLCConfig, seed: int, device: str) -> dict[str, Any]:
    """The keyword arguments of ``devinterp.slt.llc.llc`` for ``config`` (a test calling
    devinterp itself passes the same)."""
    n_beta = config.n_beta if config.n_beta is not None else default_n_beta(config.sgld_batch_size)
    return {
        "lr": config.step_size,
        "n_beta": n_beta,
        "num_chains": config.chains,
        "num_draws": config.draws,
        "num_burnin_steps": config.burnin_steps,
        "batch_size": config.sgld_batch_size,
        "num_init_loss_batches": config.init_loss_batches,
        "localization": config.localization,
        "init_seed": seed,
        "device": device,
    }


def as_dataset(sequences: torch.Tensor) -> Any:
    """The sequences as the Hugging Face dataset devinterp reads (an ``input_ids`` column)."""
    from datasets import Dataset

    return Dataset.from_dict({"input_ids": sequences.tolist()}).with_format("torch")


def estimate(model: torch.nn.Module, sequences: torch.Tensor, config: LLCConfig, seed: int,
             device: str, show: bool) -> Estimate:  # fmt: skip
    """devinterp's SGLD sampler and LLC estimate (``devinterp.slt.llc.llc``) on a copy of
    ``model``; a chain that diverged is an error naming the options that tame it."""
    from devinterp.slt.llc import llc

    arguments = sampler_arguments(config, seed, device)
    work = copy.deepcopy(model)  # devinterp reads the loss at the origin on the model it is given
    work.requires_grad_(True)
    with contextlib.ExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="geomlens-llc-"))
        stack.enter_context(_global_generators_kept(device))
        stack.enter_context(torch.inference_mode(False))
        stack.enter_context(torch.enable_grad())
        stack.enter_context(_chain_bars(show))
        caught = stack.enter_context(warnings.catch_warnings(record=True))
        warnings.simplefilter("always")
        summary = llc(work, as_dataset(sequences), {}, output_path=Path(folder) / "samples.zarr",
                      **arguments)  # fmt: skip
        # Read now: the arrays are read lazily from the folder, removed on leaving.
        found = Estimate(
            per_chain=[float(v) for v in np.asarray(summary["llc_per_chain"].values)],
            init_loss=float(np.asarray(summary["init_loss"].values)),
            loss_trace=np.asarray(summary["loss_trace"].values, dtype=float).tolist(),
            n_beta=float(arguments["n_beta"]),
        )
    del work
    failed = [str(w.message) for w in caught if str(w.message).startswith("Chain failed")]
    for other in caught:
        if not str(other.message).startswith("Chain failed"):
            warnings.warn_explicit(other.message, other.category, other.filename, other.lineno)
    if failed:
        raise ValueError(
            f"llc: {len(failed)} of {config.chains} SGLD chains diverged ({failed[0]}); lower "
            f"step_size (now {config.step_size:g}) or raise localization (now "
            f"{config.localization:g})."
        )
    return found


@contextlib.contextmanager
def _global_generators_kept(device: str) -> Iterator[None]:
    """devinterp seeds torch's, NumPy's and Python's global generators: put them back after."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    devices = [torch.device(device)] if torch.device(device).type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            np.random.set_state(numpy_state)
            random.setstate(python_state)


@contextlib.contextmanager
def _chain_bars(show: bool) -> Iterator[None]:
    """devinterp draws a progress bar per chain: shown only when the run shows progress (a
    sweep's checkpoints bar is not broken by one per chain per checkpoint)."""
    from devinterp.slt import sampler

    original = sampler.trange
    sampler.trange = functools.partial(original, disable=not show, leave=False)
    try:
        yield
    finally:
        sampler.trange = original

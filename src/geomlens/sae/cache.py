"""Where trained SAEs are kept: one folder per (model, site, corpus, training config).

The cache lives under the user's cache directory (``~/.cache/geomlens/sae`` on Linux) unless
the environment variable ``GEOMLENS_SAE_CACHE`` names another folder. A folder appears whole or
not at all: it is written under a temporary name and renamed into place, so an interrupted
training never leaves a half-written SAE that a later run would reuse.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import platformdirs

#: Environment variable that overrides the cache folder.
CACHE_ENV = "GEOMLENS_SAE_CACHE"


def sae_cache_dir(override: str | Path | None = None) -> Path:
    """The folder trained SAEs are cached in: ``override``, else ``$GEOMLENS_SAE_CACHE``, else
    the user's cache directory."""
    if override is not None:
        return Path(override).expanduser()
    from_env = os.environ.get(CACHE_ENV)
    if from_env:
        return Path(from_env).expanduser()
    return Path(platformdirs.user_cache_dir("geomlens")) / "sae"


def cache_key(key: dict[str, Any]) -> str:
    """A short stable hash of ``key`` (JSON with sorted keys)."""
    text = json.dumps(key, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def cache_entry(key: dict[str, Any], cache_dir: str | Path | None = None) -> Path:
    """The folder for ``key``: readable model and site names, then the hash of everything."""
    readable = "__".join(
        re.sub(r"[^A-Za-z0-9._-]+", "-", str(key.get(part, "")))[-48:] for part in ("model", "site")
    )
    return sae_cache_dir(cache_dir) / f"{readable}__{cache_key(key)}"


def publish_folder(folder: Path, write: Callable[[Path], None]) -> None:
    """Create ``folder`` atomically: ``write`` fills a staging folder beside it, which is then
    renamed into place. If another process published it first, theirs is kept."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        write(staging)
        try:
            staging.rename(folder)
        except OSError:
            if not folder.is_dir():
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)

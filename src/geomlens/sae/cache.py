"""Where trained SAEs are kept: one folder per (model weights, site, corpus, training config).

The cache lives under the user's cache directory (``~/.cache/geomlens/sae`` on Linux) unless
the environment variable ``GEOMLENS_SAE_CACHE`` names another folder. A folder appears whole or
not at all: it is written under a temporary name and renamed into place, so an interrupted
training never leaves a half-written SAE that a later run would reuse, and a folder once
published is never written again (a concurrent run keeps the first one).

Each entry records the key it was made for (:data:`KEY_FILE`); a reuse checks it, so an entry
is never trusted by its folder name alone, and a damaged entry (its key or its SAE unreadable,
or made for another key) is refused with its path.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import platformdirs

#: Environment variable that overrides the cache folder.
CACHE_ENV = "GEOMLENS_SAE_CACHE"

#: The key an entry was made for, written inside it (JSON).
KEY_FILE = "geomlens_cache_key.json"


class DamagedCacheEntryError(ValueError):
    """A cache entry that cannot be trusted: unreadable, or made for another key."""


def sae_cache_dir(override: str | Path | None = None) -> Path:
    """The folder trained SAEs are cached in: ``override``, else ``$GEOMLENS_SAE_CACHE``, else
    the user's cache directory."""
    from_env = os.environ.get(CACHE_ENV)
    if override is not None:
        folder, named = Path(override).expanduser(), f"The SAE cache {override}"
    elif from_env:
        folder, named = Path(from_env).expanduser(), f"The SAE cache ${CACHE_ENV} ({from_env})"
    else:
        folder = Path(platformdirs.user_cache_dir("geomlens")) / "sae"
        named = f"The SAE cache {folder}"
    if folder.exists() and not folder.is_dir():
        raise OSError(
            f"{named} is a file, not a folder; point it at a folder (it is made if missing) "
            "or move the file away."
        )
    return folder


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


def _plain_key(key: dict[str, Any]) -> Any:
    return json.loads(json.dumps(key, sort_keys=True, default=str))


def check_entry(folder: Path, key: dict[str, Any]) -> None:
    """Refuse ``folder`` unless it records exactly ``key`` (see the module docstring)."""
    advice = "delete the folder to train the SAE again"
    try:
        recorded = json.loads((folder / KEY_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DamagedCacheEntryError(
            f"The cached SAE {folder} records no key ({KEY_FILE} is missing: an older geomlens "
            f"or a damaged entry), so it cannot be trusted; {advice}."
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DamagedCacheEntryError(
            f"The cached SAE {folder} is damaged: its {KEY_FILE} cannot be read ({error}); "
            f"{advice}."
        ) from None
    if recorded != _plain_key(key):
        differences = sorted(
            name
            for name in set(recorded if isinstance(recorded, dict) else {}) | set(key)
            if not isinstance(recorded, dict) or recorded.get(name) != _plain_key(key).get(name)
        )
        raise DamagedCacheEntryError(
            f"The cached SAE {folder} was made for another key (differs in "
            f"{', '.join(differences) or 'its form'}) than the one its folder name stands for; "
            f"{advice}."
        )


#: This machine's name in a staging folder's name (a shared cache may serve several machines).
_HOST = re.sub(r"[^A-Za-z0-9-]+", "-", socket.gethostname())[:40] or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def remove_stale_staging(folder: Path) -> list[Path]:
    """Remove the staging folders of ``folder`` that a killed run left: those this machine
    made (their name holds its host name and the process id) whose process is gone. Another
    process's staging, still running or on another machine, is left alone."""
    removed = []
    for staging in folder.parent.glob(f".{folder.name}.{_HOST}.*"):
        parts = staging.name[len(folder.name) + 2 :].split(".")
        if len(parts) < 3 or not parts[1].isdigit() or staging.is_symlink() or not staging.is_dir():
            continue
        if int(parts[1]) != os.getpid() and not _alive(int(parts[1])):
            shutil.rmtree(staging, ignore_errors=True)
            removed.append(staging)
    return removed


def publish_folder(
    folder: Path, write: Callable[[Path], None], key: dict[str, Any] | None = None
) -> None:
    """Create ``folder`` atomically: ``write`` fills a staging folder beside it (with ``key``
    recorded in it), which is then renamed into place. If another process published it first,
    theirs is kept and nothing of it is rewritten."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(folder)
    staging = Path(
        tempfile.mkdtemp(prefix=f".{folder.name}.{_HOST}.{os.getpid()}.", dir=folder.parent)
    )
    try:
        write(staging)
        if key is not None:
            (staging / KEY_FILE).write_text(
                json.dumps(_plain_key(key), indent=2, sort_keys=True), encoding="utf-8"
            )
        try:
            staging.rename(folder)
        except OSError:
            if not folder.is_dir():
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)

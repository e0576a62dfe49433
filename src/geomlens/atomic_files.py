"""Writing a file atomically: a temporary file beside it, then ``os.replace``.

The package's lowest floor: every floor writes files this way (results, checkpoints, the
report, the theory's figures), and it imports nothing of geomlens.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def nearest_existing(path: Path) -> Path:
    """``path`` itself if it exists, else its nearest ancestor that does (the filesystem root
    at the last): where a write into ``path`` would have to start."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


@contextlib.contextmanager
def _atomic_replace(path: str | os.PathLike[str], suffix: str) -> Iterator[str]:
    """Yield a temporary path beside ``path``; once the caller has written it, give it the
    mode a plain ``open(path, "w")`` would have (mkstemp makes owner-only files) and move it
    over ``path`` in one step. On any error the temporary file is removed and ``path`` is left
    as it was."""
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(
            f"Cannot write {target}: it is a directory; give a file path inside it."
        )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
    except OSError as error:
        # Say which file could not be written and what to do, keeping the error's type.
        raise type(error)(
            error.errno,
            f"Cannot write {target} ({error.strerror}); choose a folder you can write to",
        ) from error
    os.close(fd)
    try:
        yield tmp
        if target.exists():  # an overwritten file keeps its mode (a private 0600 stays private)
            mode = target.stat().st_mode & 0o7777
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never half."""
    with _atomic_replace(path, ".tmp") as tmp, open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    return Path(path)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (checkpoints: a crash never leaves half a file)."""
    with _atomic_replace(path, ".tmp") as tmp, open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return Path(path)


def atomic_save_figure(figure: Any, path: str | os.PathLike[str], **savefig_kwargs: Any) -> Path:
    """Save a matplotlib figure atomically (format taken from the suffix of ``path``)."""
    with _atomic_replace(path, Path(path).suffix) as tmp:
        figure.savefig(tmp, **savefig_kwargs)
    return Path(path)

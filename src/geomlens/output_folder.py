"""The folders geomlens writes (a report, a sweep, an experiment's checkpoints): what it may
write into them, overwrite and delete, whoever writes them.

Each such folder holds a manifest, :data:`MANIFEST`, listing every file geomlens wrote there with
its sha256; a file is geomlens's own only when the manifest lists it *and* its content still
has that hash (a manifest copied from elsewhere, or edited, proves nothing). So a user's file is
never overwritten (a folder holding one is refused up front, naming it) and never deleted (only
proven files are removed). A writer that stages its folder whole (the report,
:mod:`geomlens.report.folder`) records the files as it publishes them; one that writes file by
file as it goes (a sweep, an experiment: a killed run is resumed from them) records each file's
hash *before* moving it into place, so that every file such a folder holds, even after SIGKILL,
is one the manifest proves.

Every write goes through :func:`owned_path`: a plain relative name, no ``..``, no absolute path,
no link on the way, so nothing is written outside the folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from geomlens.atomic_files import atomic_write_bytes, atomic_write_text, nearest_existing

#: The files geomlens wrote into a folder, with their sha256 (hidden, beside them).
MANIFEST = ".geomlens-report-files.json"
#: The manifest's format (a plain list of names was the first; it holds no hashes).
MANIFEST_FORMAT = 2
#: How deep a manifest's names may go (a sweep's checkpoints/seed-K/<label>/<analysis>.json).
MAX_DEPTH = 6
#: Serialises the manifest's updates by several processes writing into one folder (a sweep).
LOCK = ".geomlens-report-files.lock"


class OutputFolderError(ValueError):
    """The output folder cannot take what geomlens would write without losing something of the
    user's."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(folder: Path) -> dict[str, set[str]]:
    """The files the manifest in ``folder`` claims, each with the hashes it may have; empty
    when there is none or it is not geomlens's current form (it then proves nothing)."""
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        return {}
    files = data.get("files")
    if not isinstance(files, dict):
        return {}
    claimed: dict[str, set[str]] = {}
    for name, hashes in files.items():
        if _safe_relative(name) and isinstance(hashes, list):
            claimed[name] = {h for h in hashes if isinstance(h, str)}
    return claimed


def manifest_owner(folder: Path) -> str | None:
    """What wrote the folder its manifest covers ("report", "sweep", "experiment"); a
    manifest from before owners were recorded is a report's. None without a manifest."""
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        return None
    owner = data.get("owner", "report")
    return owner if isinstance(owner, str) else None


def manifest_text(files: dict[str, set[str]], owner: str | None) -> str:
    """The manifest's JSON: its format, its owner and each file's hashes."""
    document: dict[str, object] = {"format": MANIFEST_FORMAT}
    if owner is not None:
        document["owner"] = owner
    document["files"] = {n: sorted(h) for n, h in sorted(files.items())}
    return json.dumps(document, indent=1) + "\n"


def _safe_relative(name: object) -> bool:
    """A name the manifest may hold: relative, inside the folder, not hidden."""
    if not isinstance(name, str) or not name or name.startswith("/") or "\\" in name:
        return False
    parts = name.split("/")
    return all(part and not part.startswith(".") for part in parts) and len(parts) <= MAX_DEPTH


def proven(folder: Path, name: str, manifest: dict[str, set[str]]) -> bool:
    """Whether ``folder/name`` is a file geomlens wrote: listed, and its content unchanged."""
    path = folder / name
    if path.is_symlink() or not path.is_file():
        return False
    return sha256_of(path) in manifest.get(name, set())


def listing(names: list[str], limit: int = 6) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def check_target(out: Path, flag: str, why: str, kind: str) -> None:
    """``out`` is a folder, or can be made as one, that this process can write."""
    if out.is_symlink() and not out.is_dir() or (out.exists() and not out.is_dir()):
        raise OutputFolderError(
            f"{flag} {out} is a file, and {why}; give a new or empty folder, e.g. "
            f"{flag} {out.with_suffix('')}-{kind}."
        )
    ancestor = nearest_existing(out.parent)
    if not ancestor.is_dir():
        raise OutputFolderError(
            f"{flag} {out}: {ancestor} is a file, so no folder can be made there; give a "
            "folder path whose parents are folders."
        )
    if not os.access(ancestor if not out.is_dir() else out, os.W_OK):
        raise OutputFolderError(f"{flag} {out}: cannot write there; choose a writable folder.")


# --- every other folder geomlens writes (sweeps, experiments) ---------------------------------
#
# A sweep or an experiment writes its files one by one as it goes (a killed run must be resumed
# from them), so it cannot stage the whole folder as a report does. The same manifest proves its
# files instead: each file's hash is recorded *before* the file is moved into place, so every
# file such a folder holds, even after SIGKILL, is one the manifest proves.


@contextlib.contextmanager
def _manifest_lock(folder: Path) -> Iterator[None]:
    """Several processes (a sweep's ranks) record files into one manifest, one at a time."""
    try:
        import fcntl
    except ImportError:  # no advisory locks on this platform: one writer per folder
        yield
        return
    with open(folder / LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def owned_path(folder: Path, name: str) -> Path:
    """``folder/name`` for a file geomlens is about to write: a plain relative name whose
    folders inside ``folder`` are real folders (no link leads a write outside it)."""
    if not _safe_relative(name):
        raise OutputFolderError(
            f"{name!r} is not a name geomlens writes inside {folder} (it must be a relative "
            "path without '..', hidden parts or a leading '/')."
        )
    path = folder
    for part in name.split("/")[:-1]:
        path = path / part
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise OutputFolderError(
                f"{path} is a link or a file, so {name} would be written outside {folder}; "
                "move it away or give another folder."
            )
    return folder / name


def record_files(folder: Path, digests: dict[str, str], owner: str) -> None:
    """Add ``digests`` (name → sha256) to the manifest of ``folder``, written by ``owner``; a
    name keeps only the hashes of its current content and the new one."""
    folder.mkdir(parents=True, exist_ok=True)
    with _manifest_lock(folder):
        files = read_manifest(folder)
        for name, digest in digests.items():
            path = folder / name
            current = sha256_of(path) if path.is_file() and not path.is_symlink() else None
            kept = {h for h in files.get(name, set()) if h == current}
            files[name] = kept | {digest}
        atomic_write_text(folder / MANIFEST, manifest_text(files, owner))


def write_owned(folder: Path, name: str, data: bytes | str, owner: str) -> Path:
    """Write ``folder/name`` whole (a temporary file, then a rename), its hash recorded in the
    manifest first."""
    content = data.encode("utf-8") if isinstance(data, str) else data
    path = owned_path(folder, name)
    record_files(folder, {name: hashlib.sha256(content).hexdigest()}, owner)
    return atomic_write_bytes(path, content)


def place_owned(folder: Path, source: Path, name: str, owner: str) -> Path:
    """Move the finished file ``source`` (in the same file system) to ``folder/name``, its hash
    recorded first."""
    path = owned_path(folder, name)
    record_files(folder, {name: sha256_of(source)}, owner)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.replace(source, path)
    return path


def unproven_files(folder: Path) -> list[str]:
    """Every file or link in ``folder`` (hidden ones aside: geomlens's manifest, lock, staging
    and temporary files) that its manifest does not prove to be geomlens's, as relative names."""
    if not folder.is_dir():
        return []
    manifest = read_manifest(folder)
    found = []
    for root, folders, files in os.walk(folder):
        here = Path(root)
        folders[:] = [f for f in folders if not f.startswith(".")]
        links = [f for f in folders if (here / f).is_symlink()]
        for name in sorted(files + links):
            if name.startswith("."):
                continue
            relative = (here / name).relative_to(folder).as_posix()
            if not proven(folder, relative, manifest):
                found.append(relative)
    return sorted(found)


def check_owned_folder(
    out: Path, what: str, owner: str, flag: str = "--out", replaceable: Iterable[str] = ()
) -> None:
    """Refuse, before any work, an ``out`` that is not a new or empty folder or one holding
    only files ``owner`` wrote (proven by its manifest), naming the user's files in it (and a
    folder another kind of writer made: a sweep never writes into a report's folder).
    ``replaceable``: names the writer may rewrite although changed since (a sweep re-measures a
    Result edited by hand)."""
    check_target(out, flag, f"{what} is a folder", what.split()[-1])
    earlier = manifest_owner(out)
    if earlier is not None and earlier != owner and read_manifest(out):
        raise OutputFolderError(
            f"{flag} {out} holds the files of a geomlens {earlier}, which the {what} would "
            f"replace; nothing was changed: give a new or empty {flag} folder."
        )
    allowed = set(replaceable)
    theirs = [name for name in unproven_files(out) if name not in allowed]
    if theirs:
        raise OutputFolderError(
            f"{flag} {out} is not empty and holds files no earlier {what} wrote: "
            f"{listing(theirs)}; nothing was changed: move them away or give a new or empty "
            f"{flag} folder."
        )


def remove_owned(folder: Path) -> list[str]:
    """Delete the files of ``folder`` its manifest proves (and the folders they leave empty);
    anything else stays. Returns the names deleted."""
    manifest = read_manifest(folder)
    removed = []
    with _manifest_lock(folder):
        for name in sorted(manifest):
            if proven(folder, name, manifest):
                (folder / name).unlink()
                removed.append(name)
                parent = (folder / name).parent
                while parent != folder and parent.is_dir() and not any(parent.iterdir()):
                    parent.rmdir()
                    parent = parent.parent
        if (folder / MANIFEST).is_file():
            (folder / MANIFEST).unlink()
    return removed


__all__ = [
    "MANIFEST",
    "OutputFolderError",
    "check_owned_folder",
    "manifest_owner",
    "manifest_text",
    "owned_path",
    "place_owned",
    "proven",
    "read_manifest",
    "record_files",
    "remove_owned",
    "sha256_of",
    "unproven_files",
    "write_owned",
]

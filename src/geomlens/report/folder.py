"""The report's folder: what geomlens may write into it, overwrite and delete.

A report is written whole into a hidden staging folder inside the output folder
(:data:`STAGING`, marked by :data:`STAGING_MARK`) and then moved into place file by file. The
manifest :data:`MANIFEST` records every file a report wrote with its sha256; a file is
geomlens's own only when the manifest lists it *and* its content still has that hash (the
mechanism every folder geomlens writes shares, :mod:`geomlens.output_folder`). So:

* a user's file is never overwritten: a name the report would write that is held by a file
  geomlens cannot prove it wrote is refused, naming it, before the model is loaded;
* a user's file is never deleted: only files the manifest lists with their current hash are
  removed (a manifest copied from elsewhere, or edited, proves nothing);
* an interrupted report (SIGKILL while writing) leaves only its staging folder and a manifest
  that covers both the old and the new files; the next run removes the one and trusts the
  other, and ends as a run into a clean folder would.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from geomlens.output_folder import (
    MANIFEST,
    MANIFEST_FORMAT,
    check_target,
    listing,
    manifest_owner,
    manifest_text,
    proven,
    read_manifest,
    sha256_of,
)
from geomlens.output_folder import OutputFolderError as ReportFolderError

#: What the manifest says wrote the folder (a sweep's or an experiment's is refused).
OWNER = "report"
#: Where a report is written before it is moved into place (inside the output folder).
STAGING = ".geomlens-report-staging"
#: The file that marks a staging folder as geomlens's own.
STAGING_MARK = ".geomlens-staging"
#: Files every report writes (beside one ``NAME.json`` / ``NAME.png`` per analysis).
REPORT_FILES = (
    "index.html",
    "results.json",
    "theory-resolution.png",
    "theory-abstraction.png",
    "theory-ssd.png",
)


def _staging_is_ours(folder: Path) -> bool:
    staging = folder / STAGING
    return staging.is_dir() and not staging.is_symlink() and (staging / STAGING_MARK).is_file()


def planned_files(analyses: Iterable[str], section: Iterable[str] = ()) -> list[str]:
    """The names a report of ``analyses`` (and a causal-LM section of ``section``) may write."""
    from geomlens.report.causal_lm import SECTION_FOLDER

    names = list(REPORT_FILES)
    for name in analyses:
        names += [f"{name}.json", f"{name}.png"]
    section = list(section)
    for name in section:
        names += [f"{SECTION_FOLDER}/{name}.json", f"{SECTION_FOLDER}/{name}.png"]
    if section:
        names += [f"{SECTION_FOLDER}/{file}" for file in REPORT_FILES[2:]]
    return names


def collisions(folder: Path, names: Iterable[str]) -> list[str]:
    """Those of ``names`` that ``folder`` holds as something geomlens cannot prove it wrote
    (a user's file, a folder, a link, or a file changed since a report wrote it)."""
    manifest = read_manifest(folder)
    taken = []
    for name in names:
        path = folder / name
        parent = path.parent
        if parent != folder and (parent.is_symlink() or (parent.exists() and not parent.is_dir())):
            taken.append(str(parent.relative_to(folder)))
        elif (path.exists() or path.is_symlink()) and not proven(folder, name, manifest):
            taken.append(name)
    return sorted(set(taken))


def check_report_folder(out: Path, names: Iterable[str], flag: str = "--out") -> None:
    """Refuse, before any work, an output that is not a folder a report can be written into
    without overwriting a user's file (see the module docstring)."""
    check_target(out, flag, "a report is a folder (index.html, figures, JSON)", "report")
    if not out.is_dir():
        return
    earlier = manifest_owner(out)
    if earlier not in (None, OWNER) and read_manifest(out):
        raise ReportFolderError(
            f"{flag} {out} holds a geomlens {earlier}, not a report; nothing was changed: give a "
            f"new or empty {flag} folder."
        )
    if (out / STAGING).exists() and not _staging_is_ours(out):
        raise ReportFolderError(
            f"{flag} {out} holds {STAGING}, which geomlens did not make (no {STAGING_MARK} in "
            f"it) and would need; move it away or choose another folder."
        )
    taken = collisions(out, names)
    if taken:
        old = (out / MANIFEST).is_file() and not read_manifest(out)
        why = (
            f" ({MANIFEST} there records no hashes, so nothing in it is proven to be a report's: "
            "an older geomlens, or a manifest copied or edited)"
            if old
            else ""
        )
        raise ReportFolderError(
            f"{flag} {out} holds files geomlens did not write and the report would replace: "
            f"{listing(taken)}{why}; nothing was changed: move them away or give another "
            f"{flag} (a new folder, or one holding only an earlier report)."
        )


def start_staging(folder: Path) -> Path:
    """An empty staging folder inside ``folder`` (an interrupted run's is removed first)."""
    folder.mkdir(parents=True, exist_ok=True)
    staging = folder / STAGING
    if _staging_is_ours(folder):
        shutil.rmtree(staging)
    staging.mkdir()
    (staging / STAGING_MARK).write_text("geomlens report staging; removed by the next report\n")
    return staging


def _write_manifest(folder: Path, staging: Path, files: dict[str, set[str]]) -> None:
    """Write the manifest through the staging folder (no temporary is left in ``folder``)."""
    temporary = staging / (MANIFEST + ".new")
    with temporary.open("w", encoding="utf-8") as file:
        file.write(manifest_text(files, OWNER))
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, folder / MANIFEST)


def publish(folder: Path, staging: Path) -> list[str]:
    """Move the report in ``staging`` into ``folder``, delete the files of the previous report
    it does not rewrite (only those proven by hash), record the new files; return their names.
    """
    written: dict[str, str] = {}
    for path in sorted(staging.rglob("*")):
        if path.is_file() and path.name != STAGING_MARK and not path.name.startswith("."):
            written[path.relative_to(staging).as_posix()] = sha256_of(path)
    taken = collisions(folder, written)
    if taken:  # files the user put there while the report ran
        raise ReportFolderError(
            f"{folder} gained files the report would replace while it ran: {listing(taken)}; "
            f"nothing of them was changed, and the new report was left in {staging} (the next "
            "report into this folder removes it)."
        )
    previous = read_manifest(folder)
    # Until the last step both the old and the new files are proven by the manifest, so a run
    # killed in between leaves nothing the next one cannot identify.
    both = {name: set(hashes) for name, hashes in previous.items()}
    for name, digest in written.items():
        both.setdefault(name, set()).add(digest)
    _write_manifest(folder, staging, both)
    for name in written:
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / name, target)
    for name in previous:
        if name not in written and proven(folder, name, previous):
            (folder / name).unlink()
            parent = (folder / name).parent
            if parent != folder and not any(parent.iterdir()):
                parent.rmdir()
    _write_manifest(folder, staging, {name: {digest} for name, digest in written.items()})
    shutil.rmtree(staging)
    return sorted(written)


__all__ = [
    "MANIFEST",
    "MANIFEST_FORMAT",
    "STAGING",
    "ReportFolderError",
    "check_report_folder",
    "collisions",
    "planned_files",
    "publish",
    "read_manifest",
    "sha256_of",
    "start_staging",
]

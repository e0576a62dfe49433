"""The CLI's shared error helpers: one line ``error: …`` on stderr and exit code 2 (130 for
Ctrl-C), whichever command meets the error."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import typer

from geomlens.run_defaults import DEFAULT_BATCH_SIZE


def end_open_bars() -> None:
    """Close every progress bar still open (a training interrupted mid-step leaves its bar
    open), so what is printed next starts on a line of its own, not at the bar's end."""
    import sys

    tqdm_module = sys.modules.get("tqdm.std")
    if tqdm_module is None:
        return
    for open_bar in list(getattr(tqdm_module.tqdm, "_instances", ())):
        with contextlib.suppress(Exception):  # a bar that cannot close must not hide the message
            open_bar.close()


def fail(message: str) -> typer.Exit:
    """Print one line ``error: …`` on stderr; the caller raises the returned exit (code 2)."""
    end_open_bars()
    # One line: a multi-line message (a model-loading error with advice) is joined up.
    typer.secho(f"error: {' '.join(message.split())}", fg=typer.colors.RED, err=True)
    return typer.Exit(code=2)


def error_message(error: BaseException) -> str:
    # str(KeyError("x")) is "'x'" with quotes; the message itself reads better.
    if isinstance(error, KeyError) and type(error).__str__ is KeyError.__str__ and error.args:
        return str(error.args[0])
    return str(error)


#: What the commands turn into a one-line error (exit 2) rather than a traceback.
USER_ERRORS = (ValueError, KeyError, TypeError, ImportError, OSError)


@contextlib.contextmanager
def one_line_errors(
    errors: tuple[type[BaseException], ...] = USER_ERRORS,
    *,
    context: str = "",
    interrupted: str | None = None,
) -> Iterator[None]:
    """End the command on an error of ``errors`` raised inside the block as :func:`fail` does
    (``error: {context}{message}``, exit 2, no traceback); with ``interrupted``, Ctrl-C prints
    that line (what was or was not written) and exits 130."""
    try:
        yield
    except errors as error:
        raise fail(f"{context}{error_message(error)}") from error
    except KeyboardInterrupt:
        if interrupted is None:
            raise
        end_open_bars()
        typer.secho(interrupted, fg=typer.colors.RED, err=True)
        raise typer.Exit(code=130) from None


def check_positive(flag: str, value: int | None, meaning: str | None = None) -> None:
    if value is not None and value < 1:
        said = f" ({meaning})" if meaning else ""
        raise fail(f"{flag} must be at least 1{said}; got {value}.")


#: The largest --batch-size taken: far above what any model's forward pass holds in memory, so
#: a larger number is a typo (10**30 was accepted and silently meant "everything at once").
MAX_BATCH_SIZE = 65536


def check_batch_size(value: int) -> None:
    if not 1 <= value <= MAX_BATCH_SIZE:
        shown = (
            str(value)
            if len(str(value)) <= 20
            else f"{str(value)[:12]}... ({len(str(value))} digits)"
        )
        raise fail(
            f"--batch-size must be from 1 to {MAX_BATCH_SIZE} (inputs per forward pass; "
            f"{DEFAULT_BATCH_SIZE} is the default); got {shown}."
        )


def check_seed(value: int, flag: str = "--seed") -> None:
    """Refuse a seed outside 0..2**63-1 (what torch and numpy both take), before any work."""
    from geomlens.engine.feed import check_seed as check

    try:
        check(value, flag)
    except ValueError as error:
        raise fail(f"{str(error).rstrip('.')}; {flag} 0 is the default.") from None


def check_writable_file(flag: str, path: Path, suffixes: tuple[str, ...]) -> None:
    """Refuse, before any work, an output path that is a folder, has the wrong suffix, or lies
    in a folder we cannot write."""
    if path.is_dir():
        raise fail(
            f"{flag} {path} is a directory; give a file path such as {path / ('result' + suffixes[0])}."
        )
    if path.suffix.lower() not in suffixes:
        raise fail(
            f"{flag} {path} must end in {', '.join(suffixes)} (the format written follows it); "
            f"e.g. {path.with_suffix(suffixes[0])}."
        )
    from geomlens.output_folder import nearest_existing

    folder = nearest_existing(path.parent)
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise fail(f"{flag} {path}: cannot write in {folder}; choose a writable location.")

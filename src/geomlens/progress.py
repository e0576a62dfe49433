"""Progress a person can follow: bars for loops with a known length, lines for everything else.

* :func:`bar`: a tqdm bar. In a notebook it is the widget bar only when ipywidgets is
  installed; otherwise the plain text bar (tqdm.auto would warn "IProgress not found").
* :func:`phase`: a context manager for a step with no natural bar (a fit, a bootstrap inside a
  library call): whenever nothing (no line, no bar) has been printed for
  :data:`HEARTBEAT_SECONDS`, it prints a line saying the step is still running and for how long,
  and one when it ends. A quick step prints nothing; a long one is never silent for longer than
  that, and no line claims an ETA it cannot know.
* :func:`steps`: ``for item in steps(items, "bootstrap ε")`` shows a bar for a loop inside an
  analysis, when the run shows progress (:func:`showing`); otherwise it is the bare iterable.

Whether progress is shown is set per run by the engine (``progress=``) through
:func:`showing_progress`; analyses never need a flag of their own.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from geomlens.formatting import duration

T = TypeVar("T")

#: Longest silence, in seconds, inside a :func:`phase` before it prints a "still running" line.
HEARTBEAT_SECONDS = 5.0
PREFIX = "geomlens"

_state = threading.local()
_open_bars: list[Any] = []
_bars_lock = threading.Lock()


def _tqdm_class() -> type:
    try:
        from IPython import get_ipython

        in_notebook = get_ipython() is not None and "IPKernelApp" in get_ipython().config
    except Exception:  # no IPython, or not a kernel
        in_notebook = False
    if in_notebook:
        try:
            import ipywidgets  # noqa: F401  (the notebook bar needs it)
            from tqdm.notebook import tqdm as notebook_tqdm

            return notebook_tqdm
        except ImportError:
            pass
    from tqdm.std import tqdm as text_tqdm

    return text_tqdm


class _Tracked:
    """Registers a bar while it is open, so a phase's heartbeat knows when it last moved."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        with _bars_lock:
            _open_bars.append(inner)

    def close(self) -> None:
        with _bars_lock:
            if self.inner in _open_bars:
                _open_bars.remove(self.inner)


def bar(*args: Any, **kwargs: Any) -> Any:
    """A tqdm bar (plain text unless a notebook has ipywidgets); same arguments as tqdm."""
    instance = _tqdm_class()(*args, **kwargs)
    tracked = _Tracked(instance)
    close = instance.close

    def closing() -> None:
        tracked.close()
        close()

    instance.close = closing
    return instance


def showing() -> bool:
    """Whether the current run shows progress (set by :func:`showing_progress`)."""
    return bool(getattr(_state, "show", False))


@contextlib.contextmanager
def showing_progress(show: bool | None) -> Iterator[None]:
    """Within the block, :func:`steps` and :func:`phase` show progress when ``show`` is true
    (None: when standard error is a terminal, as tqdm decides)."""
    previous = getattr(_state, "show", False)
    _state.show = sys.stderr.isatty() if show is None else bool(show)
    try:
        yield
    finally:
        _state.show = previous


def say(line: str) -> None:
    """Print one progress line (to standard error, above any open bar) when progress is shown."""
    global _last_line
    if showing():
        from tqdm.std import tqdm as text_tqdm

        text_tqdm.write(f"{PREFIX}: {line}", file=sys.stderr)
        _last_line = time.time()


_last_line = 0.0
#: Open phases, innermost last: only the innermost one speaks (nested phases would repeat it).
_phases: list[object] = []


def _last_output() -> float:
    """``time.time()`` of the latest progress line or print of any open bar."""
    with _bars_lock:
        bars = max((getattr(b, "last_print_t", 0.0) for b in _open_bars), default=0.0)
    return max(bars, _last_line)


@contextlib.contextmanager
def phase(what: str, *, announce: bool = False) -> Iterator[None]:
    """Within the block, whenever nothing has been printed for :data:`HEARTBEAT_SECONDS`, say
    that ``what`` is still running and for how long; at the end, if anything was said, say how
    long it took. ``announce``: also say when it starts (for the big steps of a command)."""
    if not showing():
        yield
        return
    started = time.monotonic()
    spoke = threading.Event()
    if announce:
        say(f"{what} …")
        spoke.set()
    stop = threading.Event()
    token = object()
    _phases.append(token)

    def heartbeat() -> None:
        _state.show = True  # thread-local: the heartbeat shows what its phase shows
        while not stop.wait(HEARTBEAT_SECONDS / 5):
            innermost = _phases and _phases[-1] is token
            if innermost and time.time() - _last_output() >= HEARTBEAT_SECONDS:
                say(f"{what}: still running, {duration(time.monotonic() - started)} so far")
                spoke.set()

    thread = threading.Thread(target=heartbeat, name="geomlens-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        _phases.remove(token)
        if spoke.is_set():
            say(f"{what}: done in {duration(time.monotonic() - started)}")


def steps(items: Iterable[T], what: str, total: int | None = None) -> Iterable[T]:
    """``items`` with a bar named ``what`` when the run shows progress."""
    if not showing():
        return items
    return bar(items, desc=f"{PREFIX}: {what}", total=total, leave=False, file=sys.stderr)

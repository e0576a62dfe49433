"""Progress a person can follow: bars for loops with a known length, lines for everything else.

* :func:`bar`: a tqdm bar. In a notebook it is the widget bar only when ipywidgets is
  installed; otherwise the plain text bar (tqdm.auto would warn "IProgress not found").
* :func:`phase`: a context manager for a step with no natural bar (a fit, a bootstrap inside a
  library call): when nothing (no line, no bar, a library's tqdm bar included) has been printed
  for a while, it prints one line, and one when it ends. Inside a :func:`counting` block the
  line gives the count against its target and an ETA from the average rate since the count
  began (steady, not the latest batch's); with no count it says how long the step has run, at
  growing intervals (:data:`HEARTBEAT_SECONDS`, then twice as long each time up to
  :data:`HEARTBEAT_MAX_SECONDS`), so a long step never fills the screen with the same line.
  A quick step prints nothing, and no line claims an ETA it cannot know.
* :func:`counting`: ``with counting("activations captured", total, "tokens") as count:
  ... count.add(n)`` gives the enclosing phase a count to report.
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
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from geomlens.formatting import duration

T = TypeVar("T")

#: Silence, in seconds, inside a :func:`phase` before its first progress line.
HEARTBEAT_SECONDS = 5.0
#: Longest silence between two progress lines of a phase with no count (the interval doubles
#: up to it; below the report's promise of no silence longer than ten seconds).
HEARTBEAT_MAX_SECONDS = 8.0
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
#: Phases in which :func:`each` has counted a loop (a second loop there adds no count).
_counted_phases: set[object] = set()


def _last_output() -> float:
    """``time.time()`` of the latest progress line or print of any open bar (a library's own
    tqdm bar too, e.g. sae-lens's training bar)."""
    from tqdm.std import tqdm as text_tqdm

    with _bars_lock:
        bars = max((getattr(b, "last_print_t", 0.0) for b in _open_bars), default=0.0)
    try:
        instances = list(getattr(text_tqdm, "_instances", ()))
        others = max((getattr(b, "last_print_t", 0.0) for b in instances), default=0.0)
    except (AttributeError, RuntimeError, TypeError):  # a set changing while read: skip it
        others = 0.0
    return max(bars, others, _last_line)


class Count:
    """A count toward a target that a phase's progress line reports (see :func:`counting`)."""

    def __init__(self, what: str, total: float | None, unit: str) -> None:
        self.what = what
        self.total = total
        self.unit = unit
        self.done = 0.0
        self.started = time.monotonic()

    def add(self, amount: float) -> None:
        """Count ``amount`` more; the count stops at its target (a last batch that overshoots
        it is not shown as "5,868 of 5,000")."""
        self.done += amount
        if self.total:
            self.done = min(self.done, float(self.total))

    def eta(self, now: float | None = None) -> float | None:
        """Seconds left at the average rate since the count began (None before any count,
        without a target, or past it)."""
        elapsed = (time.monotonic() if now is None else now) - self.started
        if not self.total or self.done <= 0 or elapsed <= 0 or self.done >= self.total:
            return None
        return (self.total - self.done) / (self.done / elapsed)

    def words(self, now: float | None = None) -> str:
        """``12,345 of 100,000 tokens captured (12 %), about 3 min left``."""
        from geomlens.formatting import number

        unit = f" {self.unit}" if self.unit else ""
        if self.total:
            text = (
                f"{number(self.done, 6)} of {number(self.total, 6)}{unit} {self.what} "
                f"({number(100 * min(self.done / self.total, 1.0), 2)} %)"
            )
        else:
            text = f"{number(self.done, 6)}{unit} {self.what}"
        left = self.eta(now)
        return text + (f", about {duration(left)} left" if left is not None else "")


#: Open counts, innermost last.
_counts: list[Count] = []


def counted() -> bool:
    """Whether a :func:`counting` block is open: an inner step then adds to that count rather
    than opening its own (two counts whose targets alternate read as a target that changes)."""
    return bool(_counts)


def current_count() -> Count | None:
    """The innermost open :func:`counting` block's count, or None."""
    return _counts[-1] if _counts else None


@contextlib.contextmanager
def counting(what: str, total: float | None = None, unit: str = "") -> Iterator[Count]:
    """Within the block, the enclosing :func:`phase`'s progress lines report this count:
    ``what`` (e.g. "captured"), its ``total`` (None: no target, no ETA) and ``unit``."""
    count = Count(what, total, unit)
    _counts.append(count)
    try:
        yield count
    finally:
        _counts.remove(count)


@contextlib.contextmanager
def phase(what: str, *, announce: bool = False) -> Iterator[None]:
    """Within the block, when nothing has been printed for a while, say how far ``what`` has
    come: the innermost :func:`counting`'s count, target and ETA, or (with no count) how long
    it has run, at intervals growing from :data:`HEARTBEAT_SECONDS` to
    :data:`HEARTBEAT_MAX_SECONDS`; at a normal end, if anything was said, say how long it took
    (a block left by an exception gets no "done" line).
    ``announce``: also say when it starts (for the big steps of a command)."""
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
        quiet = HEARTBEAT_SECONDS  # silence before the next line; doubles while nothing counts
        while not stop.wait(HEARTBEAT_SECONDS / 5):
            innermost = _phases and _phases[-1] is token
            if not innermost:
                continue
            count = _counts[-1] if _counts else None
            wait = HEARTBEAT_SECONDS if count is not None else quiet
            if time.time() - _last_output() < wait:
                continue
            elapsed = duration(time.monotonic() - started)
            if count is not None:
                say(f"{what}: {count.words()}; {elapsed} so far")
            else:
                say(f"{what}: {elapsed} so far (this step has no count to show)")
                quiet = min(quiet * 2, HEARTBEAT_MAX_SECONDS)
            spoke.set()

    thread = threading.Thread(target=heartbeat, name="geomlens-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        _phases.remove(token)
        _counted_phases.discard(token)
    # Reached only when the block ended normally: an error or Ctrl-C inside it is not "done",
    # and the command's own one-line message says what happened.
    if spoke.is_set():
        say(f"{what}: done in {duration(time.monotonic() - started)}")


def each(items: Sequence[T], what: str) -> Iterator[T]:
    """``items`` one by one, each counted toward ``len(items)`` ("2 of 6 sites finished") in
    the enclosing :func:`phase`'s progress lines: a long step that loops over sites (an
    analysis's ``finalize``) gives a count and an ETA, not only the time so far. Inside an
    open count (a loop nested in another), only the outer one counts."""
    phase = _phases[-1] if _phases else None
    if _counts or (phase is not None and phase in _counted_phases):
        # Nested in a count, or a second loop in a phase that already counted one: a target
        # that changed within the phase would read as a count that moved its goal.
        yield from items
        return
    if phase is not None:
        _counted_phases.add(phase)
    with counting(what, len(items)) as count:
        for item in items:
            yield item
            count.add(1)


def steps(items: Iterable[T], what: str, total: int | None = None) -> Iterable[T]:
    """``items`` with a bar named ``what`` when the run shows progress."""
    if not showing():
        return items
    return bar(items, desc=f"{PREFIX}: {what}", total=total, leave=False, file=sys.stderr)

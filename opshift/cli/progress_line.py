"""The progress line on stderr: drawn only when stderr is a terminal, never with ``-q`` or
``--json``.

A command runs its phases in :meth:`Progress.phase`; while a drawn phase lasts, the line is
the reporter of :mod:`opshift.progress`, so the work's own :func:`opshift.progress.advance`
and :func:`opshift.progress.stage` calls count units and nest phases (e.g. the whole-model
run inside ``--verify``) on it. A phase may have a total (nodes, checks, runs, files). A
thread redraws the line a few times a second, so the elapsed time moves even in a phase that
counts nothing, and a counted phase shows ``done/total`` with an ETA::

    opshift inline big.onnx: verify 1,204/16,666 rewrites [##........] 7%  3.1s  ETA 41s
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from opshift import progress

#: Seconds between redraws.
INTERVAL = 0.2
_SPIN = "|/-\\"


@dataclass
class _Phase:
    label: str
    total: int | None = None
    unit: str = ""
    done: int = 0
    start: float = field(default_factory=time.perf_counter)


class Progress:
    """The progress line of one command (``title``: e.g. ``opshift convert m.onnx``)."""

    def __init__(self, title: str, *, enabled: bool | None = None):
        self.title = title
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._stack: list[_Phase] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = False

    # -- phases ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def phase(self, label: str, total: int | None = None, unit: str = "") -> Iterator[None]:
        """Run a phase; nested phases show while they last, then the outer one again."""
        p = _Phase(label, total, unit)
        with self._lock:
            self._stack.append(p)
        outer = progress.reporter()
        if self.enabled:
            progress.report_to(self)
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        try:
            yield
        finally:
            progress.report_to(outer)
            with self._lock:
                self._stack.remove(p)

    def advance(self, n: int = 1) -> None:
        """Count ``n`` units done in the innermost phase."""
        stack = self._stack
        if stack:
            stack[-1].done += n

    def close_line(self) -> None:
        """Clear the drawn line (before printing a line of results); drawing goes on."""
        with self._lock:
            if self._drawn:
                sys.stderr.write("\r\x1b[2K")
                sys.stderr.flush()
                self._drawn = False

    def close(self) -> None:
        """Stop drawing and clear the line."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._drawn:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()
            self._drawn = False

    # -- drawing --------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.wait(INTERVAL):
            with self._lock:
                if self._stack:
                    sys.stderr.write("\r\x1b[2K" + self.line())
                    sys.stderr.flush()
                    self._drawn = True

    def line(self, now: float | None = None) -> str:
        """The text drawn for the innermost phase."""
        p = self._stack[-1]
        now = time.perf_counter() if now is None else now
        elapsed = now - p.start
        text = f"{self.title}:" + (f" {p.label}" if p.label else "")  # (a batch: its count)
        first = self._stack[0]
        if first is not p and first.total:  # the batch's count stays in sight
            text = f"{self.title} [{first.done:,}/{first.total:,} {first.unit}]: {p.label}"
        if p.total:
            done = min(p.done, p.total)
            frac = done / p.total
            filled = int(10 * frac)
            text += (f" {done:,}/{p.total:,} {p.unit} [{'#' * filled}{'.' * (10 - filled)}] "
                     f"{frac:.0%}  {elapsed:.1f}s")
            if done:
                text += f"  ETA {_duration(elapsed * (p.total - done) / done)}"
        else:
            text += f" {_SPIN[int(elapsed / INTERVAL) % 4]}  {elapsed:.1f}s"
        return text


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m < 60 else f"{m // 60}h{m % 60:02d}m"


def for_args(args, title: str) -> Progress:
    """A Progress honouring ``-q`` and ``--json`` (machine output gets no decoration)."""
    enabled = (sys.stderr.isatty() and not getattr(args, "quiet", False)
               and not getattr(args, "json", False))
    return Progress(title, enabled=enabled)

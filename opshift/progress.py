"""Progress of the work, reported through a callback: the seam between the engine and a UI.

Code doing long work (convert, inline, fuse, fix, inspect, verify) calls :func:`advance` for
each unit done (nodes, repairs, runs) and runs a phase nested in the current one in
:func:`stage` (e.g. the whole-model run inside ``--verify``). Both forward to the reporter
registered with :func:`report_to`, and cost nothing when there is none (the default: the
library draws nothing). The CLI's progress line on stderr
(:mod:`opshift.cli.progress_line`) registers itself while it is drawn.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol


class Reporter(Protocol):
    """What receives the progress: phases (a label; a total of units, or None) and counts."""

    def phase(self, label: str, total: int | None = None, unit: str = ""
              ) -> contextlib.AbstractContextManager[None]:
        """A phase nested in the current one, while the context lasts."""

    def advance(self, n: int = 1) -> None:
        """``n`` units of the innermost phase done."""


_reporter: Reporter | None = None


def reporter() -> Reporter | None:
    """The reporter registered (None: progress goes nowhere)."""
    return _reporter


def report_to(r: Reporter | None) -> Reporter | None:
    """Send progress to ``r`` from now on (None: nowhere); returns the reporter it replaces."""
    global _reporter
    previous, _reporter = _reporter, r
    return previous


def advance(n: int = 1) -> None:
    """Count ``n`` units done in the innermost phase of the reporter (if any)."""
    if _reporter is not None:
        _reporter.advance(n)


@contextlib.contextmanager
def stage(label: str, total: int | None = None, unit: str = "") -> Iterator[None]:
    """A phase nested in the current one (nothing when no reporter is registered)."""
    if _reporter is None:
        yield
    else:
        with _reporter.phase(label, total, unit):
            yield


def disable() -> None:
    """Report nothing in this process (worker processes of a batch: the parent draws)."""
    report_to(None)

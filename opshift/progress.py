"""A progress bar on stderr, shown only when stderr is a terminal and not ``-q``.

Commands wrap their long phases (load, rewrite, verify, save) in :func:`phase`; nothing is
printed when stderr is redirected, so logs and pipes stay clean.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator


class Progress:
    """Phases of one command, drawn as ``opshift convert [2/4] rewrite ... 0.3s``."""

    def __init__(self, command: str, total: int, *, enabled: bool | None = None):
        self.command = command
        self.total = total
        self.done = 0
        if enabled is None:
            enabled = sys.stderr.isatty()
        self.enabled = enabled
        self._start = time.perf_counter()

    def _draw(self, label: str, end: str = "") -> None:
        if not self.enabled:
            return
        width = 20
        filled = int(width * self.done / max(self.total, 1))
        bar = "#" * filled + "." * (width - filled)
        elapsed = time.perf_counter() - self._start
        sys.stderr.write(f"\r\x1b[2Kopshift {self.command} [{bar}] {self.done}/{self.total} "
                         f"{label} {elapsed:.1f}s{end}")
        sys.stderr.flush()

    @contextlib.contextmanager
    def phase(self, label: str) -> Iterator[None]:
        self._draw(label + " ...")
        try:
            yield
        finally:
            self.done += 1
            self._draw(label, "\n" if self.done >= self.total else "")

    def close(self) -> None:
        if self.enabled and self.done < self.total:
            sys.stderr.write("\n")
            sys.stderr.flush()


def for_args(args, command: str, total: int) -> Progress:
    """A Progress honouring ``-q`` and ``--json`` (machine output gets no decoration)."""
    enabled = (sys.stderr.isatty() and not getattr(args, "quiet", False)
               and not getattr(args, "json", False))
    return Progress(command, total, enabled=enabled)

"""Writing a command's output: the model file and the external data files beside it.

Every file is first written to a temp file ``.<name>.<random>.tmp`` created in the folder it
goes to, exclusively and never through a link (``O_CREAT|O_EXCL|O_NOFOLLOW``): no existing
file, link or other run's temp is ever opened for writing. Nothing is published until every
file is written; then each temp is renamed to its final name (a rename replaces a link there,
never the file it points to). A failure, or a signal the command line turns into an exception
(:func:`opshift.cli.exit_on_signals`), before that removes the temps and any folder made for
them, leaving the output folder as it was. Signals that arrive while a temp is being created
or the files are being renamed into place are held until that is done (:func:`hold`), so no
temp escapes the clean-up and no output is half published.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import OpshiftError

#: How temp files are created: new (never an existing file), never through a link.
_CREATE = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
           | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))

_held: list[int] | None = None


def hold(signum: int) -> bool:
    """For a signal handler: True when the signal must wait because files are being created
    or published right now; it is raised again (``signal.raise_signal``) once they are."""
    if _held is None:
        return False
    _held.append(signum)
    return True


@contextlib.contextmanager
def _holding_signals() -> Iterator[None]:
    global _held
    if _held is not None:
        yield
        return
    _held = []
    try:
        yield
    finally:
        held, _held = _held, None
        if held:
            signal.raise_signal(held[0])


def check_folder(path: Path) -> Path:
    """The folder ``path`` goes to; a one-line error when it does not exist or ``path`` is a
    folder."""
    folder = path.parent
    if not folder.is_dir():
        raise OpshiftError(f"{path}: output folder {str(folder)!r} does not exist")
    if path.is_dir():
        raise OpshiftError(f"{path}: output path is a directory")
    return folder


def write_error(path: Path, e: OSError) -> OpshiftError:
    """The one-line error for a failed write of output file ``path`` (disk full, file too
    large, quota, read-only file system, ...)."""
    return OpshiftError(f"{path}: cannot write: {e.strerror or e}")


def write_all(fd: int, data: bytes | memoryview, path: Path) -> None:
    """Write ``data`` to ``fd`` (the temp of ``path``), a write error as :func:`write_error`."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view[:1 << 30]):]
    except OSError as e:
        raise write_error(path, e) from e


@dataclass
class _Staged:
    tmp: Path
    final: Path
    replace: bool  # False: the final name must still be free (or hold the same bytes)
    fd: int | None


class Staging:
    """Output files written to temps, published together by :meth:`publish` (use
    :func:`staging`)."""

    def __init__(self) -> None:
        self._files: list[_Staged] = []
        self._dirs: list[Path] = []  # folders made for data files
        self._new: list[Path] = []  # files published under names that were free

    def create(self, final: Path, *, replace: bool) -> int:
        """A new, empty temp file in ``final``'s folder, open for writing; its descriptor
        (the staging closes it). ``replace``: whether publishing may replace a file at
        ``final`` (else the name must still be free then, or hold the same bytes)."""
        folder = final.parent
        with _holding_signals():
            for _ in range(100):
                tmp = folder / f".{final.name}.{os.urandom(6).hex()}.tmp"
                try:
                    fd = os.open(tmp, _CREATE, 0o666)  # 0666 less the umask, as a new file
                except FileExistsError:
                    continue
                except OSError as e:
                    raise OpshiftError(f"{final}: cannot write to folder {str(folder)!r}: "
                                       f"{e.strerror or e}") from e
                self._files.append(_Staged(tmp, final, replace, fd))
                return fd
        raise OpshiftError(f"{final}: cannot create a temporary file in {str(folder)!r}")

    def make_folder(self, path: Path) -> None:
        """Make folder ``path`` (removed again if the output is not published)."""
        with _holding_signals():
            try:
                os.mkdir(path)
            except OSError as e:
                raise OpshiftError(f"{path}: cannot make folder: {e.strerror or e}") from e
            self._dirs.append(path)

    def publish(self) -> None:
        """Rename every temp to its final name, in the order created."""
        with _holding_signals():
            for s in self._files:
                self._close(s)
            for s in self._files:
                try:
                    linked = None if s.replace else _link_new(s.tmp, s.final)
                    if linked is None:
                        os.replace(s.tmp, s.final)
                except OSError as e:
                    raise OpshiftError(f"{s.final}: cannot write: {e.strerror or e}") from e
                if linked or (linked is None and not s.replace):
                    self._new.append(s.final)
            self._files, self._dirs, self._new = [], [], []

    def discard(self) -> None:
        """Remove every temp, every file published under a free name and every folder made."""
        for s in self._files:
            self._close(s)
            with contextlib.suppress(OSError):
                os.unlink(s.tmp)
        for p in self._new:
            with contextlib.suppress(OSError):
                os.unlink(p)
        for d in reversed(self._dirs):
            with contextlib.suppress(OSError):
                os.rmdir(d)
        self._files, self._dirs, self._new = [], [], []

    @staticmethod
    def _close(s: _Staged) -> None:
        if s.fd is not None:
            fd, s.fd = s.fd, None
            os.close(fd)


def _link_new(tmp: Path, final: Path) -> bool | None:
    """Publish ``tmp`` at ``final`` only if that name is free: a hard link, then the temp
    name removed (True); False when ``final`` already holds the same bytes (the temp is
    removed); None when the file system has no hard links (the caller renames instead)."""
    from .external import same_bytes

    try:
        os.link(tmp, final)
    except FileExistsError:
        if not same_bytes(tmp, final):
            raise OpshiftError(f"{final}: a different file appeared there while opshift was "
                               "writing; --force replaces it") from None
        os.unlink(tmp)
        return False
    except OSError:
        return None
    os.unlink(tmp)
    return True


@contextlib.contextmanager
def staging() -> Iterator[Staging]:
    """A :class:`Staging` published when the block succeeds, else discarded."""
    st = Staging()
    try:
        yield st
        st.publish()
    except BaseException:
        st.discard()
        raise

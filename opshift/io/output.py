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
import errno
import os
import signal
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import onnx

from opshift.errors import ModelLoadError, OpshiftError
from opshift.io.tensors import external_files, open_regular

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


# -- external data files beside the output, one kernel-side copy each ----------------------

#: Bytes a copy asks the kernel for at a time: large enough that the calls cost nothing next
#: to the copy, small enough that a signal is acted on within milliseconds.
_CHUNK = 8 << 20

#: errno values meaning "the kernel cannot copy between these two files this way".
_NO_KERNEL_COPY = (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EBADF,
                   errno.ETXTBSY)


def copy_file(src: Path, dst_fd: int, loc: str) -> None:
    """Copy regular file ``src`` (a resolved path inside the model's folder) into the open,
    empty file ``dst_fd``, as ``cp`` does: ``copy_file_range``, which shares the blocks
    (reflink) or copies on the server where the file system can, else copies inside the
    kernel; ``sendfile`` where it is refused; a plain copy where neither works. The data
    never passes through Python when the kernel copies it."""
    with open_regular(src, loc, None) as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        offset = 0
        for kernel_copy in _KERNEL_COPIES:
            try:
                offset = kernel_copy(fd, dst_fd, size)
                break
            except OSError as e:  # (the next way starts again from the first byte)
                if e.errno not in _NO_KERNEL_COPY:
                    raise
        if offset < size:  # a file that grew, or no kernel copy here: the rest, plainly
            os.lseek(dst_fd, offset, os.SEEK_SET)
            f.seek(offset)
            while chunk := f.read(1 << 20):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(dst_fd, view):]


def _copy_range(src_fd: int, dst_fd: int, size: int) -> int:
    """Bytes copied by ``copy_file_range``, from the start of both files."""
    offset = 0
    while offset < size:
        n = os.copy_file_range(src_fd, dst_fd, min(size - offset, _CHUNK), offset, offset)
        if n == 0:
            break
        offset += n
    return offset


def _send(src_fd: int, dst_fd: int, size: int) -> int:
    """Bytes copied by ``sendfile``, from the start of both files (``dst_fd`` is at 0)."""
    offset = 0
    while offset < size:
        n = os.sendfile(dst_fd, src_fd, offset, min(size - offset, _CHUNK))
        if n == 0:
            break
        offset += n
    return offset


#: The kernel's ways to copy that this platform has, best first.
_KERNEL_COPIES = tuple(way for way, call in ((_copy_range, "copy_file_range"),
                                             (_send, "sendfile")) if hasattr(os, call))


def same_bytes(a: Path, b: Path) -> bool:
    """Whether regular files ``a`` and ``b`` hold the same bytes, compared a MiB at a time
    (neither followed if it is a link: a link is never the same)."""
    try:
        with open_regular(a, str(a), None) as fa, open_regular(b, str(b), None) as fb:
            if os.fstat(fa.fileno()).st_size != os.fstat(fb.fileno()).st_size:
                return False
            while True:
                x, y = fa.read(1 << 20), fb.read(1 << 20)
                if x != y:
                    return False
                if not x:
                    return True
    except ModelLoadError:
        return False


def stage_data_files(model: onnx.ModelProto, source_dir: Path, out: Path, staging, *,
                     force: bool = False) -> None:
    """Stage, in ``staging`` (an :class:`opshift.io.output.Staging`), a copy of each external
    data file of ``model`` (relative to ``source_dir``) at its location beside ``out``.

    The model's own folder: nothing to copy. A file already there that holds the same bytes
    is kept; a different file, or a link, is replaced only with ``force``, else a one-line
    error that says so. Folders on the way are made (never followed if they are links).
    """
    from opshift.io.output import write_error

    files = external_files(model, source_dir)
    dest = out.parent
    target = dest.resolve() / out.name
    if target in files.values():
        raise OpshiftError(f"{out}: is an external data file of the input model; write the "
                           "output elsewhere (the input is never modified)")
    if dest.resolve() == source_dir.resolve():
        return
    placed: set[str] = set()
    for loc, src in files.items():
        rel = os.path.normpath(loc)
        if rel == ".." or rel.startswith(f"..{os.sep}"):
            raise OpshiftError(f"{out}: external data location {loc!r} leads out of the "
                               "output folder")
        if rel in placed:
            continue
        placed.add(rel)
        dst = dest / rel
        if dest.resolve() / rel == target:
            raise OpshiftError(f"{out}: the output model and its external data file {loc!r} "
                               "would be the same file")
        _make_folders(dest, Path(rel).parent, staging)
        replace = _existing(dst, src, force)
        if replace is None:
            continue
        fd = staging.create(dst, replace=replace)
        try:
            copy_file(src, fd, loc)
        except OSError as e:
            raise write_error(dst, e) from e


def _make_folders(dest: Path, rel: Path, staging) -> None:
    path = dest
    for part in rel.parts:
        path = path / part
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            staging.make_folder(path)
            continue
        if stat.S_ISLNK(st.st_mode):
            raise OpshiftError(f"{path}: is a symbolic link; opshift does not write through "
                               "links")
        if not stat.S_ISDIR(st.st_mode):
            raise OpshiftError(f"{path}: exists and is not a folder")


def _existing(dst: Path, src: Path, force: bool) -> bool | None:
    """What is at ``dst`` now: None (a file with the same bytes as ``src``: keep it), False
    (nothing: a new file), True (a file or link to replace, given ``force``)."""
    try:
        st = os.lstat(dst)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        if not force:
            raise OpshiftError(f"{dst}: exists and is a symbolic link; opshift does not write "
                               "through links (--force replaces the link)")
        return True
    if not stat.S_ISREG(st.st_mode):
        raise OpshiftError(f"{dst}: exists and is not a regular file")
    if os.path.samestat(st, os.stat(src)) or same_bytes(src, dst):
        return None
    if not force:
        raise OpshiftError(f"{dst}: a different external data file is already there; "
                           "--force replaces it")
    return True

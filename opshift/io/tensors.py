"""Tensor data: the one way opshift reads a tensor's value, and finds a model's external files.

onnx's own helpers read external data relative to whatever folder they are given, the
working directory by default, and follow any ``location``. opshift reads a tensor's value
only through :func:`tensor_array`: external data is read from inside the model's folder only
(a location that leaves it, through ``..``, an absolute path or a link, is refused), its
offset and length must be byte counts, and a tensor whose model folder is unknown (a model
built in memory) is refused rather than read from the working directory.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import onnx
from onnx.external_data_helper import _get_all_tensors, uses_external_data

from opshift.errors import ModelLoadError, OpshiftError

#: How data files are opened for reading: never through a link, never blocking (a FIFO).
_READ = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
         | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))

#: A byte count as ONNX writes it. (``str.isdigit`` accepts other scripts' digits, and
#: ``int`` signs, spaces and underscores.)
_COUNT = re.compile(r"[0-9]+")


class Entry(NamedTuple):
    """Where a tensor's external data is: ``length`` None means up to the end of the file."""

    location: str
    offset: int
    length: int | None


def entry(t: onnx.TensorProto, origin: str | None = None) -> Entry:
    """The external data entry of ``t``, checked: a non-empty location without NUL bytes,
    an offset and a length (when given) that are non-negative integers; else a one-line
    ModelLoadError naming ``origin`` (the model file) and the tensor."""
    info = {e.key: e.value for e in t.external_data}
    where = f"{_prefix(origin)}tensor {t.name!r}: external data"
    loc = info.get("location", "")
    if not loc:
        raise ModelLoadError(f"{where} has no location (a file name is required)")
    if "\x00" in loc:
        raise ModelLoadError(f"{where} location {loc!r} holds a NUL byte; not a file name")
    counts = []
    for key in ("offset", "length"):
        v = info.get(key)
        if v is not None and not _COUNT.fullmatch(v):
            raise ModelLoadError(f"{where} {key} {v!r} is not a byte count (a non-negative "
                                 "integer)")
        counts.append(None if v is None else int(v))
    return Entry(loc, counts[0] or 0, counts[1])


def _prefix(origin: str | None) -> str:
    return f"{origin}: " if origin else ""


def resolve_location(base_dir: Path, location: str, origin: str | None,
                     tensor_name: str) -> Path:
    """The absolute file for ``location``; refuse anything outside ``base_dir``."""
    base = base_dir.resolve()
    if "\x00" in location or not location or os.path.isabs(location):
        raise ModelLoadError(f"{_prefix(origin)}tensor {tensor_name!r}: external data location "
                             f"{location!r} must be a relative path inside the model's folder")
    target = (base / location).resolve()
    if target != base and base not in target.parents:
        raise ModelLoadError(f"{_prefix(origin)}tensor {tensor_name!r}: external data location "
                             f"{location!r} points outside the model's folder; refused")
    return target


def external_files(model: onnx.ModelProto, base_dir: Path, origin: str | None = "<model>"
                   ) -> dict[str, Path]:
    """location -> resolved file, for every external tensor, after checking each entry
    (:func:`entry`), that each file is a regular file inside ``base_dir``, and that it is
    long enough for the offsets/lengths the tensors declare."""
    needed: dict[str, int] = {}
    files: dict[str, Path] = {}
    for t in _get_all_tensors(model):
        if not uses_external_data(t):
            continue
        e = entry(t, origin)
        files[e.location] = resolve_location(base_dir, e.location, origin, t.name)
        needed[e.location] = max(needed.get(e.location, 0), e.offset + (e.length or 0))
    for loc, f in files.items():
        size = _regular_size(f, loc, origin)
        if size < needed[loc]:
            raise ModelLoadError(f"{_prefix(origin)}external data file {loc!r} is shorter than "
                                 f"declared ({size} bytes, tensors need {needed[loc]})")
    return files


def _regular_size(f: Path, loc: str, origin: str | None) -> int:
    try:
        st = f.stat()
    except OSError:
        raise ModelLoadError(f"{_prefix(origin)}external data file {loc!r} is missing") from None
    if not stat.S_ISREG(st.st_mode):
        raise ModelLoadError(f"{_prefix(origin)}external data file {loc!r} is not a regular "
                             "file")
    return st.st_size


# -- reading ----------------------------------------------------------------------------------

def tensor_array(t: onnx.TensorProto, base_dir: str | os.PathLike | None = None,
                 origin: str | None = None) -> np.ndarray:
    """The value of ``t``. Every read of tensor data in opshift goes through here.

    External data is read from ``base_dir``, the folder of the model file, and only from
    inside it (see :func:`read_external`); with no folder (a model built or loaded in memory)
    an external tensor is a one-line OpshiftError naming it, never a read relative to the
    working directory. ``origin`` (the model file) prefixes error messages.
    """
    from onnx import numpy_helper

    if not uses_external_data(t):
        try:
            return numpy_helper.to_array(t)
        except (ValueError, TypeError, KeyError, UnicodeDecodeError) as e:
            from opshift.io.readable import undecodable

            raise ModelLoadError(f"{_prefix(origin)}{undecodable(t, e)}") from e
    loaded = onnx.TensorProto()
    loaded.CopyFrom(t)
    _fill(loaded, read_external(t, base_dir, origin))
    try:
        return numpy_helper.to_array(loaded)
    except ValueError as e:
        raise ModelLoadError(f"{_prefix(origin)}tensor {t.name!r}: its external data "
                             f"({len(loaded.raw_data)} bytes) does not hold a tensor of shape "
                             f"{list(t.dims)}") from e


def _fill(t: onnx.TensorProto, data: bytes) -> None:
    t.raw_data = data
    t.data_location = onnx.TensorProto.DEFAULT
    del t.external_data[:]


def read_external(t: onnx.TensorProto, base_dir: str | os.PathLike | None,
                  origin: str | None = None) -> bytes:
    """The bytes of external tensor ``t``, read from its file inside ``base_dir`` (a regular
    file, never a link leading out); one-line errors for everything that can be wrong."""
    e = entry(t, origin)
    if base_dir is None:
        raise OpshiftError(f"{_prefix(origin)}tensor {t.name!r} keeps its data in external "
                           f"file {e.location!r}, and the model's folder is not known (load "
                           "the model from its file, or load its external data first)")
    path = resolve_location(Path(base_dir), e.location, origin, t.name)
    with open_regular(path, e.location, origin) as f:
        size = os.fstat(f.fileno()).st_size
        end = size if e.length is None else e.offset + e.length
        if max(e.offset, end) > size:
            raise ModelLoadError(f"{_prefix(origin)}external data file {e.location!r} is "
                                 f"shorter than declared ({size} bytes, tensor {t.name!r} "
                                 f"needs {max(e.offset, end)})")
        f.seek(e.offset)
        return f.read(end - e.offset)


@contextlib.contextmanager
def open_regular(path: Path, loc: str, origin: str | None) -> Iterator:
    """``path`` open for reading: not through a link (``path`` is resolved), never a FIFO or
    device (opened without blocking, then checked)."""
    try:
        fd = os.open(path, _READ)
    except FileNotFoundError:
        raise ModelLoadError(f"{_prefix(origin)}external data file {loc!r} is missing") from None
    except OSError as e:
        raise ModelLoadError(f"{_prefix(origin)}external data file {loc!r}: cannot read: "
                             f"{e.strerror or e}") from None
    f = os.fdopen(fd, "rb")
    with f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ModelLoadError(f"{_prefix(origin)}external data file {loc!r} is not a "
                                 "regular file")
        yield f


def load_external_data_safely(model: onnx.ModelProto, base_dir: Path,
                              origin: str | None) -> None:
    """Load every external tensor into ``model`` after the checks of :func:`external_files`,
    each read by :func:`read_external`."""
    external_files(model, base_dir, origin)
    for t in _get_all_tensors(model):
        if uses_external_data(t):
            _fill(t, read_external(t, base_dir, origin))


def read_through_opshift(ir_model, base_dir: str | os.PathLike | None) -> None:
    """Make every external tensor of an ``onnx_ir`` model (initializers and Constant
    values, in every graph and function) read its data through :func:`tensor_array`:
    onnx_ir's own external tensors read relative to the working directory. Each becomes a
    lazy tensor, read only if something asks for its value."""
    import onnx_ir as ir

    def lazy(tensor):
        if not isinstance(tensor, ir.ExternalTensor):
            return None
        proto = ir.serde.serialize_tensor(tensor)  # the entry only: no data is read
        return ir.LazyTensor(lambda: ir.Tensor(tensor_array(proto, base_dir)),
                             tensor.dtype, tensor.shape, name=tensor.name)

    def initializers(g) -> None:
        for v in getattr(g, "initializers", {}).values():  # (a function has none)
            new = lazy(v.const_value)
            if new is not None:
                v.const_value = new

    for root in (ir_model.graph, *ir_model.functions.values()):
        initializers(root)
        for node in ir.traversal.RecursiveGraphIterator(root, enter_graph=initializers):
            for a in list(node.attributes.values()):
                if a.type == ir.AttributeType.TENSOR:
                    new = lazy(a.value)
                    if new is not None:
                        node.attributes[a.name] = ir.AttrTensor(a.name, new)

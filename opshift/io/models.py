"""Loading and saving models safely.

* Loading turns every way a file can be wrong into a one-line :class:`ModelLoadError`.
* External data is left on disk unless a caller asks for it (the evaluator does).
* Saving is atomic: temp files in the destination folder, renamed into place when all are
  written (:mod:`opshift.io.output`); on failure nothing is left behind. Input files are only
  ever opened for reading.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import onnx
from google.protobuf.message import DecodeError

from opshift.errors import ModelLoadError, OpshiftError

ModelLike = Any  # onnx.ModelProto | onnx_ir.Model | str | os.PathLike


def _read_bytes(path: Path) -> bytes:
    if not path.exists():
        if path.is_symlink():
            raise ModelLoadError(f"{path}: dangling symbolic link (to {os.readlink(path)}, "
                                 "which does not exist)")
        raise ModelLoadError(f"{path}: no such file")
    if path.is_dir():
        raise ModelLoadError(f"{path}: is a directory, not an ONNX file")
    kind = _not_regular(path)
    if kind:  # never opened: reading a FIFO waits for a writer that may never come
        raise ModelLoadError(f"{path}: is {kind}, not a regular file (to read a model from "
                             "a pipe, give '-' and pipe it to stdin)")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot read: {e.strerror or e}") from e
    if not data:
        raise ModelLoadError(f"{path}: empty file (0 bytes), not an ONNX model")
    return data


def _not_regular(path: Path) -> str | None:
    """What ``path`` is when it is not a regular file (after symlinks): 'a FIFO', ..."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # the read reports it
    for test, kind in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return kind
    return None


def parse_model_bytes(data: bytes, origin: str = "<bytes>") -> onnx.ModelProto:
    """Parse and sanity-check a serialized model; raise ModelLoadError naming ``origin``."""
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        if "depth" in str(e).lower():  # upb: "Exceeded upb_DecodeOptions_MaxDepth"
            raise ModelLoadError(
                f"{origin}: nested too deeply: protobuf refuses messages nested more than "
                "100 levels (graphs in If/Loop/Scan bodies inside each other)") from e
        if len(data) >= 1 << 31:  # protobuf reads no message of 2 GiB or more
            raise ModelLoadError(
                f"{origin}: {len(data) / (1 << 30):.1f} GiB in one file, over protobuf's 2 GiB "
                "limit for a message: store its weights as external data (onnx.save(model, "
                "path, save_as_external_data=True)) and give that file") from e
        raise ModelLoadError(
            f"{origin}: not an ONNX model (protobuf parse failed; truncated or not ONNX)"
        ) from e
    check_model_shape(model, origin)
    return model


def check_model_shape(model: onnx.ModelProto, origin: str = "<model>") -> None:
    """Reject protobufs that parsed but are not usable ONNX models: no graph, an IR version
    or opset imports the installed onnx does not know (:mod:`opshift.io.readable`)."""
    from opshift.io import readable

    if not model.HasField("graph") or model.ir_version <= 0:
        raise ModelLoadError(f"{origin}: not an ONNX model (no graph or no IR version)")
    p = readable.ir_version_problem(model.ir_version)
    if p is not None:
        raise ModelLoadError(f"{origin}: {p}")
    if not model.opset_import:
        raise ModelLoadError(f"{origin}: model has no opset import")
    p = readable.opset_import_problem(model.opset_import)
    if p is not None:
        raise ModelLoadError(f"{origin}: {p}")
    from opshift.opsets import MAX_OPSET, normalize_domain

    for imp in model.opset_import:
        if normalize_domain(imp.domain) == "" and not 1 <= imp.version <= MAX_OPSET:
            raise ModelLoadError(
                f"{origin}: default-domain opset {imp.version} is outside 1..{MAX_OPSET} "
                f"(the installed onnx {onnx.__version__})"
            )


def load(path: str | os.PathLike, *, load_external_data: bool = False) -> onnx.ModelProto:
    """Load an ONNX file. External data stays on disk unless ``load_external_data``."""
    path = Path(path)
    model = parse_model_bytes(_read_bytes(path), str(path))
    if load_external_data and has_external_data(model):
        from opshift.io.tensors import load_external_data_safely

        load_external_data_safely(model, path.parent, origin=str(path))
    return model


def has_external_data(model: onnx.ModelProto) -> bool:
    """Whether any tensor (initializer or tensor attribute, in any graph or function) lives
    in external data. Reads only the attributes of nodes that can hold tensors."""
    from onnx.external_data_helper import uses_external_data

    from opshift.opsets import may_hold_tensors

    def nodes(ns) -> bool:
        for n in ns:
            if n.domain in ("", "ai.onnx") and not may_hold_tensors(n.op_type):
                continue
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR and uses_external_data(a.t):
                    return True
                if a.type == onnx.AttributeProto.TENSORS and any(
                        uses_external_data(t) for t in a.tensors):
                    return True
                if a.type == onnx.AttributeProto.GRAPH and graph(a.g):
                    return True
                if a.type == onnx.AttributeProto.GRAPHS and any(graph(g) for g in a.graphs):
                    return True
        return False

    def graph(g: onnx.GraphProto) -> bool:
        return any(uses_external_data(t) for t in g.initializer) or nodes(g.node)

    return graph(model.graph) or any(nodes(f.node) for f in model.functions)


def to_proto(model: ModelLike, *, load_external_data: bool = False
             ) -> tuple[onnx.ModelProto, str, Path | None]:
    """Normalize a model argument.

    Returns ``(proto, kind, base_dir)``: ``kind`` is ``'proto'``, ``'ir'`` or ``'path'`` so
    the caller can return the kind it was given; ``base_dir`` is where external data lives.
    A ModelProto passed in is returned as is (callers that mutate must copy).
    """
    if isinstance(model, onnx.ModelProto):
        check_model_shape(model)
        return model, "proto", None
    if isinstance(model, (str, os.PathLike)):
        p = Path(model)
        return load(p, load_external_data=load_external_data), "path", p.parent
    try:
        import onnx_ir as ir
    except ImportError:  # pragma: no cover - onnx_ir is a dependency
        ir = None
    if ir is not None and isinstance(model, ir.Model):
        proto = ir.serde.serialize_model(model)
        check_model_shape(proto)
        return proto, "ir", None
    raise OpshiftError(
        f"expected an onnx.ModelProto, an onnx_ir.Model or a path, got {type(model).__name__}"
    )


def working_copy(model: ModelLike) -> tuple[onnx.ModelProto, str, Path | None]:
    """:func:`to_proto` for a job that edits the model in place: a ModelProto passed in is
    copied (the caller's object is never touched); a path or an onnx_ir.Model already gives
    a fresh one, which is not copied again."""
    proto, kind, base_dir = to_proto(model)
    if kind == "proto":
        copy = onnx.ModelProto()
        copy.CopyFrom(proto)
        proto = copy
    return proto, kind, base_dir


def from_proto(proto: onnx.ModelProto, kind: str) -> Any:
    """Inverse of :func:`to_proto` for the result of an operation."""
    if kind == "ir":
        import onnx_ir as ir

        return ir.serde.deserialize_model(proto)
    return proto


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """Yield a new temp file beside ``path``, open for writing; when the block succeeds it
    is renamed over ``path``, else removed (see :mod:`opshift.io.output`). A failed write is a
    one-line error naming ``path``."""
    from opshift.io import output

    path = Path(path)
    output.check_folder(path)
    with output.staging() as st:
        fd = st.create(path, replace=True)
        try:
            with open(fd, "wb", closefd=False) as out:
                yield out
        except OSError as e:
            raise output.write_error(path, e) from e


#: protobuf reads no message of this size or more
PROTOBUF_LIMIT = 1 << 31


def serialized(model: onnx.ModelProto) -> tuple[int, Iterator[bytes]]:
    """``model.SerializeToString()`` as its size and pieces whose concatenation is those
    bytes. A model whose graph holds at least :data:`_STREAMED` bytes in its initializers
    and nodes (weights as Constants) comes in field order, those elements one at a time, so
    that writing a model of GBs holds one element's bytes at a time, not a second and third
    copy of the whole (protobuf's serializer holds its buffer and the bytes it copies out:
    3x the model at the peak); any other field is serialized alone. A smaller model, one of
    more than :data:`_ONE_BY_ONE` such elements (small ones) or with fields this onnx does not
    know comes whole."""
    from google.protobuf import unknown_fields

    g = model.graph
    heavy = [f for f in g.DESCRIPTOR.fields
             if f.name in ("initializer", "sparse_initializer", "node")]
    sizes = {} if not model.HasField("graph") or len(unknown_fields.UnknownFieldSet(model)) \
        or len(unknown_fields.UnknownFieldSet(g)) or sum(
            len(getattr(g, f.name)) for f in heavy) > _ONE_BY_ONE else {
        f.number: [e.ByteSize() for e in getattr(g, f.name)] for f in heavy}
    if sum(map(sum, sizes.values())) < _STREAMED:
        data = model.SerializeToString()
        return len(data), iter((data,))
    graph = [part for f in sorted(g.DESCRIPTOR.fields, key=lambda f: f.number)
             for part in _field(g, f, sizes.get(f.number))]
    graph_size = sum(size for size, _ in graph)
    parts: list[tuple[int, Any]] = []
    for f in sorted(model.DESCRIPTOR.fields, key=lambda f: f.number):
        if f.name == "graph":
            head = _key(f.number) + _varint(graph_size)
            parts += [(len(head), (head,)), *graph]
        else:
            parts += _field(model, f)
    return sum(size for size, _ in parts), (b for _, chunks in parts for b in _chunks(chunks))


#: the bytes of initializers and nodes from which a model is written element by element
_STREAMED = 64 << 20
#: initializers and nodes past which it is not (small ones: a Python call each would cost
#: more than the copy it saves)
_ONE_BY_ONE = 10_000


def _field(msg, f, sizes: list[int] | None = None) -> list[tuple[int, Any]]:
    """A field of ``msg`` as (size, pieces): with ``sizes`` (of its elements) one element at
    a time, their bytes made when written; else the field encoded alone."""
    repeated = f.is_repeated if hasattr(f, "is_repeated") else f.label == f.LABEL_REPEATED
    value = getattr(msg, f.name)
    if repeated and not len(value) or not repeated and not msg.HasField(f.name):
        return []
    if sizes is not None:
        return [(len(head) + size, (head, e)) for e, size in zip(value, sizes)
                for head in (_key(f.number) + _varint(size),)]
    alone = type(msg)()
    if repeated:
        getattr(alone, f.name).extend(value)
    elif f.type == f.TYPE_MESSAGE:
        getattr(alone, f.name).CopyFrom(value)
    else:
        setattr(alone, f.name, value)
    data = alone.SerializeToString()
    return [(len(data), (data,))]


def _chunks(pieces) -> Iterator[bytes]:
    for p in pieces:
        yield p if isinstance(p, bytes) else p.SerializeToString()


def _key(number: int) -> bytes:
    return _varint(number << 3 | 2)  # (wire type 2: length-delimited)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def write_serialized(model: onnx.ModelProto, write, where: str) -> int:
    """Write ``model`` through ``write(bytes)`` in :func:`serialized`'s pieces; return the size.
    A model of 2 GiB or more is an OpshiftError naming ``where`` before anything is written
    (protobuf could not read it back)."""
    try:
        size, pieces = serialized(model)
    except ValueError as e:  # protobuf's own refusal, serializing whole
        raise OpshiftError(f"{where}: model too large to serialize: {e}") from e
    if size >= PROTOBUF_LIMIT:
        raise OpshiftError(f"{where}: model too large to serialize: {size / (1 << 30):.1f} "
                           "GiB, over protobuf's 2 GiB limit for a message; keep its weights "
                           "in external data")
    for piece in pieces:
        write(piece)
    return size


def save(model: onnx.ModelProto, path: str | os.PathLike,
         source_dir: str | os.PathLike | None = None, *, force: bool = False) -> None:
    """Write ``model`` to ``path``, replacing a file there, atomically: nothing is written
    when anything fails (see :mod:`opshift.io.output`).

    Tensors that still refer to external data (relative to ``source_dir``) get their data
    files placed beside ``path`` at the same relative locations
    (:func:`opshift.io.output.stage_data_files`): a file already there with the same bytes
    is kept, a different one replaced only with ``force``.
    """
    from opshift.io import output

    path = Path(path)
    output.check_folder(path)
    with output.staging() as st:
        if source_dir is not None:  # only the tensors still referring to it are placed
            from opshift.io.output import stage_data_files

            stage_data_files(model, Path(source_dir), path, st, force=force)
        fd = st.create(path, replace=True)
        write_serialized(model, lambda b: output.write_all(fd, b, path), str(path))

"""Loading and saving models safely.

* Loading turns every way a file can be wrong into a one-line :class:`ModelLoadError`.
* External data is left on disk unless a caller asks for it (the evaluator does).
* Saving is atomic: a temp file in the destination folder, then ``os.replace``; on failure
  nothing is left behind. Input files are only ever opened for reading.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import onnx
from google.protobuf.message import DecodeError

from .errors import ModelLoadError, OpshiftError

ModelLike = Any  # onnx.ModelProto | onnx_ir.Model | str | os.PathLike


def _read_bytes(path: Path) -> bytes:
    if not path.exists():
        raise ModelLoadError(f"{path}: no such file")
    if path.is_dir():
        raise ModelLoadError(f"{path}: is a directory, not an ONNX file")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot read: {e.strerror or e}") from e
    if not data:
        raise ModelLoadError(f"{path}: empty file (0 bytes), not an ONNX model")
    return data


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
        raise ModelLoadError(
            f"{origin}: not an ONNX model (protobuf parse failed; truncated or not ONNX)"
        ) from e
    check_model_shape(model, origin)
    return model


def check_model_shape(model: onnx.ModelProto, origin: str = "<model>") -> None:
    """Reject protobufs that parsed but are not usable ONNX models: no graph, an IR version
    or opset imports the installed onnx does not know (:mod:`opshift.wellformed`)."""
    from . import wellformed

    if not model.HasField("graph") or model.ir_version <= 0:
        raise ModelLoadError(f"{origin}: not an ONNX model (no graph or no IR version)")
    p = wellformed.ir_version_problem(model.ir_version)
    if p is not None:
        raise ModelLoadError(f"{origin}: {p}")
    if not model.opset_import:
        raise ModelLoadError(f"{origin}: model has no opset import")
    p = wellformed.opset_import_problem(model.opset_import)
    if p is not None:
        raise ModelLoadError(f"{origin}: {p}")
    from .opsets import MAX_OPSET, normalize_domain

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
        from .external import load_external_data_safely

        load_external_data_safely(model, path.parent, origin=str(path))
    return model


class Loaded(NamedTuple):
    """A model as every command opens it, and the folder its external data is relative to
    (None when it has none: then :func:`save` need not look for any)."""

    model: onnx.ModelProto
    source_dir: Path | None


def open_checked(path: str | os.PathLike, *, allow: Iterable[str] = (),
                 load_external_data: bool = False, census=None) -> Loaded:
    """:func:`load`, then the checks every command runs before it rewrites anything.

    External data must sit inside the model's folder and be as long as declared, and the
    graph must pass :func:`opshift.validate.check` (problem kinds in ``allow`` excepted),
    which fills ``census`` (an :class:`opshift.validate.Census`) when given.
    """
    from . import validate
    from .external import external_files

    path = Path(path)
    model = load(path, load_external_data=load_external_data)
    if census is None:  # the walk's external-data finding spares a second walk
        census = validate.Census(full=False)
    validate.check(model, str(path), allow=allow, census=census)
    if census.external and not load_external_data:
        external_files(model, path.parent, str(path))
    return Loaded(model, path.resolve().parent if census.external or load_external_data
                  else None)


def load_checked(path: str | os.PathLike, *, allow: Iterable[str] = (),
                 load_external_data: bool = False) -> onnx.ModelProto:
    """:func:`open_checked`'s model."""
    return open_checked(path, allow=allow, load_external_data=load_external_data).model


def has_external_data(model: onnx.ModelProto) -> bool:
    """Whether any tensor (initializer or tensor attribute, in any graph or function) lives
    in external data. Reads only the attributes of nodes that can hold tensors."""
    from onnx.external_data_helper import uses_external_data

    from .opsets import may_hold_tensors

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


def from_proto(proto: onnx.ModelProto, kind: str) -> Any:
    """Inverse of :func:`to_proto` for the result of an operation."""
    if kind == "ir":
        import onnx_ir as ir

        return ir.serde.deserialize_model(proto)
    return proto


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """Yield a new file beside ``path``, open for writing; when the block succeeds it is
    closed and renamed over ``path``, else closed and removed."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise OpshiftError(f"{path}: output folder {str(folder)!r} does not exist")
    if path.is_dir():
        raise OpshiftError(f"{path}: output path is a directory")
    tmp, fd = _create_temp(path, folder)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _create_temp(path: Path, folder: Path) -> tuple[Path, int]:
    """A new file ``.<name>.<random>.tmp`` in ``folder`` and its descriptor, with the
    permissions a new file normally gets (0666 less the umask, applied by the system: no
    umask juggling, which would race with other threads)."""
    for _ in range(100):
        tmp = folder / f".{path.name}.{os.urandom(6).hex()}.tmp"
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        except OSError as e:
            raise OpshiftError(f"{path}: cannot write to folder {str(folder)!r}: "
                               f"{e.strerror or e}") from e
    raise OpshiftError(f"{path}: cannot create a temporary file in {str(folder)!r}")


#: protobuf refuses to parse a message of 2 GiB or more, so nothing larger is written.
MAX_PROTO_BYTES = (1 << 31) - 1


def save_parts(parts: Sequence[bytes | memoryview], path: str | os.PathLike) -> None:
    """Write an already serialized model given as consecutive parts (without external data
    to place) atomically, part after part: no buffer of the whole output is made."""
    path = Path(path)
    size = sum(map(len, parts))
    if size > MAX_PROTO_BYTES:
        raise OpshiftError(f"{path}: model too large to serialize: {size} bytes is over "
                           "protobuf's 2 GiB limit (keep the weights in external data)")
    with atomic_output(path) as out:
        write_parts(out, parts)


#: Bytes per write call of :func:`write_parts`, from 64 KiB for small outputs to 1 MiB.
WRITE_CHUNK = (1 << 16, 1 << 20)


def write_parts(out: BinaryIO, parts: Sequence[bytes | memoryview]) -> None:
    """Write ``parts`` in order, joined into chunks of a sixteenth of the whole (64 KiB to
    1 MiB, :data:`WRITE_CHUNK`).

    Joining everything first would copy the output into one new buffer of its size, which
    glibc maps afresh: a page fault per 4 KiB (~4 us each in a VM: 56 of them for a
    1,000-node model's 200 KB, 9,000 for 100k nodes). A chunk's buffer is freed before the
    next is made, so the chunks reuse one region. Each write call costs ~17 us more, hence
    chunks that grow with the output (measured: 200 KB 0.21 -> 0.15 ms; 30 MB 31 -> 14 ms).
    """
    low, high = WRITE_CHUNK
    limit = min(high, max(low, sum(map(len, parts)) >> 4))
    chunk: list[bytes | memoryview] = []
    size = 0
    for p in parts:
        n = len(p)
        if n >= limit:
            if chunk:
                out.write(b"".join(chunk))
                chunk, size = [], 0
            out.write(p)
            continue
        chunk.append(p)
        size += n
        if size >= limit:
            out.write(b"".join(chunk))
            chunk, size = [], 0
    if chunk:
        out.write(b"".join(chunk))


def save(model: onnx.ModelProto, path: str | os.PathLike,
         source_dir: str | os.PathLike | None = None) -> None:
    """Write ``model`` to ``path`` atomically.

    Tensors that still refer to external data (relative to ``source_dir``) get their data
    files placed beside ``path`` at the same relative locations, see :mod:`opshift.external`.
    """
    path = Path(path)
    created: list[Path] = []
    try:
        if source_dir is not None:  # only the tensors still referring to it are placed
            from .external import place_external_data

            created = place_external_data(model, Path(source_dir), path.parent)
        with atomic_output(path) as out:
            try:
                data = model.SerializeToString()
            except ValueError as e:  # > 2 GiB without external data
                raise OpshiftError(f"{path}: model too large to serialize: {e}") from e
            out.write(data)
    except BaseException:
        for p in created:
            with contextlib.suppress(OSError):
                p.unlink()
        raise

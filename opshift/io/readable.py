"""What the installed onnx and numpy can read of a parsed protobuf, whatever its graph says.

protobuf parses many byte strings that no ONNX tool can use: names that are not UTF-8
(python's protobuf hands them back as ``bytes``), element types the installed onnx has never
heard of, negative or absurd dimensions, tensors whose data does not fit their dims, an IR
version outside what onnx knows, a domain imported twice at two versions. Each check here
returns a one-line description of the first such problem, or None: loading runs the model's
(:func:`opshift.io.models.check_model_shape`), reading a tensor explains why it cannot be
decoded (:func:`opshift.io.tensors.tensor_array`), and the structural check
(:mod:`opshift.check.wellformed`, :mod:`opshift.check.structure`) runs them during its walk
and names the graph and node.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import onnx

#: Element types the installed onnx defines (UNDEFINED, 0, included: see
#: :func:`opshift.check.wellformed.type_problem`).
KNOWN_ELEM_TYPES = frozenset(onnx.TensorProto.DataType.values())
#: IR versions the installed onnx knows: 3 (the first with opset imports) to its own.
MIN_IR_VERSION = min(row[1] for row in onnx.helper.VERSION_TABLE)
MAX_IR_VERSION = onnx.IR_VERSION
#: The most elements a tensor may declare: numpy cannot index more (and no file holds them).
MAX_ELEMENTS = (1 << 63) - 1
#: Raw data up to this many bytes is measured by the structural check (a copy that costs
#: nothing next to the walk); larger raw data where it is read
#: (:func:`opshift.io.tensors.tensor_array`).
RAW_CHECK_LIMIT = 1 << 16
#: The most elements a tensor stored in the file itself can have (2 GiB of 4-bit values).
MAX_IN_FILE = 1 << 32


_T = onnx.TensorProto
#: Types packed several to a stored value (4-bit, 2-bit, 6-bit): their count is not checked.
_PACKED = {getattr(_T, n) for n in ("UINT4", "INT4", "FLOAT4E2M1", "UINT2", "INT2",
                                     "FLOAT6E2M3", "FLOAT6E3M2") if hasattr(_T, n)}


def _typed_fields() -> dict[int, tuple[str, int]]:
    """data_type -> (typed field, values per element: two for complex)."""
    out = {}
    for t in KNOWN_ELEM_TYPES - _PACKED - {_T.UNDEFINED}:
        out[t] = (onnx.helper.tensor_dtype_to_field(t),
                  2 if t in (_T.COMPLEX64, _T.COMPLEX128) else 1)
    return out


_FIELD = _typed_fields()
_DEFINED = KNOWN_ELEM_TYPES - {_T.UNDEFINED}
_EXTERNAL = _T.EXTERNAL


def text_problem(values: Iterable[str | bytes]) -> bytes | None:
    """The first of ``values`` that is not valid UTF-8 (protobuf returns it as bytes), or
    None. Runs in C when all are text (the common case)."""
    values = values if isinstance(values, (list, tuple, set, frozenset)) else list(values)
    if set(map(type, values)) <= {str}:  # (reads each value's type, not its text)
        return None
    return next((v for v in values if not isinstance(v, str)), None)


def not_text(what: str, value: bytes) -> str:
    """The message for a name that is not UTF-8."""
    return f"{what} {value!r} is not valid UTF-8 text"


def elem_problem(elem: int, what: str, *, undefined_ok: bool) -> str | None:
    """An element type the installed onnx does not define (or, unless ``undefined_ok``,
    UNDEFINED), said of ``what``."""
    if elem not in KNOWN_ELEM_TYPES:
        return (f"{what} has element type {elem}, which the installed onnx "
                f"{onnx.__version__} does not define")
    if elem == _T.UNDEFINED and not undefined_ok:
        return f"{what} has no element type (UNDEFINED)"
    return None


def tensor_problem(t: onnx.TensorProto, what: str) -> str | None:
    """A tensor's header against its data: a known element type, dims >= 0 whose product a
    program can index, and one value per element in its data: a typed field, or raw data of
    at most :data:`RAW_CHECK_LIMIT` bytes. Larger raw data and external data are measured
    where they are read (:func:`opshift.io.tensors.tensor_array`: the passes, the evaluator):
    reading every raw field here would copy every weight of the model."""
    if not isinstance(t.name, str):
        return not_text("tensor name", t.name)
    tail = tensor_tail(t)
    return None if tail is None else what + tail


def tensor_tail(t: onnx.TensorProto) -> str | None:
    """:func:`tensor_problem` of a tensor whose name is text, as the message after its
    subject ("initializer 'w'")."""
    elem = t.data_type
    if elem not in _DEFINED:
        return elem_problem(elem, "", undefined_ok=False)
    dims = t.dims
    if len(dims) == 1:  # (most weights: one call fewer)
        n = dims[0]
        if n < 0:
            return f" has a negative dimension: dims {list(dims)}"
    elif dims and min(dims) < 0:
        return f" has a negative dimension: dims {list(dims)}"
    else:
        n = math.prod(dims)
    if t.data_location == _EXTERNAL:
        if n > MAX_ELEMENTS:
            return f" declares {n} elements (dims {list(dims)}), more than can be addressed"
        return None
    if n > MAX_IN_FILE:
        return (f" declares {n} elements (dims {list(dims)}), more than a model file "
                "can hold (protobuf's limit is 2 GiB)")
    if t.HasField("raw_data"):
        itemsize = _ITEMSIZE.get(elem)
        if itemsize is None or n * 16 > RAW_CHECK_LIMIT:  # (16: complex128's size)
            return None
        got = len(t.raw_data)
        return None if got == n * itemsize else _raw_message(got, n * itemsize, t)
    field = _FIELD.get(elem)
    if field is None:
        return None
    got, want = len(getattr(t, field[0])), n * field[1]
    if got != want:
        return (f" holds {got} value{'s' if got != 1 else ''} in {field[0]} for dims "
                f"{list(dims)} ({want} expected)")
    if elem == _T.STRING:
        for i, v in enumerate(t.string_data):
            try:
                v.decode("utf-8")
            except UnicodeDecodeError:
                return f": string element {i} ({v[:20]!r}) is not valid UTF-8"
    return None


def ir_version_problem(ir_version: int) -> str | None:
    """An IR version the installed onnx does not know."""
    if MIN_IR_VERSION <= ir_version <= MAX_IR_VERSION:
        return None
    return (f"IR version {ir_version} is outside {MIN_IR_VERSION}..{MAX_IR_VERSION}, the IR "
            f"versions the installed onnx {onnx.__version__} knows")


def opset_import_problem(imports: Sequence[onnx.OperatorSetIdProto]) -> str | None:
    """A domain that is not text, or imported twice at different versions ('' and 'ai.onnx'
    are the same domain)."""
    seen: dict[str, int] = {}
    for imp in imports:
        if not isinstance(imp.domain, str):
            return not_text("opset import domain", imp.domain)
        domain = "" if imp.domain == "ai.onnx" else imp.domain
        if seen.setdefault(domain, imp.version) != imp.version:
            return (f"domain {domain or 'ai.onnx'!r} is imported twice, at opsets "
                    f"{seen[domain]} and {imp.version}: which one applies is undefined")
    return None


def undecodable(t: onnx.TensorProto, e: Exception) -> str:
    """Why numpy_helper could not decode in-file tensor ``t`` (raising ``e``): raw data of
    the wrong length, a typed field of the wrong count, ...; one line naming the tensor
    (for :func:`opshift.io.tensors.tensor_array`)."""
    what = f"tensor {t.name!r}"
    why = tensor_problem(t, what) or _raw_problem(t, what)
    if why is None:
        first = str(e).splitlines()[0] if str(e) else ""
        why = f"{what}: cannot read its data ({type(e).__name__}: {first})"
    return why


def _itemsizes() -> dict[int, int]:
    """data_type -> bytes per element, for the types stored one element per item."""
    out = {}
    for t in KNOWN_ELEM_TYPES - _PACKED - {_T.UNDEFINED}:
        try:
            out[t] = onnx.helper.tensor_dtype_to_np_dtype(t).itemsize
        except (KeyError, ValueError, TypeError):  # a type numpy cannot hold
            continue
    return out


_ITEMSIZE = _itemsizes()


def _raw_problem(t: onnx.TensorProto, what: str) -> str | None:
    tail = _raw_tail(t)
    return None if tail is None else what + tail


def _raw_tail(t: onnx.TensorProto) -> str | None:
    itemsize = _ITEMSIZE.get(t.data_type)
    if itemsize is None or not t.HasField("raw_data"):
        return None
    got, want = len(t.raw_data), math.prod(t.dims) * itemsize
    return None if got == want else _raw_message(got, want, t)


def _raw_message(got: int, want: int, t: onnx.TensorProto) -> str:
    return (f" has {got} bytes of raw data for dims {list(t.dims)} of "
            f"{onnx.TensorProto.DataType.Name(t.data_type)} ({want} expected)")

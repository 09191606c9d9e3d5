"""What onnx's schemas say about op versions: ``onnx.defs``, asked once per question.

Everything version-related in opshift asks here rather than retyping tables: which schema
version is in force for an op at an opset, its attribute defaults, its allowed types, and
the IR version an opset belongs to.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np
import onnx
import onnx.defs
import onnx.helper

#: The three activation ops opshift knows in depth.
ACTIVATIONS = ("PRelu", "LeakyRelu", "Selu")

MAX_OPSET = onnx.defs.onnx_opset_version()
#: the element types of the eight integer tensor types
INTEGER_TYPES = frozenset({onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32,
                           onnx.TensorProto.INT64, onnx.TensorProto.UINT8,
                           onnx.TensorProto.UINT16, onnx.TensorProto.UINT32,
                           onnx.TensorProto.UINT64})


def normalize_domain(domain: str | None) -> str:
    """'' and 'ai.onnx' are the same default domain."""
    return "" if domain in (None, "", "ai.onnx") else domain


@functools.cache
def schema(op: str, opset: int, domain: str = "") -> onnx.defs.OpSchema | None:
    """The schema of ``op`` in force at ``opset`` of ``domain``, or None if it does not exist."""
    try:
        return onnx.defs.get_schema(op, opset, normalize_domain(domain))
    except onnx.defs.SchemaError:
        return None


@functools.cache
def since_version(op: str, opset: int, domain: str = "") -> int | None:
    """The version of ``op`` in force at ``opset`` (its schema's since_version), or None."""
    s = schema(op, opset, domain)
    return None if s is None else s.since_version


def has_function_body(op: str, opset: int, domain: str = "") -> bool:
    """Whether the schema of ``op`` in force at ``opset`` of ``domain`` defines it by a
    function body (one of its own, or one onnx.defs builds for the node)."""
    s = schema(op, opset, domain)
    return s is not None and (s.has_function or s.has_context_dependent_function)


def function_body_version(op: str, opset: int, domain: str = "",
                          near: int | None = None) -> int | None:
    """The version of the function body :func:`function_body` gives for ``op`` in force at
    ``opset`` of ``domain``: of the schema's bodies (its plain ones if it has any, else its
    context-dependent ones), the newest written for ``near`` (default ``opset``) or below,
    else the oldest (a body written for a later opset imports it); None when the op has no
    body."""
    s = schema(op, opset, domain)
    if s is None:
        return None
    versions = (s.function_opset_versions if s.has_function
                else s.context_dependent_function_opset_versions)
    if not versions:
        return None
    near = opset if near is None else near
    return max((v for v in versions if v <= near), default=min(versions))


@functools.cache
def _plain_body(op: str, opset: int, domain: str, version: int) -> bytes:
    """The serialized body ``version`` of ``op``'s schema in force at ``opset`` (one that
    does not depend on the node), asked of onnx.defs once."""
    return schema(op, opset, domain).get_function_with_opset_version(version)


def function_body(op: str, opset: int, domain: str = "", node: onnx.NodeProto | None = None,
                  input_types: Sequence[onnx.TypeProto]
                  | Callable[[], Sequence[onnx.TypeProto]] = (),
                  near: int | None = None) -> onnx.FunctionProto | None:
    """The schema function body of ``op`` in force at ``opset`` of ``domain``, the one
    :func:`function_body_version` picks (closest to ``near``, default ``opset``), or None
    when the op has none or onnx builds none for this node. A context-dependent body is
    built for ``node`` and ``input_types`` (or what the function given for them returns,
    asked only then); a body that depends on neither is asked of onnx.defs once per version
    and parsed afresh on every call (the caller may change it). onnx.defs' own errors
    building it pass through."""
    v = function_body_version(op, opset, domain, near)
    if v is None:
        return None
    s = schema(op, opset, domain)
    if s.has_function:
        raw = _plain_body(op, opset, domain, v)
    else:
        if node is None:
            raise ValueError(f"{op}'s function body depends on the node: none was given")
        types = input_types() if callable(input_types) else input_types
        raw = s.get_context_dependent_function_with_opset_version(
            v, node.SerializeToString(), [t.SerializeToString() for t in types])
    if not raw:
        return None
    return onnx.FunctionProto.FromString(raw)


@functools.cache
def _schemas(op: str, domain: str = "") -> tuple[onnx.defs.OpSchema, ...]:
    """Every schema of ``op`` in the installed onnx, oldest first: asked version by version
    down from the newest (loading the whole history would cost every process its time and
    memory)."""
    dom = normalize_domain(domain)
    try:
        s = onnx.defs.get_schema(op, dom)
    except onnx.defs.SchemaError:
        return ()
    out = [s]
    while s.since_version > 1 and (s := schema(op, s.since_version - 1, dom)) is not None:
        out.append(s)
    return tuple(reversed(out))


@functools.cache
def versions(op: str, domain: str = "") -> tuple[int, ...]:
    """All since_versions of ``op`` known to the installed onnx, ascending."""
    return tuple(s.since_version for s in _schemas(op, domain))


@functools.cache
def attribute_defaults(op: str, version: int, domain: str = "") -> dict[str, object]:
    """Attribute name -> default value (Python value) for ``op`` at schema ``version``.

    Attributes without a default (required ones, or optional ones with no default such as
    ``consumed_inputs``) are absent.
    """
    s = schema(op, version, domain)
    if s is None:
        return {}
    out = {}
    for name, a in s.attributes.items():
        d = a.default_value
        if d is not None and d.name:
            out[name] = onnx.helper.get_attribute_value(d)
    return out


@functools.cache
def attribute_names(op: str, version: int, domain: str = "") -> frozenset[str]:
    s = schema(op, version, domain)
    return frozenset() if s is None else frozenset(s.attributes)


@functools.cache
def allowed_types(op: str, version: int, domain: str = "", param: str = "T") -> frozenset[str]:
    """Type strings (``'tensor(float)'``) allowed for type parameter ``param``."""
    s = schema(op, version, domain)
    if s is None:
        return frozenset()
    for tc in s.type_constraints:
        if tc.type_param_str == param:
            return frozenset(tc.allowed_type_strs)
    return frozenset()


_TYPE_STR_BY_DTYPE: dict[np.dtype, str] = {}


def tensor_type(elem_type: int) -> str:
    """``tensor(<name>)`` of a TensorProto element type, as schemas list allowed types."""
    return f"tensor({tensor_type_name(elem_type)})"


def type_str(dtype: np.dtype) -> str:
    """numpy dtype -> ONNX type string, e.g. float32 -> 'tensor(float)'."""
    dtype = np.dtype(dtype)
    s = _TYPE_STR_BY_DTYPE.get(dtype)
    if s is None:
        elem = onnx.helper.np_dtype_to_tensor_dtype(dtype)
        s = tensor_type(elem)
        _TYPE_STR_BY_DTYPE[dtype] = s
    return s


def type_string(tp: onnx.TypeProto) -> str | None:
    """A TypeProto as schemas spell it (``tensor(float)``, ``seq(tensor(float))``,
    ``optional(seq(tensor(int64)))``); None when it is not a tensor, sequence or optional
    of a known element type."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        elem = tp.tensor_type.elem_type
        return tensor_type(elem) if elem else None
    inner = {"sequence_type": ("seq", tp.sequence_type),
             "optional_type": ("optional", tp.optional_type)}.get(kind)
    if inner is None:
        return None
    elem = type_string(inner[1].elem_type)
    return None if elem is None else f"{inner[0]}({elem})"


def type_proto(type_str: str) -> onnx.TypeProto:
    """The TypeProto a schema's type string names (``tensor(float)``, ``seq(tensor(int64))``,
    ``optional(...)``), shapes left out."""
    for kind, make in (("seq(", onnx.helper.make_sequence_type_proto),
                       ("optional(", onnx.helper.make_optional_type_proto)):
        if type_str.startswith(kind) and type_str.endswith(")"):
            return make(type_proto(type_str[len(kind):-1]))
    if not (type_str.startswith("tensor(") and type_str.endswith(")")):
        raise ValueError(f"not a tensor, sequence or optional type: {type_str!r}")
    elem = onnx.TensorProto.DataType.Value(type_str[len("tensor("):-1].upper())
    return onnx.helper.make_tensor_type_proto(elem, None)


def tensor_type_name(elem_type: int) -> str:
    """TensorProto data type -> the name used in type strings ('float', 'bfloat16', ...)."""
    try:
        return onnx.TensorProto.DataType.Name(elem_type).lower()
    except ValueError:  # not a type of the installed onnx: the structural check refuses it
        return f"<element type {elem_type}>"


def ir_version_for_opset(opset: int) -> int:
    """The IR version that ``opset`` of the default domain was released with.

    Opsets 2..4 have no row of their own in ``onnx.helper.VERSION_TABLE``; they belong to
    the IR version of the next opset that has one (IR 3).
    """
    known = onnx.helper.OP_SET_ID_VERSION_MAP
    for v in range(opset, MAX_OPSET + 1):
        if ("ai.onnx", v) in known:
            return known[("ai.onnx", v)]
    return onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", opset)])


def opset_of(model: onnx.ModelProto | onnx.FunctionProto, domain: str = "") -> int | None:
    """The version ``model`` (or function) imports for ``domain``, or None."""
    domain = normalize_domain(domain)
    for imp in model.opset_import:
        if normalize_domain(imp.domain) == domain:
            return imp.version
    return None


_GRAPH_KINDS = frozenset((onnx.defs.OpSchema.AttrType.GRAPH, onnx.defs.OpSchema.AttrType.GRAPHS))
_TENSOR_KINDS = _GRAPH_KINDS | {onnx.defs.OpSchema.AttrType.TENSOR,
                                onnx.defs.OpSchema.AttrType.TENSORS,
                                onnx.defs.OpSchema.AttrType.SPARSE_TENSOR}


def _has_attribute_of(op: str, kinds: frozenset) -> bool:
    return any(a.type in kinds for s in _schemas(op) for a in s.attributes.values())


@functools.cache
def has_graph_attribute(op: str) -> bool:
    """Some version of default-domain ``op`` has a graph attribute (If, Loop, Scan, ...)."""
    return _has_attribute_of(op, _GRAPH_KINDS)


@functools.cache
def may_hold_tensors(op: str) -> bool:
    """Some version of default-domain ``op`` has a tensor or graph attribute, so its node's
    attributes can hold tensors (Constant, ConstantOfShape, If, ...)."""
    return _has_attribute_of(op, _TENSOR_KINDS)


@functools.cache
def activation_attribute_types(op: str, opset: int) -> tuple[int, dict[str, int]] | None:
    """(version in force, attribute name -> AttributeProto type) of PRelu, LeakyRelu or Selu
    at ``opset``; None when the op does not exist there."""
    s = schema(op, opset)
    if s is None:
        return None
    return s.since_version, {n: int(a.type.value) for n, a in s.attributes.items()}


@functools.cache
def x_types_of_any_version(op: str, domain: str = "") -> frozenset[str]:
    """Type strings any version of ``op`` allows for its first input."""
    return frozenset().union(*(
        allowed_types(op, v, domain, schema(op, v, domain).inputs[0].type_str)
        for v in versions(op, domain)))

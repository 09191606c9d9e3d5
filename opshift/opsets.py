"""What onnx's schemas say about op versions, read once and cached.

Everything version-related in opshift asks here rather than retyping tables: which schema
version is in force for an op at an opset, its attribute defaults, its allowed types, and
the IR version an opset belongs to.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import onnx.defs
import onnx.helper

#: The three activation ops opshift knows in depth.
ACTIVATIONS = ("PRelu", "LeakyRelu", "Selu")

MAX_OPSET = onnx.defs.onnx_opset_version()


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
    if normalize_domain(domain) == "":  # without building onnx's registry when cached
        return schema_facts().since_version(op, opset)
    s = schema(op, opset, domain)
    return None if s is None else s.since_version


@functools.cache
def schema_facts():
    """:func:`opshift.schema_cache.facts` (default-domain facts, cached on disk)."""
    from .schema_cache import facts

    return facts()


@functools.cache
def versions(op: str, domain: str = "") -> tuple[int, ...]:
    """All since_versions of ``op`` known to the installed onnx, ascending."""
    domain = normalize_domain(domain)
    if domain == "":  # the schema facts hold them (without building onnx's registry)
        return schema_facts().since.get(op, ())
    # walks down from the newest schema (a few get_schema calls) instead of scanning every
    # schema of every op (~10 ms per op)
    try:
        s = onnx.defs.get_schema(op, domain)
    except onnx.defs.SchemaError:
        return ()
    out = []
    v = s.since_version
    while v >= 1:
        out.append(v)
        try:
            s = onnx.defs.get_schema(op, v - 1, domain)
        except onnx.defs.SchemaError:
            break
        if s.since_version >= v:
            break
        v = s.since_version
    return tuple(sorted(out))


@functools.cache
def attribute_defaults(op: str, version: int, domain: str = "") -> dict[str, object]:
    """Attribute name -> default value (Python value) for ``op`` at schema ``version``.

    Attributes without a default (required ones, or optional ones with no default such as
    ``consumed_inputs``) are absent.
    """
    if normalize_domain(domain) == "" and op in ACTIVATIONS:
        f = schema_facts()
        v = f.since_version(op, version)
        return {} if v is None else {
            n: d for n, (_, d) in f.attributes[op][v].items() if d is not None}
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


def type_str(dtype: np.dtype) -> str:
    """numpy dtype -> ONNX type string, e.g. float32 -> 'tensor(float)'."""
    dtype = np.dtype(dtype)
    s = _TYPE_STR_BY_DTYPE.get(dtype)
    if s is None:
        elem = onnx.helper.np_dtype_to_tensor_dtype(dtype)
        s = f"tensor({tensor_type_name(elem)})"
        _TYPE_STR_BY_DTYPE[dtype] = s
    return s


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



@functools.cache
def has_graph_attribute(op: str) -> bool:
    """Some version of default-domain ``op`` has a graph attribute (If, Loop, Scan, ...)."""
    return op in schema_facts().graph_ops


@functools.cache
def may_hold_tensors(op: str) -> bool:
    """Some version of default-domain ``op`` has a tensor or graph attribute, so its node's
    attributes can hold tensors (Constant, ConstantOfShape, If, ...)."""
    return op in schema_facts().tensor_ops


def activation_attribute_types(op: str, opset: int) -> tuple[int, dict[str, int]] | None:
    """(version in force, attribute name -> AttributeProto type) of PRelu, LeakyRelu or Selu
    at ``opset``; None when the op does not exist there."""
    f = schema_facts()
    v = f.since_version(op, opset)
    if v is None:
        return None
    return v, {n: t for n, (t, _) in f.attributes[op][v].items()}

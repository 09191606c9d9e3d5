"""What the fusion checks need to know about IR values: constants, dtypes, shapes, opsets.

A *constant* here is a value whose content is fixed for every run of the model: an initializer
that is not also a graph input, a ``Constant`` node's output, or a ``Cast`` / ``CastLike`` /
``Neg`` / ``Identity`` / reshape (Squeeze, Unsqueeze, Reshape, Flatten) of one. From IR
version 4 on, an initializer that is also a graph input is a default a caller may override,
so it is not a constant; before IR 4 every initializer had to be listed as a graph input, so
there the listing says nothing and initializers are constants (as onnxruntime and opshift's
converters treat them).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
import onnx_ir as ir

from opshift.graph.shape_rules import merge
from opshift.opsets import allowed_types, since_version, tensor_type


@dataclass(frozen=True, slots=True)
class InferredTypes:
    """What onnx shape inference found for the values whose IR carries no type or an
    incomplete shape (``opshift.fuse`` infers them and hands them to the rules it makes,
    without deserializing the inferred value_info into the IR)."""

    #: value name -> inferred onnx.TypeProto, for the main graph and its subgraphs
    types: dict
    #: ids of the graphs these names do NOT describe: function bodies
    excluded: set[int]
    #: value name -> shape (inference completed by :class:`opshift.graph.facts.Facts`)
    shape: Callable

    def of(self, value: ir.Value):
        """(the inferred TypeProto or None, the shape lookup) for ``value``, None where the
        table does not describe it."""
        g = value.graph
        if not value.name or g is None or id(g) in self.excluded:
            return None
        return self.types.get(value.name), self.shape


@dataclass(frozen=True, slots=True)
class Match:
    """What the check of one match knows beyond its bindings (made by
    :meth:`opshift.fuse.rules.base.Rule.check`, passed to every helper that reads it)."""

    #: onnxscript's match context: the model, the graph or function, the matched nodes
    context: object
    #: the model's main graph (its initializers are visible in every graph of the model)
    main: ir.Graph
    #: the matched nodes are named as ``opshift inline`` names the nodes it writes
    inlined: bool
    #: the model's IR version is < 4: an initializer listed as a graph input is a constant
    legacy_inputs: bool
    #: the types onnx shape inference found, when the rules run in ``opshift.fuse``
    inferred: InferredTypes | None = None

    @property
    def opset(self) -> int:
        """The default-domain opset in force for the matched graph or function."""
        return graph_opset(self.context)


def _overridable(match: Match, value: ir.Value) -> bool:
    """A graph input (an initializer listed as input counts only from IR 4 on)."""
    if not value.is_graph_input():
        return False
    return not (value.is_initializer() and match.legacy_inputs)


@dataclass(slots=True)
class Const:
    """A resolved constant.

    ``array`` is the value in the dtype it has in the graph (None when that dtype is only
    known at run time, for a ``CastLike`` to a value of unknown type); ``source`` is the
    tensor before any Cast/CastLike; ``origin`` is ``'initializer'`` or ``'constant'``
    (a Constant node, possibly through casts); ``producers`` are the nodes that computed
    it (Constant / Cast / CastLike), candidates for removal once unused.
    """

    array: np.ndarray | None
    source: np.ndarray
    origin: str
    castlike: bool
    producers: tuple[ir.Node, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.source.shape)


def _numpy(value: ir.Value) -> np.ndarray | None:
    tensor = value.const_value
    if tensor is None:
        return None
    try:
        return np.asarray(tensor.numpy())
    except (FileNotFoundError, OSError, ValueError):  # external data not loaded
        return None


def _constant_node_value(node: ir.Node) -> np.ndarray | None:
    attrs = node.attributes
    if len(attrs) != 1:
        return None
    attr = attrs.get("value")  # the common case first (a dict lookup, not an items() walk)
    if attr is not None:
        if attr.is_ref():
            return None
        try:
            return np.asarray(attr.value.numpy())  # attr.value: the tensor, unchecked
        except (FileNotFoundError, OSError, ValueError, AttributeError):
            return None
    (name, attr), = attrs.items()
    if attr.is_ref():
        return None
    if name == "value_float":
        return np.array(attr.as_float(), dtype=np.float32)
    if name == "value_floats":
        return np.array(list(attr.as_floats()), dtype=np.float32)
    if name == "value_int":
        return np.array(attr.as_int(), dtype=np.int64)
    if name == "value_ints":
        return np.array(list(attr.as_ints()), dtype=np.int64)
    return None


def _is_float(dtype: np.dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype.name == "bfloat16"


def _exact_cast(arr: np.ndarray, dtype: np.dtype) -> np.ndarray | None:
    """``arr`` cast to ``dtype`` if the cast loses nothing (so no rounding rule is involved)."""
    with np.errstate(all="ignore"):
        out = arr.astype(dtype)
        back = out.astype(arr.dtype)
    same = back == arr
    return out if bool(np.all(same)) else None


_RESHAPES = frozenset({"Squeeze", "Unsqueeze", "Reshape", "Flatten"})


def _axes(match: Match, node: ir.Node, depth: int) -> list[int] | None:
    """Squeeze/Unsqueeze axes: the attribute (opset < 13) or a constant second input."""
    attr = node.attributes.get("axes")
    if attr is not None:
        return None if attr.is_ref() else list(attr.as_ints())
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        c = resolve(match, node.inputs[1], depth + 1)
        return None if c is None or c.array is None else [int(a) for a in c.array.ravel()]
    return []


def _reshaped(match: Match, node: ir.Node, arr: np.ndarray, depth: int) -> tuple[int, ...] | None:
    """The output shape of a reshaping node on a constant, or None if not decidable."""
    shape = list(arr.shape)
    try:
        if node.op_type == "Squeeze":
            axes = _axes(match, node, depth)
            if axes is None:
                return None
            axes = [a % len(shape) for a in axes] if axes else \
                [i for i, d in enumerate(shape) if d == 1]
            if any(shape[a] != 1 for a in axes):
                return None
            return tuple(d for i, d in enumerate(shape) if i not in axes)
        if node.op_type == "Unsqueeze":
            axes = _axes(match, node, depth)
            if not axes:
                return None
            rank = len(shape) + len(axes)
            out = iter(shape)
            axes = {a % rank for a in axes}
            return tuple(1 if i in axes else next(out) for i in range(rank))
        if node.op_type == "Flatten":
            axis = node.attributes.get_int("axis", 1) % (len(shape) + 1)
            return (int(np.prod(shape[:axis], dtype=np.int64)),
                    int(np.prod(shape[axis:], dtype=np.int64)))
        # Reshape
        if node.attributes.get_int("allowzero", 0) or len(node.inputs) < 2:
            return None
        c = resolve(match, node.inputs[1], depth + 1)
        if c is None or c.array is None:
            return None
        target = [int(d) for d in c.array.ravel()]
        target = [shape[i] if d == 0 else d for i, d in enumerate(target)]
        return tuple(np.empty(shape, np.int8).reshape(target).shape)
    except (ValueError, IndexError, StopIteration):
        return None


def resolve(match: Match, value: ir.Value | None, depth: int = 0) -> Const | None:
    """The constant ``value`` always holds in ``match``'s model, or None."""
    if value is None or depth > 4 or _overridable(match, value):
        return None
    node = value.producer()
    if node is None:
        arr = _numpy(value) if value.is_initializer() else None
        return None if arr is None else Const(arr, arr, "initializer", False, ())
    if node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "Constant":
        arr = _constant_node_value(node)
        if arr is None:
            arr = _numpy(value)
        return None if arr is None else Const(arr, arr, "constant", False, (node,))
    if node.op_type in ("Neg", "Identity") and node.inputs and node.inputs[0] is not None:
        inner = resolve(match, node.inputs[0], depth + 1)
        if inner is None or inner.array is None:
            return None
        arr, src = inner.array, inner.source
        if node.op_type == "Neg":  # exact; integers wrap as ONNX Neg does
            with np.errstate(all="ignore"):
                arr = np.negative(arr)
                src = np.negative(src) if _is_float(src.dtype) else arr
        return Const(arr, src, inner.origin, inner.castlike, (node, *inner.producers))
    if node.op_type in _RESHAPES and node.inputs and node.inputs[0] is not None:
        inner = resolve(match, node.inputs[0], depth + 1)
        if inner is None or inner.array is None:
            return None
        shape = _reshaped(match, node, inner.array, depth)
        if shape is None:
            return None
        operand = resolve(match, node.inputs[1], depth + 1) if len(node.inputs) > 1 else None
        return Const(inner.array.reshape(shape), inner.source.reshape(shape), inner.origin,
                     inner.castlike, (node, *inner.producers,
                                      *(operand.producers if operand is not None else ())))
    if node.op_type in ("Cast", "CastLike") and node.inputs and node.inputs[0] is not None:
        inner = resolve(match, node.inputs[0], depth + 1)
        if inner is None or inner.array is None:
            return None
        if node.op_type == "Cast":
            to = node.attributes.get("to")
            if to is None or to.is_ref():
                return None
            if to.type == ir.AttributeType.STRING:  # Cast-1: the type's name
                try:
                    target = ir.DataType(onnx.TensorProto.DataType.Value(to.as_string().upper()))
                except ValueError:
                    return None
            else:
                target = ir.DataType(to.as_int())
        else:
            like = node.inputs[1] if len(node.inputs) > 1 else None
            target = dtype_of(match, like)
        arr = None
        if target is not None:
            to_dtype = target.numpy()
            if to_dtype == inner.array.dtype:
                arr = inner.array  # a cast to the type it has changes nothing
            elif _is_float(inner.array.dtype) and _is_float(to_dtype):
                with np.errstate(all="ignore"):  # IEEE round-to-nearest-even, as ONNX Cast
                    arr = inner.array.astype(to_dtype)
            else:
                arr = _exact_cast(inner.array, to_dtype)
                if arr is None:
                    return None  # int/float conversions: refuse to reason about rounding
        return Const(arr, inner.source, inner.origin, node.op_type == "CastLike" or inner.castlike,
                     (node, *inner.producers))
    return None


def ref_attr(value: ir.Value | None) -> tuple[str, tuple[ir.Node, ...]] | None:
    """For ``Constant(value_float=@name)`` (in a function body), possibly through
    ``CastLike``: the function attribute's name and the producer nodes."""
    node = value.producer() if value is not None else None
    if node is None or node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "CastLike" and node.inputs and node.inputs[0] is not None:
        inner = ref_attr(node.inputs[0])
        return None if inner is None else (inner[0], (node, *inner[1]))
    if node.op_type == "Constant" and len(node.attributes) == 1:
        (name, attr), = node.attributes.items()
        if name == "value_float" and attr.is_ref():
            return attr.ref_attr_name, (node,)
    return None


_DATA_TYPES = {int(t): t for t in ir.DataType}  # the enum's call costs ~1 us


def _inferred(match: Match, value: ir.Value):
    """What inference found for ``value`` (see :meth:`InferredTypes.of`), None without."""
    return None if match.inferred is None else match.inferred.of(value)


def dtype_of(match: Match, value: ir.Value | None) -> ir.DataType | None:
    """``value``'s element type: its IR type, else what inference found for it."""
    if value is None:
        return None
    if value.type is None:
        found = _inferred(match, value)
        t = found[0] if found is not None else None
        if t is None or not t.HasField("tensor_type") or not t.tensor_type.elem_type:
            return None
        elem = t.tensor_type.elem_type
        return _DATA_TYPES.get(elem) or ir.DataType(elem)
    try:
        return value.type.dtype
    except AttributeError:
        return None


def shape_of(match: Match, value: ir.Value | None) -> tuple[int | str | None, ...] | None:
    """Static shape with ints for known dims, names for symbolic ones, None for unknown
    (the IR's, completed by what inference found)."""
    if value is None:
        return None
    own: tuple | None = None
    if value.shape is not None:
        own = tuple(d if isinstance(d, int) else getattr(d, "value", None)
                    for d in value.shape)
        if None not in own:
            return own
    found = _inferred(match, value)
    return merge(own, found[1](value.name)) if found is not None else own


def graph_opset(context) -> int:
    """The default-domain opset in force for the matched graph or function."""
    gf = context.graph_or_function
    imports = getattr(gf, "opset_imports", None) or {}
    v = imports.get("", imports.get("ai.onnx"))
    if v is None:
        mi = context.model.opset_imports
        v = mi.get("", mi.get("ai.onnx", 1))
    return int(v)


@functools.cache  # a handful of (op, opset, dtype) per model, asked once per fusion
def type_allowed(op: str, opset: int, dtype: ir.DataType) -> tuple[int | None, bool]:
    """(version of ``op`` at ``opset``, whether it accepts ``dtype`` for T)."""
    version = since_version(op, opset)
    if version is None:
        return None, False
    return version, tensor_type(int(dtype)) in allowed_types(op, version)


def float32_attr(value: np.ndarray, dtype: np.dtype) -> float | None:
    """A float32 attribute value ``a`` with ``dtype(a) == value`` exactly, or None."""
    v = np.asarray(value).reshape(())
    with np.errstate(all="ignore"):
        a = np.float32(v.astype(np.float64)) if v.dtype != np.float32 else np.float32(v)
        if not np.isfinite(a):
            return None
        if np.asarray(a).astype(dtype) != v.astype(dtype):
            return None
    return float(a)

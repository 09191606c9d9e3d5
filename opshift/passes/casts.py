"""Running a node in a wider type: Cast its inputs, run it, Cast the result back.

Used when a target opset does not allow a node's element type (bfloat16 for PRelu < 16, ...).
The compute type must hold every input value exactly, so only widening casts are chosen:

* bfloat16, float16 -> float32 (then float64): every value is exact; a product of two
  bfloat16/float16 values is exact in float32, so rounding the result back once gives the
  same bits as computing in the narrow type.
* 8/16/32-bit integers -> float64: every value is exact, and so is every product whose
  magnitude is below 2**53, which covers every result that fits the integer type. A result
  that overflows (wraps) in the integer type does NOT come back the same: callers whose op
  can overflow must prove it cannot or use another rewrite (convert does, for PRelu).
* 64-bit integers -> float64 only represent magnitudes up to 2**53 exactly. Callers must
  prove the range (see :data:`EXACT_INT_LIMIT`) or choose another rewrite.
"""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from .. import opsets
from ..errors import ConversionError

#: float64 holds every integer of magnitude <= 2**53 exactly.
EXACT_INT_LIMIT = 2**53

_WIDER: dict[int, tuple[int, ...]] = {
    TensorProto.BFLOAT16: (TensorProto.FLOAT, TensorProto.DOUBLE),
    TensorProto.FLOAT16: (TensorProto.FLOAT, TensorProto.DOUBLE),
    TensorProto.FLOAT: (TensorProto.DOUBLE,),
    TensorProto.INT8: (TensorProto.INT16, TensorProto.INT32, TensorProto.FLOAT,
                       TensorProto.DOUBLE),
    TensorProto.UINT8: (TensorProto.INT16, TensorProto.INT32, TensorProto.FLOAT,
                        TensorProto.DOUBLE),
    TensorProto.INT16: (TensorProto.INT32, TensorProto.DOUBLE),
    TensorProto.UINT16: (TensorProto.INT32, TensorProto.DOUBLE),
    TensorProto.INT32: (TensorProto.DOUBLE,),
    TensorProto.UINT32: (TensorProto.DOUBLE,),
    # Exact only for |values| <= 2**53: callers check (see module docstring).
    TensorProto.INT64: (TensorProto.DOUBLE,),
    TensorProto.UINT64: (TensorProto.DOUBLE,),
}

#: Element types whose compute type is exact only on a value range the caller must check.
RANGE_LIMITED = frozenset({TensorProto.INT64, TensorProto.UINT64})


def _type_str(elem_type: int) -> str:
    return f"tensor({opsets.tensor_type_name(elem_type)})"


def cast_supports(elem_from: int, elem_to: int, opset: int) -> bool:
    """Cast at ``opset`` of the default domain converts ``elem_from`` to ``elem_to``."""
    v = opsets.since_version("Cast", opset)
    if v is None:
        return False
    return (_type_str(elem_from) in opsets.allowed_types("Cast", v, param="T1")
            and _type_str(elem_to) in opsets.allowed_types("Cast", v, param="T2"))


def exact_compute_type(elem_type: int, allowed_type_strs, opset: int) -> int | None:
    """A type in ``allowed_type_strs`` that holds every ``elem_type`` value exactly and that
    Cast at ``opset`` converts to and from; None when there is none.

    For 64-bit integers the answer (float64) is exact only up to :data:`EXACT_INT_LIMIT`.
    """
    allowed = frozenset(allowed_type_strs)
    if _type_str(elem_type) in allowed:
        return elem_type
    for wide in _WIDER.get(elem_type, ()):
        if (_type_str(wide) in allowed and cast_supports(elem_type, wide, opset)
                and cast_supports(wide, elem_type, opset)):
            return wide
    return None


def make_cast(inp: str, out: str, to: int, opset: int, name: str) -> onnx.NodeProto:
    """A Cast valid at ``opset`` (Cast-1 takes the type name as a string)."""
    if opsets.since_version("Cast", opset) == 1:
        to_attr = onnx.TensorProto.DataType.Name(to)
        return helper.make_node("Cast", [inp], [out], name=name, to=to_attr)
    return helper.make_node("Cast", [inp], [out], name=name, to=to)


def wrap_in_casts(node: onnx.NodeProto, compute_elem_type: int, names, label: str, *,
                  elem_type: int, opset: int, cast_inputs: tuple[int, ...] | None = None
                  ) -> list[onnx.NodeProto]:
    """``[Cast(inputs), node (edited in place to read/write the casts), Cast(outputs)]``.

    ``elem_type`` is the type the node's tensors have now; ``compute_elem_type`` the type
    it will run in; ``names`` an :class:`opshift.passes._graph.Names`; ``label`` the base for
    new names. ``cast_inputs`` selects the input positions to cast (default: all present).
    The node keeps its outputs' names on the final Casts, so consumers are untouched.
    Raises :class:`ConversionError` when Cast at ``opset`` cannot express either direction.
    """
    if not (cast_supports(elem_type, compute_elem_type, opset)
            and cast_supports(compute_elem_type, elem_type, opset)):
        raise ConversionError(
            f"{label}: Cast at opset {opset} cannot convert "
            f"{opsets.tensor_type_name(elem_type)} <-> "
            f"{opsets.tensor_type_name(compute_elem_type)}")
    wide = opsets.tensor_type_name(compute_elem_type)
    before: list[onnx.NodeProto] = []
    positions = range(len(node.input)) if cast_inputs is None else cast_inputs
    for i in positions:
        src = node.input[i]
        if not src:
            continue
        dst = names.fresh(f"{label}/{src}_{wide}")
        before.append(make_cast(src, dst, compute_elem_type, opset,
                                names.fresh(f"{label}/cast_in{i}")))
        node.input[i] = dst
    after: list[onnx.NodeProto] = []
    for i, out in enumerate(node.output):
        if not out:
            continue
        tmp = names.fresh(f"{label}/{out}_{wide}")
        node.output[i] = tmp
        after.append(make_cast(tmp, out, elem_type, opset, names.fresh(f"{label}/cast_out{i}")))
    return [*before, node, *after]

"""bfloat16 below PRelu-16, LeakyRelu-16 and Selu-22: computed in float32 between Casts.

Going down past the version that added bfloat16, a bfloat16 node runs in a wider type the
destination allows: Cast its inputs, run it, Cast the result back. The compute type must hold
every input value exactly, so only widening casts are chosen:

* bfloat16, float16 -> float32 (then float64): every value is exact; a product of two
  bfloat16/float16 values is exact in float32, so rounding the result back once gives the
  same bits as computing in the narrow type.
* 8/16/32-bit integers -> float64: every value is exact, and so is every product whose
  magnitude is below 2**53, which covers every result that fits the integer type. A result
  that overflows (wraps) in the integer type does NOT come back the same.
* 64-bit integers -> float64 only represent magnitudes up to 2**53 exactly: refused.

Float attributes (LeakyRelu's alpha, Selu's alpha and gamma) are rounded to X's type first:
the ops' function bodies CastLike them to X's type, so PRelu/LeakyRelu give the same bits and
Selu is within one bfloat16 ulp of the exact value. Cast has no bfloat16 before opset 13:
refused there.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from ... import opsets
from ...errors import ConversionError
from ...tables import number
from ..registry import at
from ..step import Refuse, Step

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
    # Exact only for |values| <= 2**53: refused (RANGE_LIMITED).
    TensorProto.INT64: (TensorProto.DOUBLE,),
    TensorProto.UINT64: (TensorProto.DOUBLE,),
}

#: Element types whose compute type is exact only on a value range that cannot be proven.
RANGE_LIMITED = frozenset({TensorProto.INT64, TensorProto.UINT64})


def _type_str(elem_type: int) -> str:
    return f"tensor({opsets.tensor_type_name(elem_type)})"


def dropped_types_possible(op: str, lo: int, hi: int, up: bool, facts) -> bool:
    """Going down, some value of the model could have a type ``op``-``hi`` allows and
    ``op``-``lo`` does not."""
    dropped = opsets.allowed_types(op, hi) - opsets.allowed_types(op, lo)
    return not up and bool(dropped & facts.possible_types())


def cast_supports(elem_from: int, elem_to: int, opset: int) -> bool:
    """Cast at ``opset`` of the default domain converts ``elem_from`` to ``elem_to``."""
    v = opsets.since_version("Cast", opset)
    if v is None:
        return False
    return (_type_str(elem_from) in opsets.allowed_types("Cast", v, param="T1")
            and _type_str(elem_to) in opsets.allowed_types("Cast", v, param="T2"))


def exact_compute_type(elem_type: int, allowed_type_strs, opset: int) -> int | None:
    """A type in ``allowed_type_strs`` that holds every ``elem_type`` value exactly and that
    Cast at ``opset`` converts to and from; None when there is none (for 64-bit integers
    the answer, float64, is exact only up to 2**53)."""
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
        return helper.make_node("Cast", [inp], [out], name=name,
                                to=onnx.TensorProto.DataType.Name(to))
    return helper.make_node("Cast", [inp], [out], name=name, to=to)


def wrap_in_casts(node: onnx.NodeProto, compute_elem_type: int, names, label: str, *,
                  elem_type: int, opset: int) -> list[onnx.NodeProto]:
    """``[Cast(inputs), node (edited in place to read/write the casts), Cast(outputs)]``.

    ``elem_type`` is the type the node's tensors have now; ``compute_elem_type`` the type
    it will run in; ``names`` an :class:`opshift.graph.names.Names`; ``label`` the base for
    new names. The node keeps its outputs' names on the final Casts, so consumers are
    untouched. Raises :class:`ConversionError` when Cast at ``opset`` cannot express either
    direction.
    """
    if not (cast_supports(elem_type, compute_elem_type, opset)
            and cast_supports(compute_elem_type, elem_type, opset)):
        raise ConversionError(
            f"{label}: Cast at opset {opset} cannot convert "
            f"{opsets.tensor_type_name(elem_type)} <-> "
            f"{opsets.tensor_type_name(compute_elem_type)}")
    wide = opsets.tensor_type_name(compute_elem_type)
    before: list[onnx.NodeProto] = []
    for i, src in enumerate(node.input):
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


def x_type_going_down(st: Step) -> int | None:
    """X's element type on a step down; None going up, or when unknown (then the schema
    check refuses if a type the destination drops is possible)."""
    return None if st.up else st.elem_type(st.input(0))


@at(16, "PRelu", "LeakyRelu", when=dropped_types_possible)
@at(22, "Selu", when=dropped_types_possible)
def compute_wider(st: Step) -> None:
    elem = x_type_going_down(st)
    if elem is None:
        return
    allowed = opsets.allowed_types(st.op, st.dst)
    tname = opsets.tensor_type_name(elem)
    if f"tensor({tname})" in allowed:
        return
    compute = exact_compute_type(elem, allowed, st.target)
    if compute is None:
        raise Refuse(f"{st.op}-{st.dst} does not allow {tname}, and opset {st.target} has no "
                     "exact wider type it can Cast to and back (bfloat16 Cast needs opset "
                     ">= 13)")
    if elem in RANGE_LIMITED:
        raise Refuse(f"{st.op}-{st.dst} does not allow {tname}; float64 holds {tname} values "
                     "exactly only up to 2**53 in magnitude, which cannot be proven for this "
                     "node, so it is not converted")
    st.finish(lambda s: _in_casts(s, elem, compute))


def _in_casts(st: Step, elem: int, compute: int) -> None:
    tname = opsets.tensor_type_name(elem)
    _round_float_attributes(st, elem)
    w = st.edit()
    nodes = wrap_in_casts(w, compute, st.ctx.edits.names, st.node.name or st.label,
                          elem_type=elem, opset=st.target)
    k = nodes.index(w)
    st.state.pre.extend(nodes[:k])
    st.state.post[0:0] = nodes[k + 1:]
    wide = opsets.tensor_type_name(compute)
    st.note(f"computed in {wide} between Casts",
            f"{st.op}-{st.dst} does not allow {tname}; {wide} holds every value exactly")


def _round_float_attributes(st: Step, elem: int) -> None:
    """The ops cast their float attributes to X's type (CastLike in their function bodies);
    computing in a wider type must use the same rounded values."""
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    defaults = opsets.attribute_defaults(st.op, st.dst)
    for name in sorted(opsets.attribute_names(st.op, st.dst)):
        a = next((a for a in st.w.attribute if a.name == name), None)
        if a is not None and a.type != onnx.AttributeProto.FLOAT:
            continue
        v = a.f if a is not None else defaults.get(name)
        if not isinstance(v, float):
            continue
        r = float(np.asarray(np.float32(v)).astype(dtype).astype(np.float32))
        if a is None:
            st.edit().attribute.append(helper.make_attribute(name, r))
        elif np.float32(r) != np.float32(a.f):
            next(b for b in st.edit().attribute if b.name == name).f = r
        else:
            continue
        st.note(f"{name} rounded to {opsets.tensor_type_name(elem)} ({number(r)})",
                f"{st.op} casts {name} to X's type; the wider compute type must use the same "
                "value")

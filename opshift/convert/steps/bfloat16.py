"""bfloat16 below PRelu-16, LeakyRelu-16 and Selu-22: computed in float32 between Casts.

Going down past the version that added bfloat16, a bfloat16 node runs in a wider type the
destination allows: Cast its inputs, run it, Cast the result back. The compute type must hold
every input value exactly, so only widening casts are chosen:

* bfloat16, float16 -> float32, the type their meaning computes in (below); every value is
  exact.
* 8/16/32-bit integers -> float64: every value is exact, and so is every product whose
  magnitude is below 2**53, which covers every result that fits the integer type. A result
  that overflows (wraps) in the integer type does NOT come back the same.
* 64-bit integers -> float64 only represent magnitudes up to 2**53 exactly: refused.

A float16/bfloat16 node means "compute in float32 with the float32 attributes, round once"
(opshift's meaning of the three ops on 16-bit types, see
:mod:`opshift.evaluator.ops.activations`), which is exactly what the float32 node between
Casts computes: its attributes are kept as they are. Cast has no bfloat16 before opset 13:
refused there.
"""

from __future__ import annotations

import onnx
from onnx import TensorProto

from opshift import opsets
from opshift.convert.registry import at
from opshift.convert.step import Refuse, Step
from opshift.errors import ConversionError
from opshift.graph.cast import cast_supports, make_cast

_WIDER: dict[int, tuple[int, ...]] = {
    TensorProto.BFLOAT16: (TensorProto.FLOAT,),
    TensorProto.FLOAT16: (TensorProto.FLOAT,),
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


def dropped_types_possible(op: str, lo: int, hi: int, up: bool, facts) -> bool:
    """Going down, some value of the model could have a type ``op``-``hi`` allows and
    ``op``-``lo`` does not."""
    dropped = opsets.allowed_types(op, hi) - opsets.allowed_types(op, lo)
    return not up and bool(dropped & facts.possible_types())


def exact_compute_type(elem_type: int, allowed_type_strs, opset: int) -> int | None:
    """A type in ``allowed_type_strs`` that holds every ``elem_type`` value exactly and that
    Cast at ``opset`` converts to and from; None when there is none (for 64-bit integers
    the answer, float64, is exact only up to 2**53)."""
    allowed = frozenset(allowed_type_strs)
    if opsets.tensor_type(elem_type) in allowed:
        return elem_type
    for wide in _WIDER.get(elem_type, ()):
        if (opsets.tensor_type(wide) in allowed and cast_supports(elem_type, wide, opset)
                and cast_supports(wide, elem_type, opset)):
            return wide
    return None


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
    if opsets.tensor_type(elem) in allowed:
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
    w = st.edit()
    nodes = wrap_in_casts(w, compute, st.ctx.edits.names, st.node.name or st.label,
                          elem_type=elem, opset=st.target)
    k = nodes.index(w)
    st.state.pre.extend(nodes[:k])
    st.state.post[0:0] = nodes[k + 1:]
    wide = opsets.tensor_type_name(compute)
    st.note(f"computed in {wide} between Casts",
            f"{st.op}-{st.dst} does not allow {tname}; {wide} holds every value exactly")

"""Ops onnx deprecated for another op of the same meaning.

* **Upsample** is deprecated at 10, where **Resize-10** takes its inputs (X, scales) and its
  mode with the same semantics (asymmetric coordinates, nearest rounding down; onnx's own
  converter renames Upsample-9 to Resize-10, and the evaluator runs both with one kernel).
  Up, an Upsample becomes a Resize-10; down, below 10, a Resize-10 with constant scales
  >= 1 becomes an Upsample-9 (Upsample takes no smaller scale: Resize-10 samples down).
* **Scatter** is deprecated at 11 for **ScatterElements-11** (data, indices, updates, axis),
  which also takes negative indices. Up, a Scatter becomes a ScatterElements-11; down, a
  ScatterElements-11 becomes a Scatter-9 of its indices with none negative (Scatter-9
  rejects a negative index where ScatterElements counts from the end): indices that may be
  negative as ``i + n * (i < 0)`` (n the data's size along the axis; from 9, where Less
  takes integers; an index below -n stays negative, an error in both).

The new node is then converted on from that version to the target, as any node is.
"""

from __future__ import annotations

import numpy as np
import onnx

from opshift import opsets
from opshift.convert.registry import at, replaces
from opshift.convert.step import Refuse, Step, norm_axis

#: deprecated op -> (its successor, the successor's first version, why they are the same)
_SUCCESSORS = {
    "Upsample": ("Resize", 10, "Upsample is deprecated from opset 10; Resize-10 is the same op "
                 "(X, scales, mode: asymmetric, nearest rounding down)"),
    "Scatter": ("ScatterElements", 11, "Scatter is deprecated from opset 11; "
                "ScatterElements-11 is the same op (and also takes negative indices)"),
}


@at(10, "Upsample", replaces_up=True)
@at(11, "Scatter", replaces_up=True)
def as_successor(st: Step) -> None:
    if st.up:
        _renamed(st, *_SUCCESSORS[st.op])


@replaces("Resize")
def resize_as_upsample(st: Step) -> None:
    scales = st.const(st.input(1)) if len(st.w.input) > 1 else None
    if scales is None:
        raise Refuse("its scales are not a constant: Resize-10 samples down where a scale "
                     "is below 1, Upsample takes scales >= 1 only")
    if scales.size and float(np.min(scales)) < 1:
        raise Refuse(f"scale {float(np.min(scales))} samples down: Upsample takes scales "
                     ">= 1 only")
    _renamed(st, "Upsample", 9, "Resize exists from opset 10; Upsample-9 is the same op for "
             "scales >= 1 (X, scales, mode: asymmetric, nearest rounding down)")


@replaces("ScatterElements")
def scatter_elements_as_scatter(st: Step) -> None:
    indices = st.const(st.input(1))
    why = "ScatterElements exists from opset 11; Scatter-9 is the same op for indices >= 0"
    if indices is None or (indices.size and int(np.min(indices)) < 0):
        if st.target < 9:
            raise Refuse(("its indices are not a constant" if indices is None else
                          f"index {int(np.min(indices))} is negative") + ": a negative index "
                         "counts from the end in ScatterElements and is an error in "
                         "Scatter-9, and below 9 no Less takes integers to find them")
        _count_from_the_front(st)
        why += ", which the negative ones become counted from the end"
    _renamed(st, "Scatter", 9, why)


def _count_from_the_front(st: Step) -> None:
    """Make the node read its computed indices ``i`` as ``i + n`` where ``i < 0`` (n: the
    data's size along the axis, read at run time unless the shape gives it)."""
    data, i = st.input(0), st.input(1)
    t = st.elem_type(i)
    if t not in (onnx.TensorProto.INT32, onnx.TensorProto.INT64):
        raise Refuse("the type of its indices is unknown")
    axis = norm_axis(st.attr("axis", 0), st.need_rank(data, "the axis counts from the back"))
    n = st.axis_size(data, axis, t, "size")
    dtype = onnx.helper.tensor_dtype_to_np_dtype(t)
    st.edit().input[1] = st.where_less(i, st.add_const("zero", np.array(0, dtype)),
                                       st.add_node("Add", [i, n], "from_the_end"), "indices")


def _renamed(st: Step, op: str, version: int, why: str) -> None:
    """Replace the node (as converted so far) by ``op``-``version`` with its inputs,
    outputs and attributes, converted on from ``version`` to the target."""
    from opshift.convert.walk import walk_on

    node = onnx.NodeProto()
    node.CopyFrom(st.w)
    node.op_type = op
    target = opsets.since_version(op, st.target)
    st.state.pre.extend(walk_on(st, [node], version, f"as {op}-{version}"))
    st.remove(f"written as {op}-{version}" + (f" -> {op}-{target}" if target != version
                                              else ""), why)

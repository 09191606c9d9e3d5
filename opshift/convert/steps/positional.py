"""Ops that pick by position, below the opset they start at: written with the positions
0..n-1 of :meth:`~..step.Step.positions` and Where (:meth:`~..step.Step.where_less` on
integers). Data movement only, so exact for every type.

* **Trilu** (from 14), from 9: x where ``j - i >= k`` (upper) or ``j - i <= k`` (lower),
  else 0: ``Where`` of that test on the positions of the last two axes, the zero of X's
  type.
* **GatherElements** (from 11), from 7: X flattened, read at each element's own position
  with the index put in along ``axis`` (a negative index counts from the back): one Gather
  of ``sum_d position_d * stride_d``, the strides read from X's shape.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from opshift.convert.registry import replaces
from opshift.convert.step import Refuse, Step, norm_axis, np_dtype


def _positions_along(st: Step, size: str, axis: int, rank: int, what: str) -> str:
    """0..size-1 (``size`` an int64 scalar) shaped to run along ``axis`` of ``rank`` axes."""
    p = st.positions(size, what)
    others = [d for d in range(rank) if d != axis]
    return st.add_axes_node("Unsqueeze", p, others, "along") if others else p


@replaces("Trilu")
def trilu_below_14(st: Step) -> None:
    if st.target < 9:
        raise Refuse("below opset 9 there is no Where, nor ConstantOfShape and NonZero to "
                     "make the positions it tests")
    x, y = st.input(0), st.w.output[0]
    t = st.elem_type(x)
    if t is None:
        raise Refuse("the element type of its input is unknown")
    r = st.rank(x)
    if r is None and st.target < 11:
        raise Refuse("the rank of its input is unknown (below 11 Gather counts no axis from "
                     "the back)")
    shape = st.add_node("Shape", [x], "shape")
    rows, cols = (st.element(shape, k, w) for k, w in zip(
        (-2, -1) if r is None else (r - 2, r - 1), ("rows", "cols")))
    i = _positions_along(st, rows, 0, 2, "i")
    j = _positions_along(st, cols, 1, 2, "j")
    offset = st.add_node("Sub", [j, i], "offset")
    if st.input(1):  # (k: a 0-D int64)
        offset = st.add_node("Sub", [offset, st.input(1)], "offset_k")
    upper = st.attr("upper", 1)
    # upper keeps j - i >= k: zero where j - i - k < 0; lower keeps j - i <= k
    zero = st.add_const("zero", np.array(0, np.int64))
    drop = st.add_node("Less", [offset, zero] if upper else [zero, offset], "dropped")
    st.add_node("Where", [drop, st.add_const("x_zero", np.zeros((), np_dtype(t))), x], "kept",
                output=y)
    st.remove(f"Trilu ({'upper' if upper else 'lower'}) written as Where of the positions' "
              "offset against k", "Trilu exists from opset 14")


@replaces("GatherElements")
def gather_elements_below_11(st: Step) -> None:
    if st.target < 7:
        raise Refuse("below opset 7 the arithmetic of its positions broadcasts by attribute")
    x, idx, y = st.input(0), st.input(1), st.w.output[0]
    r = st.rank(x)
    if r is None:
        raise Refuse(f"the rank of its input {x!r} is unknown")
    axis = norm_axis(st.attr("axis", 0), r)
    xs = st.add_node("Shape", [x], "x_shape")
    ishape = st.add_node("Shape", [idx], "indices_shape")
    i = idx if st.elem_type(idx) == TensorProto.INT64 else st.add_cast(
        idx, TensorProto.INT64, "indices_int64")
    dim = st.element(xs, axis, "axis_size")
    zero = st.add_const("zero", np.array(0, np.int64))
    i = st.where_less(i, zero, st.add_node("Add", [i, dim], "from_the_back"), "indices")
    flat, stride = None, None
    for d in reversed(range(r)):
        at = i if d == axis else _positions_along(st, st.element(ishape, d, f"n{d}"), d, r,
                                                  f"p{d}")
        term = at if stride is None else st.add_node("Mul", [at, stride], f"term{d}")
        flat = term if flat is None else st.add_node("Add", [flat, term], f"flat{d}")
        if d:
            size = st.element(xs, d, f"size{d}")
            stride = size if stride is None else st.add_node("Mul", [stride, size],
                                                             f"stride{d - 1}")
    whole = st.add_node("Reshape", [x, st.add_const("flat", np.array([-1], np.int64))], "x_flat")
    st.add_node("Gather", [whole, flat], "gathered", axis=0, output=y)
    st.remove("GatherElements written as a Gather of X flattened at each element's position",
              "GatherElements exists from opset 11")

"""Broadcasting before opset 7/8: binary ops, variadic ops and Gemm.

* Add/Sub/Mul/Div/Pow/And/Or/Xor/Equal/Greater/Less **7**: legacy ``broadcast``/``axis``
  (<= 6) vs numpy broadcasting. Down needs equal shapes or ``broadcast=1`` with B a suffix of
  A (inputs swapped for commutative ops); up reshapes B for ``axis``.
* Sum/Max/Min/Mean **8**: all inputs had to share one shape before 8.
* Gemm **7**: ``broadcast`` of C (<= 6); Gemm **11**: C optional (made an explicit zero down).
"""

from __future__ import annotations

import numpy as np

from ..registry import at
from ..step import Refuse, Step, is_suffix, known_shape, norm_axis, np_dtype

BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less")
COMMUTATIVE = frozenset({"Add", "Mul", "And", "Or", "Xor", "Equal"})


@at(7, *BINARY)
def legacy_broadcast(st: Step) -> None:
    a, b = st.input(0), st.input(1)
    if st.up:
        bc = st.attr("broadcast", 0)
        axis = st.attr("axis")
        for name in ("broadcast", "axis"):
            if st.has_attr(name):
                st.del_attr(name)
        if not bc:
            st.note("dropped broadcast=0: the inputs had equal shapes")
            return
        if axis is None:
            st.note("legacy broadcast of a trailing B equals numpy broadcasting")
            return
        ra = st.need_rank(a, "legacy broadcast with axis")
        rb = st.need_rank(b, "legacy broadcast with axis")
        trailing = ra - norm_axis(axis, ra) - rb
        if trailing < 0:
            raise Refuse(f"axis={axis} does not fit ranks {ra} and {rb}")
        if trailing == 0 or rb == 0:
            st.note(f"axis={axis} aligns B with A's last dims: numpy broadcasting is the same")
            return
        cb = st.const(b)
        if cb is not None:
            nb = st.add_const("B_aligned", cb.reshape(cb.shape + (1,) * trailing))
        else:
            shape = st.add_const("B_shape", np.array([0] * rb + [1] * trailing, np.int64))
            nb = st.add_node("Reshape", [b, shape], "B_aligned")
        st.set_inputs([a, nb])
        st.note(f"B reshaped with {trailing} trailing 1s for legacy axis={axis}")
        return
    sa, sb = st.shape(a), st.shape(b)
    if sa is None or sb is None:
        raise Refuse("input shapes unknown: legacy broadcasting (opset < 7) needs them")
    if sa == sb and known_shape(sa):
        return
    if known_shape(sb) and is_suffix(sb, sa):
        st.set_attr("broadcast", 1)
        st.note(f"broadcast=1: B {sb} is a suffix of A {sa}")
        return
    if st.op in COMMUTATIVE and known_shape(sa) and is_suffix(sa, sb):
        st.set_inputs([b, a])
        st.set_attr("broadcast", 1)
        st.note(f"inputs swapped and broadcast=1: A {sa} is a suffix of B {sb}")
        return
    raise Refuse(f"shapes {sa} and {sb}: legacy broadcasting (opset < 7) cannot express "
                 "this numpy broadcast")


@at(8, "Sum", "Max", "Min", "Mean")
def variadic_same_shape(st: Step) -> None:
    if st.up:
        return
    names = [n for n in st.w.input if n]
    if len(names) < 2:
        return
    shapes = [st.shape(n) for n in names]
    if all(known_shape(s) for s in shapes) and len(set(shapes)) == 1:
        return
    raise Refuse(f"input shapes {shapes}: before opset 8 all inputs must have one shape")


# ------------------------------------------------------------------ Gemm


@at(7, "Gemm")
def gemm_broadcast(st: Step) -> None:
    if st.up:
        if st.has_attr("broadcast"):
            st.del_attr("broadcast")
            st.note("dropped broadcast: unidirectional broadcasting of C covers it")
        return
    c, y = st.input(2), st.w.output[0]
    sc, sy = st.shape(c), st.shape(y)
    if sc is not None and sy is not None and sc == sy and known_shape(sc):
        return
    if known_shape(sc) and sy is not None and is_suffix(sc, sy):
        st.set_attr("broadcast", 1)
        st.note(f"broadcast=1 for C of shape {sc}")
        return
    raise Refuse(f"C of shape {sc} vs Y of shape {sy}: Gemm-6 broadcasts only trailing shapes")


@at(11, "Gemm")
def gemm_optional_c(st: Step) -> None:
    if st.up or st.input(2):
        return
    t = st.elem_type(st.input(0))
    if t is None:
        raise Refuse("C is absent and the element type of A is unknown")
    c = st.add_const("C_zero", np.zeros((), np_dtype(t)))
    st.set_inputs([st.input(0), st.input(1), c])
    st.note("C made explicit as a scalar zero")


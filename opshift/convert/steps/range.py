"""Range (from 11) below 11, written with the ops that exist there, from 7.

Range makes ``max(ceil((limit - start) / delta), 0)`` values, counted in double (none for a
NaN or infinite count, as the evaluator and onnxruntime count), each the one before plus
``delta`` in the input's type (Range-11's function body adds in a loop). From 9 float values
are added up one by one by a Loop that many times, as the body adds them (start + i * delta
would round once where the additions round i times); integer values are ``start + i *
delta`` in the type, which wraps exactly as i additions of delta wrap, with the positions
0..n-1 (:meth:`~..step.Step.positions`: NonZero of n ones at 9 and 10, no loop for a
runtime to run; at 7 and 8 a Loop's iteration numbers). The count of a float Range is 0
where the quotient is NaN or infinite, a Where-9 converted on below 9 (:mod:`.where`).
Anything below 7 (legacy broadcasting) and int16 (no Add on it before 14): refused.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from opshift.convert.registry import replaces
from opshift.convert.step import Refuse, Step

_DOUBLE, _INT64 = TensorProto.DOUBLE, TensorProto.INT64


@replaces("Range")
def range_below_11(st: Step) -> None:
    t = st.elem_type(st.input(0))
    if t not in (TensorProto.FLOAT, _DOUBLE, TensorProto.INT32, _INT64):
        raise Refuse("its type is " + ("unknown" if t is None else TensorProto.DataType.Name(t))
                     + "; below 11 it is written for float, double, int32 and int64")
    if st.target < 7:
        raise Refuse("below opset 7 Mul and Add broadcast by attribute")
    start, limit, delta = (st.input(i) for i in range(3))
    floats = t in (TensorProto.FLOAT, _DOUBLE)
    count, y = _count(st, start, limit, delta, floats), st.w.output[0]
    if floats:
        _accumulate(st, t, start, delta, count, y)
        st.remove("Range written as its count and a Loop adding delta once per value")
        return
    positions = st.positions(count, "positions")
    steps = positions if t == _INT64 else st.add_cast(positions, t, "positions_cast")
    st.add_node("Add", [start, st.add_node("Mul", [steps, delta], "offsets")], "values",
                output=y)
    st.remove("Range written as start + i * delta, i NonZero(ConstantOfShape(count))")


def _count(st: Step, start: str, limit: str, delta: str, floats: bool) -> str:
    """``max(ceil((limit - start) / delta), 0)`` as an int64 scalar, computed in double; a
    NaN or infinite quotient (of ``floats``; integers make one only for a delta of 0, which
    Range refuses) counts 0."""
    s, lim, d = (st.add_cast(v, _DOUBLE, f"{what}_double") for v, what in
                 ((start, "start"), (limit, "limit"), (delta, "delta")))
    span = st.add_node("Div", [st.add_node("Sub", [lim, s], "span"), d], "steps")
    if floats:
        span = _finite(st, span)
    return st.add_cast(st.add_node("Relu", [st.add_node("Ceil", [span], "ceil")], "at_least_0"),
                       _INT64, "count")


def _finite(st: Step, span: str) -> str:
    """``span`` (a double scalar), 0 where it is NaN or infinite."""
    st.facts.extra_shapes[span] = ()
    largest = st.add_const("largest", np.array(np.finfo(np.float64).max))
    bounded = st.add_node("Not", [st.add_node("Greater", [st.add_node("Abs", [span], "abs"),
                                                          largest], "infinite")], "bounded")
    finite = st.add_node("And", [st.not_nan(span, "steps"), bounded], "finite")
    st.facts.extra_shapes[finite] = ()
    return st.written_at(9, "Where", [finite, span, st.add_const("zero", np.array(0.0))],
                         "finite_steps", _DOUBLE)


def _accumulate(st: Step, t: int, start: str, delta: str, count: str, y: str) -> None:
    """``y``: the running sum start, start + delta, ... ``count`` values long, in type ``t``
    (a Loop, as Range-11's body: a Scan over the positions would do, but onnxruntime fails
    a Scan over none)."""
    # the body's names are fresh: none may be a name of the graphs around it (delta's)
    i, more, last, go_on, after, value = (st.fresh_value(w) for w in (
        "iteration", "more", "last", "go_on", "next", "value"))
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [helper.make_node("Identity", [more], [go_on]),
         helper.make_node("Add", [last, delta], [after]),
         helper.make_node("Identity", [last], [value])], st.fresh(f"{st.label}/values_body"),
        [vi(i, _INT64, []), vi(more, TensorProto.BOOL, []), vi(last, t, [])],
        [vi(go_on, TensorProto.BOOL, []), vi(after, t, []), vi(value, t, [])])
    st.state.pre.append(helper.make_node(
        "Loop", [count, "", start], [st.fresh_value("after_last", start), y],
        name=st.fresh(f"{st.label}/values"), body=body))
    st.facts.extra_types[y] = t

"""Round (from 11) below 11, from opset 7: float and double, rounding half to even; float16
through float (both casts exact; runtimes' Floor seldom takes float16).

For ``a = |x|``: ``f = Floor(a)`` and ``d = a - f``, exact (f is within a factor 2 of a, or
0), are the integer part and the fraction; ``a`` rounds to ``f + 1`` where ``d > 0.5``, or
``d == 0.5`` and f is odd (``f - 2 * Floor(f / 2)``, exact: halving a float is), else to
``f``, and every sum is exact (f + 1 is an integer below 2**p where a tie can occur, as
from 2**(p-1) on a float has no fraction). An infinite ``a`` gives a NaN fraction, which
no comparison holds for: ``f`` itself; NaN stays NaN. x's sign comes back as a product by
+-1, negative where ``x < 0`` or ``1 / x < 0`` (-0.0, which Round keeps, as it gives -0.0
for the x in (-0.5, 0)). No step of it is an addition and subtraction of a constant, which
graph optimizers (OpenVINO's) fold away as if float additions were exact.

Every op used exists at 7 with numpy broadcasting of the scalar constants; below 7 they
broadcast by attribute only: refused.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as T

from opshift.convert.registry import replaces
from opshift.convert.step import Refuse, Step, np_dtype

_FLOATS = frozenset({T.FLOAT16, T.FLOAT, T.DOUBLE})


@replaces("Round")
def round_half_to_even(st: Step) -> None:
    x, y = st.input(0), st.w.output[0]
    t = st.elem_type(x)
    if t not in _FLOATS:
        raise Refuse(("its type is unknown" if t is None else
                      f"its input is {T.DataType.Name(t)}") + ": below 11 it is written for "
                     "float16, float and double")
    if st.target < 7:
        raise Refuse("below opset 7 the ops it is written with broadcast by attribute")
    half_float = t == T.FLOAT16
    if half_float:
        x, y, t = st.add_cast(x, T.FLOAT, "float"), st.fresh_value("rounded_float"), T.FLOAT
    dt = np_dtype(t)
    zero, half, one, two = (st.add_const(w, np.array(v, dt)) for w, v in
                            (("zero", 0), ("half", 0.5), ("one", 1), ("two", 2)))
    a = st.add_node("Abs", [x], "magnitude")
    f = st.add_node("Floor", [a], "whole")
    d = st.add_node("Sub", [a, f], "fraction")
    above = st.add_node("Greater", [d, half], "above_half")
    tie = st.add_node("Not", [st.add_node("Or", [above, st.add_node(
        "Less", [d, half], "below_half")], "not_half")], "half_exactly")
    parity = st.add_node("Sub", [f, st.add_node("Mul", [st.add_node(
        "Floor", [st.add_node("Div", [f, two], "halved")], "halved_whole"), two], "even")],
        "parity")
    odd = st.add_node("Greater", [parity, half], "odd")
    up = st.add_node("Or", [above, st.add_node("And", [tie, odd], "tie_to_even")], "up")
    magnitude = st.add_node("Add", [f, st.add_cast(up, t, "carry")], "rounded")
    negative = st.add_node("Or", [st.add_node("Less", [x, zero], "below_zero"), st.add_node(
        "Less", [st.add_node("Div", [one, x], "reciprocal"), zero], "negative_zero")],
        "negative")
    sign = st.add_node("Sub", [one, st.add_node("Mul", [st.add_cast(negative, t, "minus"), two],
                                                "twice")], "sign")
    st.add_node("Mul", [magnitude, sign], "signed", output=y)
    if half_float:
        st.add_cast(y, T.FLOAT16, "back", output=st.w.output[0])
    st.remove("Round written as Floor(|x|) plus 1 past half or at an odd half, with x's sign",
              "Round exists from opset 11")
